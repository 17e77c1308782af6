"""What the text-rewriting proposers (``evolve``, ``opro``, ``best_of_n``) share: a child
with one component replaced, the edit they all ask for and its checks, the rejection log as
prompt text, and prompt budgeting.

**Asking for an edit** (:func:`ask_for_edit`). When the proposer's model constrains decoding
(:attr:`~sharpen.improvement.proposal.ProposerLLM.constrains`), the edit is asked for as JSON
valid against :func:`edit_schema` — ``{"component", "text", "rationale"}``, the text between
:data:`MIN_CHARS` and a limit that fits the call's ``max_tokens`` (:func:`text_limit`) — so the
grammar bounds its form and length and a reply cannot ramble past its budget. Otherwise (a
model that only validates after the fact, every replay cassette recorded before structured
output) the reply is fenced text, read as below. Either way the new text passes the same
content checks (:func:`check_text`), and the rationale, when there is one, ends the change line.

**Fenced text.** Every reply must hold a fenced block with the new text. A reply without one is
:class:`~sharpen.improvement.proposal.InvalidProposal`, as is a block that holds code when
instructions were asked for, or the unchanged text: a tiny model often answers with a
solution to some task instead of instructions, and adopting that would only waste rollouts on
a gate it cannot pass. A reply cut at ``max_tokens``
(:class:`~sharpen.improvement.proposal.CutReply`) counts only for a block the model had *closed*
before the cut (it rambled on after its answer): that block is taken, never the cut text. A
last block the model left open when it *stopped on its own* is taken as complete — small
models often forget the closing fence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.markdown import code_blocks
from sharpen.improvement.proposal import (
    CHARS_PER_TOKEN,
    THINK,
    CutReply,
    InvalidProposal,
    ProposerLLM,
    Rejection,
)
from sharpen.models.structured import ResponseSchema

DEFAULT_COMPONENT = "instructions"
"""The component the rewriting proposers change unless told otherwise."""

FORMAT = "Reply with only the new text, in plain English, inside one ``` block."
"""The closing line of every rewriting prompt."""

STOP = ["```\n\n"]
"""Stop sequences of every rewriting call: a closing fence followed by a blank line ends the
reply, so a model that would ramble on after its block (and be cut at ``max_tokens``) stops
there. The fence itself is then left out of the reply, which :func:`fenced_text` accepts."""

SYSTEM = ("You write instructions for an AI agent, in plain English. You never solve the agent's "
          "tasks yourself and never write code.")
"""The system message of every rewriting prompt."""

MIN_CHARS = 20
"""Shortest acceptable new text."""

JSON_FORMAT = ('Reply with a JSON object: "component" is "{name}", "text" is the new text in plain '
               'English, and "rationale" says in one short sentence why it should help.')
"""The closing line of a rewriting prompt when the edit is asked for as JSON."""

RATIONALE_CHARS = 160
"""Longest rationale of an edit (the grammar bounds it)."""

JSON_CHARS_PER_TOKEN = 3
"""Characters a token of a JSON string is budgeted at when the text's ``maxLength`` is fitted
to ``max_tokens``: fewer than :data:`~sharpen.improvement.proposal.CHARS_PER_TOKEN`, since
escapes and punctuation tokenise worse than prose, and a reply cut at ``max_tokens`` is
invalid JSON."""

JSON_OVERHEAD_TOKENS = 30
"""Tokens of an edit's keys, quotes and component name."""

_CODE_LANGS = {"python", "py", "python3", "sql", "bash", "sh", "shell", "javascript", "js"}
_CODE_LINE = re.compile(r"^\s*(def \w+\s*\(|class \w+\s*[:(]|import [\w.]+\s*$|from [\w.]+ import )",
                        re.MULTILINE)


