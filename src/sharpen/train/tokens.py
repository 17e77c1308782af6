"""A trajectory as the token ids a trainer computes on: the whole conversation under the
model's chat template, with a mask for the agent's tokens and one for the environment's.

:func:`tokenize_trajectory` (a stored or in-memory :class:`~sharpen.core.trajectory.Trajectory`)
and :func:`tokenize_messages` (any message list) return a :class:`TokenizedConversation`:

- ``input_ids`` — the conversation rendered by the tokenizer's chat template and tokenized;
- ``loss_mask`` — 1 on the tokens of every assistant reply, and on the end-of-turn token
  (the tokenizer's ``eos_token``, ``<|im_end|>`` for SmolLM2) that closes it when the
  template puts one right after the reply: a model trained on the mask learns to stop.
  Decoding the masked tokens of a reply without that token gives back exactly the reply's
  text; everything else (system prompt, task, template markup) is 0;
- ``env_mask`` — 1 on the tokens of the environment's answers: every ``user`` or ``tool``
  message after the first reply (observations, tool results, invalid-action feedback). The
  task itself (the first user message) is prompt, in neither mask. ECHO's auxiliary loss
  and TRL's tool masks read this one;
- ``logprobs`` — per token, the log-probability the backend gave the reply's token, ``None``
  elsewhere, or ``None`` as a whole when no reply has any. A stored trajectory's come from
  its steps (``Step.logprobs``, kept when the model ran with ``logprobs=true``:
  :func:`step_logprobs`); in memory, pass them in as ``reply_logprobs``. They are placed on
  a reply only when they align with its tokens here: as many values as the reply's tokens
  (with or without its end-of-turn token) and, where the backend gave them, the same token
  texts or ids. Otherwise — a reply the model sampled in another tokenization than this one,
  a tokenizer not the model's, a reply cut at a stop string — that reply's stay ``None``
  and :attr:`TokenizedConversation.unaligned` counts it: never shifted onto other tokens;
- ``segments`` — ``[role, kind, start, end)`` of every piece, so a trainer can slice
  replies or observations without re-deriving the masks; ``prompt_length`` — the tokens
  before the first reply (the prompt a GRPO rollout starts from, ending with the template's
  generation prompt ``<|im_start|>assistant\\n``).

Rendering is the embedded model's (:func:`sharpen.models.local._to_chat`): tool calls are
JSON lines after the reply's text and tool results are ``tool`` messages, since SmolLM2's
template renders neither. Text-protocol runs describe their tools in the system prompt
already, so tools are never rendered a second time.

The ids are a re-tokenization of the stored text piece by piece — the markup, then each
message's content on its own — so decoding any piece gives back exactly its text
(byte-level BPE round-trips text). That is also how the model met a reply: it generated the
reply's tokens after the generation prompt's own, not merged with them. It can differ from
one pass over the whole text where a piece boundary falls inside a run of whitespace (a reply
that starts with a newline right after the header's): a single pass would merge the two.
And a reply the model sampled in a non-canonical tokenization gets the canonical one (its
logprobs then do not align, see above).

Needs ``transformers`` (the ``train`` extra) only for :func:`embedded_tokenizer`; the
functions take any tokenizer with ``apply_chat_template``, ``__call__`` and ``eos_token``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from sharpen.core.errors import UserError
from sharpen.core.messages import Message
from sharpen.core.trajectory import TokenLogprobs, Trajectory
from sharpen.models.local import _to_chat, gguf_path

Kind = Literal["prompt", "assistant", "env", "template"]
"""What a segment is: the messages before the first reply, a reply (with its end-of-turn
token), an environment answer, or chat-template markup between them."""


@dataclass
class Segment:
    """Tokens ``[start, end)`` of one piece of the rendered conversation."""

    kind: Kind
    start: int
    end: int
    message: int | None
    """Index of the message the piece is the content of (``None`` for markup)."""
    role: str | None = None


@dataclass
class TokenizedConversation:
    """Token ids and masks of one conversation (see the module docstring); every list is as
    long as ``input_ids``."""

    input_ids: list[int]
    loss_mask: list[int]
    env_mask: list[int]
    logprobs: list[float | None] | None
    prompt_length: int
    segments: list[Segment] = field(default_factory=list)
    unaligned: int = 0
    """Replies whose given logprobs did not align with their tokens here (left ``None``)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object of a ``tokens`` export line (without ``meta``)."""
        return {"input_ids": self.input_ids, "loss_mask": self.loss_mask, "env_mask": self.env_mask,
                "logprobs": self.logprobs, "prompt_length": self.prompt_length,
                "segments": [asdict(s) for s in self.segments]}


def embedded_tokenizer(gguf: str | PathLike[str] | None = None) -> Any:
    """The tokenizer (with its chat template) of the GGUF model ``gguf``, default the embedded
    SmolLM2's: read from the file's metadata, without loading the weights. Load it once and
    pass it around — it takes seconds."""
    path = Path(gguf).expanduser().resolve() if gguf else gguf_path()
    try:
        from transformers import AutoTokenizer
    except ImportError:
        from sharpen.train.checkpoint import INSTALL_FIX
        raise UserError("token exports need transformers", INSTALL_FIX) from None
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def load_tokenizer(ref: str | PathLike[str] | None = None) -> Any:
    """The tokenizer ``--tokenizer`` names: a ``.gguf`` file, a Hugging Face checkpoint
    folder, or ``None`` for the embedded model's."""
    if ref is None or str(ref).endswith(".gguf"):
        return embedded_tokenizer(ref)
    if not Path(ref).expanduser().is_dir():
        raise UserError(f"tokenizer {ref} is neither a gguf file nor a checkpoint folder",
                        "pass --tokenizer a GGUF model file or a folder written by sharpen checkpoint")
    from sharpen.train.hf import load_tokenizer as checkpoint_tokenizer
    return checkpoint_tokenizer(Path(ref).expanduser())


