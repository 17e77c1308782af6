"""Example sharpen plug-ins, registered through the ``sharpen`` entry-point group (see this
package's ``pyproject.toml``) and used as the worked example of docs/plugins.md:

- ``env.arith`` / ``verifier.arith`` — :mod:`.arith`: one arithmetic question per task,
  answered with ``submit(answer)``;
- ``agent.ask_once`` — :mod:`.agent`: asks the model once and submits its reply;
- ``model.arith_bot`` — :mod:`.model`: a rule-based "model" that computes the arithmetic in
  the question, so runs need no weights and no server;
- ``proposer.fixed_hint`` — :mod:`.proposer`: appends a fixed hint to a text component.

Nothing is imported here: sharpen imports each module the first time its name is asked for.
"""