def tokens(text: str) -> int:
    """Estimated tokens of ``text`` (:data:`~sharpen.improvement.proposal.CHARS_PER_TOKEN`)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def one_line(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def clip(text: str, limit_chars: int) -> str:
    """``text`` cut to ``limit_chars`` (its head kept, the cut said)."""
    return text if len(text) <= limit_chars else text[:limit_chars].rstrip() + " …[cut]"


def with_component(spec: AgentSpec, name: str, text: str, parents: list[str] | None = None) -> AgentSpec:
    """A copy of ``spec`` whose component ``name`` is ``text`` (added at the end when the
    spec had no such component); ``parents`` empty lets the engine set the lineage."""
    components = {**spec.components, name: text}
    return spec.model_copy(update={"components": components, "parents": list(parents or [])})


def check_text(text: str, *, current: str = "", min_chars: int = MIN_CHARS, lang: str = "") -> str:
    """``text`` stripped, if it can be a component's new text: :class:`InvalidProposal` when
    it is shorter than ``min_chars``, is code (``lang`` — the tag of the block it came in — a
    programming language, or lines such as ``def f(`` or ``import x``), or repeats
    ``current``."""
    text = text.strip()
    if len(text) < min_chars:
        raise InvalidProposal(f"the proposed text is shorter than {min_chars} characters")
    if lang in _CODE_LANGS or _CODE_LINE.search(text):
        raise InvalidProposal("the proposed text is code, not instructions")
    if " ".join(text.split()) == " ".join(current.split()):
        raise InvalidProposal("the proposed text repeats the current one")
    return text


def fenced_text(reply: str, *, current: str = "", min_chars: int = MIN_CHARS,
                closed_only: bool = False) -> str:
    """The new text of ``reply``: the body of its last fenced block (one left open at the end
    counts unless ``closed_only``, for a reply cut at ``max_tokens``; see the module doc).

    :class:`InvalidProposal` when there is no block, or when its body fails
    :func:`check_text`."""
    blocks = [b for b in code_blocks(reply) if b.closed or not closed_only]
    if not blocks:
        raise InvalidProposal("the reply has no ``` block with the new text")
    block = blocks[-1]
    return check_text(block.body, current=current, min_chars=min_chars, lang=block.lang or "")


async def ask_for_text(llm: ProposerLLM, prompt: str, *, current: str = "", system: str | None = SYSTEM,
                       **params) -> str:
    """Ask ``llm`` (with :data:`SYSTEM` and :data:`STOP` unless told otherwise) and return the
    new text of its reply (see :func:`fenced_text`)."""
    params.setdefault("stop", STOP)
    try:
        reply = await llm.ask(prompt, system=system, **params)
    except CutReply as cut:
        if not any(b.closed for b in code_blocks(cut.text)):
            raise
        return fenced_text(cut.text, current=current, closed_only=True)
    return fenced_text(reply, current=current)


class Edit(NamedTuple):
    """A proposed new text for one component, and why (empty when the reply gave no reason)."""

    component: str
    text: str
    rationale: str = ""


def text_limit(llm: ProposerLLM, **params: Any) -> int:
    """The longest new text a JSON edit may hold: the component limit (``llm.max_chars``),
    lowered so that the whole edit fits the call's ``max_tokens`` (at
    :data:`JSON_CHARS_PER_TOKEN`) — a reply cut there would be no edit at all."""
    limit = llm.max_chars
    budget = llm.max_tokens(**params)
    if budget is not None:
        room = budget - JSON_OVERHEAD_TOKENS - RATIONALE_CHARS // JSON_CHARS_PER_TOKEN
        limit = min(limit, room * JSON_CHARS_PER_TOKEN)
    return max(2 * MIN_CHARS, limit)


def edit_schema(components: list[str], max_chars: int) -> ResponseSchema:
    """The schema of an edit: ``component`` one of ``components`` (a ``const`` when there is
    one), ``text`` of :data:`MIN_CHARS` to ``max_chars`` characters, a ``rationale`` of at
    most :data:`RATIONALE_CHARS`."""
    component: dict[str, Any] = ({"const": components[0]} if len(components) == 1
                                 else {"enum": list(components)})
    return ResponseSchema.of({
        "type": "object",
        "properties": {
            "component": component,
            "text": {"type": "string", "minLength": MIN_CHARS, "maxLength": max_chars},
            "rationale": {"type": "string", "maxLength": RATIONALE_CHARS},
        },
        "required": ["component", "text", "rationale"],
        "additionalProperties": False,
    }, name="edit")


def edit_of(value: Any, *, current: str = "") -> Edit:
    """The :class:`Edit` of a JSON edit valid against :func:`edit_schema`, if its content can
    be used: :class:`InvalidProposal` when the text or rationale holds ``<think>``, the text
    holds a fenced block of code, or it fails :func:`check_text`."""
    text, rationale = str(value["text"]), " ".join(str(value.get("rationale", "")).split())
    if THINK.search(text) or THINK.search(rationale):
        raise InvalidProposal("the proposer's reply holds <think> reasoning")
    if any(b.lang in _CODE_LANGS for b in code_blocks(text)):
        raise InvalidProposal("the proposed text is code, not instructions")
    return Edit(str(value["component"]), check_text(text, current=current), rationale)


async def ask_for_edit(llm: ProposerLLM, prompt: Callable[[str], str], *, name: str, current: str = "",
                       system: str | None = SYSTEM, **params: Any) -> Edit:
    """A new text for component ``name`` (currently ``current``). ``prompt(fmt)`` is the
    request ending with ``fmt``, the line that says how to reply: as JSON valid against
    :func:`edit_schema` when ``llm`` constrains decoding (no stop sequences: the grammar ends
    the reply), else :data:`FORMAT` and :func:`ask_for_text` (see the module doc)."""
    if not llm.constrains:
        return Edit(name, await ask_for_text(llm, prompt(FORMAT), current=current, system=system,
                                             **params))
    schema = edit_schema([name], text_limit(llm, **params))
    value = await llm.ask_json(prompt(JSON_FORMAT.format(name=name)), schema, system=system, **params)
    return edit_of(value, current=current)


def rejection_lines(rejected: list[Rejection], limit_chars: int = 600) -> str:
    """The rejection log as prompt lines, newest first, within ``limit_chars``; empty when
    nothing was rejected."""
    out: list[str] = []
    used = 0
    for r in reversed(rejected):
        line = (f"- {one_line(r.change, 200)} (solved {r.child_successes}/{r.minibatch}, "
                f"no better than {r.parent_successes}/{r.minibatch})")
        if r.child_score is not None and r.parent_score is not None:  # another objective
            line = (f"- {one_line(r.change, 200)} (scored {r.child_score:g}/{r.minibatch} on "
                    f"the objective, no better than {r.parent_score:g}/{r.minibatch}; solved "
                    f"{r.child_successes} against {r.parent_successes})")
        if used + len(line) > limit_chars and out:
            out.append(f"- ({len(rejected) - len(out)} older ones left out)")
            break
        out.append(line)
        used += len(line)
    return "\n".join(out)


def change_line(verb: str, name: str, text: str, rationale: str = "") -> str:
    """The one-line ``change`` of a rewrite; it holds the start of the new text so that the
    rejection log tells a later proposer what was tried, and the proposer's ``rationale``
    when it gave one (so the lineage says why)."""
    line = f"{verb} {name}: “{one_line(text, 160)}”"
    return f"{line} — why: {one_line(rationale, 120)}" if rationale else line
