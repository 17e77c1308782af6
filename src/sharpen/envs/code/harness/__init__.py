"""The hidden-test harness: the program that runs *inside* the sandbox (stdlib only).

The host ships this package into the sandbox as one zip application, ``harness.pyz``
(:mod:`sharpen.envs.code.bundle`), and runs ``python -I -B harness.pyz`` with the hidden tests
on stdin. Two processes, so that candidate code never shares memory with the hidden tests:

* the **checker** (:mod:`.checker`) reads the tests from stdin, never from a file, after making
  itself non-dumpable, and runs the statements of ``check(candidate)`` one by one
  (:mod:`.plan`), reporting each failure with what the candidate returned and what was expected
  (:mod:`.messages`);
* the **worker** (:mod:`.worker`) imports the candidate program and serves calls over a
  line-based JSON RPC that carries plain data only (:mod:`.wire`); the checker's ``candidate``
  is a proxy forwarding to it (:mod:`.procs`). The first worker is forked from the checker
  before the checker reads the tests, so it costs no second interpreter start-up and holds
  nothing secret; a worker that dies is replaced by a freshly started interpreter.

An early exit or a crash of the candidate ends only its worker and fails the statements it was
serving; an object whose ``__eq__`` always returns true cannot cross the RPC. Exactly one JSON
line, the report, is written to the checker's stdout; anything missing or garbled counts as
failure on the host.

Where the sandbox has a fork server, the host plays the checker itself with the same
:class:`.checker.Harness` (:mod:`sharpen.envs.code.checking`) and only workers
(``harness.pyz --worker``) run in the sandbox.
"""