ReplyLogprobs = Sequence[float] | TokenLogprobs | None
"""One reply's logprobs: plain values, or a step's (with the token texts or ids that check
their alignment), or none."""


def step_logprobs(trajectory: Trajectory, messages: Sequence[Message]) -> list[TokenLogprobs | None]:
    """For each assistant message of ``messages`` (``trajectory``'s, or a prefix of them),
    the logprobs its step stored (``Step.logprobs``), ``None`` where it stored none. A step's
    reply is its last assistant message; replies and steps are paired from the end, each
    reply with the latest unpaired step that holds an equal reply, because
    ``trajectory.messages`` of a multi-trial agent (``reflexion``) keeps only the last
    trial's conversation while its steps hold every trial's (and reflection calls)."""
    replies = [m for m in messages if m.role == "assistant"]
    out: list[TokenLogprobs | None] = [None] * len(replies)
    steps = [s for s in trajectory.steps if any(m.role == "assistant" for m in s.messages)]
    j = len(steps) - 1
    for i in range(len(replies) - 1, -1, -1):
        k = j
        while k >= 0 and [m for m in steps[k].messages if m.role == "assistant"][-1] != replies[i]:
            k -= 1
        if k >= 0:  # else no step holds this reply (e.g. an agent that stores no steps)
            out[i], j = steps[k].logprobs, k - 1
    return out


def tokenize_trajectory(trajectory: Trajectory, tokenizer: Any, *,
                        reply_logprobs: Sequence[ReplyLogprobs] | None = None,
                        through_last_reply: bool = True) -> TokenizedConversation:
    """:func:`tokenize_messages` of ``trajectory.messages``, by default up to the agent's last
    reply (the environment's final verdict is nothing the model said or saw; the training
    exports end there too). ``reply_logprobs``: one entry per assistant message, as for
    :func:`tokenize_messages`; default: the ones its steps stored (:func:`step_logprobs`;
    a trajectory read without its steps has none). :class:`ValueError` if the trajectory
    has no reply."""
    messages = list(trajectory.messages)
    if through_last_reply:
        last = max((k for k, m in enumerate(messages) if m.role == "assistant"), default=-1)
        if last < 0:
            raise ValueError(f"trajectory {trajectory.id} has no assistant reply")
        messages = messages[: last + 1]
    if reply_logprobs is None:
        reply_logprobs = step_logprobs(trajectory, messages)
    return tokenize_messages(messages, tokenizer, reply_logprobs=reply_logprobs)


