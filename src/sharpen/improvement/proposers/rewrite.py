"""What the text-rewriting proposers (``evolve``, ``opro``, ``best_of_n``) share: a child
with one component replaced, the fenced-block reply they all ask for and its checks, the
rejection log as prompt text, and prompt budgeting.

Every reply must hold a fenced block with the new text. A reply without one is
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

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.markdown import code_blocks
from sharpen.improvement.proposal import (
    CHARS_PER_TOKEN,
    CutReply,
    InvalidProposal,
    ProposerLLM,
    Rejection,
)

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


def fenced_text(reply: str, *, current: str = "", min_chars: int = MIN_CHARS,
                closed_only: bool = False) -> str:
    """The new text of ``reply``: the body of its last fenced block (one left open at the end
    counts unless ``closed_only``, for a reply cut at ``max_tokens``; see the module doc).

    :class:`InvalidProposal` when there is no block, when the block is shorter than
    ``min_chars``, holds code (a language tag of a programming language, or lines such as
    ``def f(`` or ``import x``), or repeats ``current``."""
    blocks = [b for b in code_blocks(reply) if b.closed or not closed_only]
    if not blocks:
        raise InvalidProposal("the reply has no ``` block with the new text")
    block = blocks[-1]
    text = block.body.strip()
    if len(text) < min_chars:
        raise InvalidProposal(f"the proposed text is shorter than {min_chars} characters")
    if block.lang in _CODE_LANGS or _CODE_LINE.search(text):
        raise InvalidProposal("the proposed text is code, not instructions")
    if " ".join(text.split()) == " ".join(current.split()):
        raise InvalidProposal("the proposed text repeats the current one")
    return text


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


def rejection_lines(rejected: list[Rejection], limit_chars: int = 600) -> str:
    """The rejection log as prompt lines, newest first, within ``limit_chars``; empty when
    nothing was rejected."""
    out: list[str] = []
    used = 0
    for r in reversed(rejected):
        line = (f"- {one_line(r.change, 200)} (solved {r.child_successes}/{r.minibatch}, "
                f"no better than {r.parent_successes}/{r.minibatch})")
        if used + len(line) > limit_chars and out:
            out.append(f"- ({len(rejected) - len(out)} older ones left out)")
            break
        out.append(line)
        used += len(line)
    return "\n".join(out)


def change_line(verb: str, name: str, text: str) -> str:
    """The one-line ``change`` of a rewrite; it holds the start of the new text so that the
    rejection log tells a later proposer what was tried."""
    return f"{verb} {name}: “{one_line(text, 160)}”"
