"""From a ``submit`` action to the program the hidden tests run.

Validation (:func:`submit_error`): the action must call ``submit`` with a non-empty string
``code``; anything else gets a message saying exactly what was wrong (the env shows it to the
agent and does not count the submission).

Extraction (:func:`extract_code`): if the argument contains a Markdown fence, the code is the
first fenced block that defines ``def <entry_point>(``, else the first fenced block (an
unclosed fence runs to the end, as happens when a reply is cut off); otherwise the whole
argument.

Assembly (:func:`assemble_program`), after removing common indentation:

- **whole function** — the code defines ``def <entry_point>(`` at top level: the program is
  ``problem.prompt + "\\n\\n" + code``. The prompt supplies the imports and helper functions
  (e.g. ``poly`` for HumanEval/32), and the candidate's later ``def`` overrides the prompt's
  docstring-only stub.
- **body completion** — otherwise the code is taken as the body of the prompt's function:
  the program is ``problem.prompt + code``; if the body's first line is not indented, every
  line is indented by four spaces first.
"""

from __future__ import annotations

import re
import textwrap

from sharpen.core.markdown import code_blocks
from sharpen.core.messages import ToolSpec
from sharpen.core.trajectory import Action
from sharpen.envs.code.problem import CodeProblem

SUBMIT = ToolSpec(
    name="submit",
    description=(
        "Submit your Python solution. `code` is the complete function (with its def line and "
        "any imports it needs). It is run against hidden unit tests and you get the results."
    ),
    parameters={
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "Python source of the complete function.",
            }
        },
        "required": ["code"],
    },
    text_argument="code",
    final=True,
)
"""The one tool of the code environment."""


def submit_error(action: Action) -> str | None:
    """Why ``action`` is not a valid submission, or ``None`` if it is."""
    if action.tool != SUBMIT.name:
        return (f"Unknown tool {action.tool!r}. The only tool is `submit`, with one argument "
                "`code`: your complete Python function as a string.")
    if "code" not in action.arguments:
        got = ", ".join(sorted(action.arguments)) or "none"
        return (f"`submit` needs the argument `code` (your complete Python function as a "
                f"string); arguments given: {got}.")
    code = action.arguments["code"]
    if not isinstance(code, str):
        return f"`code` must be a string of Python source, not {type(code).__name__}."
    if not code.strip():
        return "`code` is empty. Submit your complete Python function."
    return None


def _defines(code: str, entry_point: str) -> bool:
    return re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def extract_code(text: str, entry_point: str) -> str:
    """The code inside ``text`` (see the module doc for the fence rules)."""
    if "```" not in text:
        return text
    blocks = [b.body for b in code_blocks(text)]
    if not blocks:
        return text.replace("```", "")
    for block in blocks:
        if _defines(textwrap.dedent(block), entry_point):
            return block
    return blocks[0]


def assemble_program(code: str, problem: CodeProblem) -> str:
    """The program the tests run for submitted ``code`` (see the module doc)."""
    code = extract_code(code, problem.entry_point)
    dedented = textwrap.dedent(code).strip("\n")
    if _defines(dedented, problem.entry_point):
        return problem.prompt + "\n\n" + dedented + "\n"
    body = code.strip("\n")
    first = next((line for line in body.splitlines() if line.strip()), "")
    if first and not first[0].isspace():
        body = textwrap.indent(body, "    ")
    prompt = problem.prompt if problem.prompt.endswith("\n") else problem.prompt + "\n"
    return prompt + body + "\n"