def tokenize_messages(messages: Sequence[Message], tokenizer: Any, *,
                      reply_logprobs: Sequence[ReplyLogprobs] | None = None,
                      ) -> TokenizedConversation:
    """Token ids, masks and segments of ``messages`` under ``tokenizer``'s chat template.

    ``reply_logprobs``: for each assistant message in order, the backend's per-token logprobs
    of the reply or ``None``; they are used only when they align with the reply's tokens
    (:func:`_aligned`: one value per token, end-of-turn token included or not — that one then
    gets ``None`` — and the same token texts or ids where given), else that reply's logprobs
    stay ``None`` and count in ``unaligned``. :class:`ValueError` when the template changes a
    message's text (then no mask could be exact)."""
    chat = _to_chat(list(messages))
    rendered: str = tokenizer.apply_chat_template(chat, tokenize=False)
    # Render once more with a marker for each content: what lies between markers is the
    # template's markup, found without searching the text (a reply "user" or "\n" would
    # match markup). The pieces must join back into the real rendering.
    marked = [{**m, "content": f"\x00{i}\x00" if m["content"] else ""} for i, m in enumerate(chat)]
    parts = re.split("\x00([0-9]+)\x00", tokenizer.apply_chat_template(marked, tokenize=False))
    eos: str = tokenizer.eos_token or ""
    first_reply = next((i for i, m in enumerate(chat) if m["role"] == "assistant"), len(chat))
    pieces: list[tuple[str, Kind, int | None]] = [(parts[0], "template", None)]
    for k in range(1, len(parts), 2):
        i, markup = int(parts[k]), parts[k + 1]
        kind: Kind = ("assistant" if chat[i]["role"] == "assistant"
                      else "env" if i > first_reply else "prompt")
        content = chat[i]["content"]
        if kind == "assistant" and eos and markup.startswith(eos):
            content, markup = content + eos, markup[len(eos):]  # the end-of-turn token is the reply's
        pieces += [(content, kind, i), (markup, "template", None)]
    if "".join(text for text, _, _ in pieces) != rendered:
        raise ValueError("the chat template changes the messages' text: no mask could be exact")

    ids: list[int] = []
    loss: list[int] = []
    env: list[int] = []
    segments: list[Segment] = []
    for text, kind, index in pieces:
        if not text:
            continue
        piece = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        segments.append(Segment(kind, len(ids), len(ids) + len(piece), index,
                                chat[index]["role"] if index is not None else None))
        ids += piece
        loss += [int(kind == "assistant")] * len(piece)
        env += [int(kind == "env")] * len(piece)
    prompt_length = next((s.start for s in segments if s.kind == "assistant"), len(ids))
    replies = [i for i, m in enumerate(chat) if m["role"] == "assistant"]
    logprobs, unaligned = _place_logprobs(segments, ids, replies, reply_logprobs, tokenizer)
    return TokenizedConversation(ids, loss, env, logprobs, prompt_length, segments, unaligned)


def _place_logprobs(segments: list[Segment], ids: list[int], replies: list[int],
                    reply_logprobs: Sequence[ReplyLogprobs] | None, tokenizer: Any,
                    ) -> tuple[list[float | None] | None, int]:
    """Per-token logprobs from per-reply ones (see :func:`tokenize_messages`), and how many
    replies' did not align; ``replies``: the indices of the assistant messages, in order."""
    if not reply_logprobs or all(r is None for r in reply_logprobs):
        return None, 0
    out: list[float | None] = [None] * len(ids)
    placed = unaligned = 0
    by_message = {s.message: s for s in segments if s.kind == "assistant"}
    for seg, given in zip((by_message.get(i) for i in replies), reply_logprobs, strict=False):
        if given is None or not (given.logprobs if isinstance(given, TokenLogprobs) else given):
            continue  # none given (an empty reply scores no token)
        values = None if seg is None else _aligned(given, ids[seg.start: seg.end], tokenizer)
        if seg is None or values is None:
            unaligned += 1
            continue
        out[seg.start: seg.start + len(values)] = values
        placed += 1
    return (out if placed else None), unaligned


def _aligned(given: Sequence[float] | TokenLogprobs, ids: list[int], tokenizer: Any) -> list[float] | None:
    """``given`` as the logprobs of the reply tokens ``ids`` (its end-of-turn token last, or
    not), or ``None`` when they are not theirs: another count, or other token ids or texts
    than the backend's. Texts are compared as decoded here, without U+FFFD: a token holding
    part of a character decodes to it here, and llama.cpp drops the partial bytes."""
    values = list(given.logprobs if isinstance(given, TokenLogprobs) else given)
    eot = bool(ids) and ids[-1] == getattr(tokenizer, "eos_token_id", None)
    text_ids = ids[:-1] if eot else ids  # the end-of-turn token has no text to compare
    if not ids or len(values) not in {len(ids), len(text_ids)}:
        return None
    if isinstance(given, TokenLogprobs) and given.token_ids is not None:
        if given.token_ids[: len(text_ids)] != text_ids:
            return None
    elif isinstance(given, TokenLogprobs) and given.tokens is not None:
        texts = [tokenizer.decode([i]).replace("\ufffd", "") for i in text_ids]
        if texts != [t.replace("\ufffd", "") for t in given.tokens[: len(text_ids)]]:
            return None
    return [float(v) for v in values]
