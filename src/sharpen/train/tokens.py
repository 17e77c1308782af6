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
  elsewhere, or ``None`` as a whole when no reply has any (sharpen's agents do not store a
  reply's logprobs today: pass them in as ``reply_logprobs`` when you have them);
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
And a reply the model sampled in a non-canonical tokenization gets the canonical one: no
backend stores the sampled ids today.

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
from sharpen.core.trajectory import Trajectory
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


def tokenize_trajectory(trajectory: Trajectory, tokenizer: Any, *,
                        reply_logprobs: Sequence[Sequence[float] | None] | None = None,
                        through_last_reply: bool = True) -> TokenizedConversation:
    """:func:`tokenize_messages` of ``trajectory.messages``, by default up to the agent's last
    reply (the environment's final verdict is nothing the model said or saw; the training
    exports end there too). ``reply_logprobs``: one entry per assistant message, as for
    :func:`tokenize_messages`. :class:`ValueError` if the trajectory has no reply."""
    messages = list(trajectory.messages)
    if through_last_reply:
        last = max((k for k, m in enumerate(messages) if m.role == "assistant"), default=-1)
        if last < 0:
            raise ValueError(f"trajectory {trajectory.id} has no assistant reply")
        messages = messages[: last + 1]
    return tokenize_messages(messages, tokenizer, reply_logprobs=reply_logprobs)


def tokenize_messages(messages: Sequence[Message], tokenizer: Any, *,
                      reply_logprobs: Sequence[Sequence[float] | None] | None = None,
                      ) -> TokenizedConversation:
    """Token ids, masks and segments of ``messages`` under ``tokenizer``'s chat template.

    ``reply_logprobs``: for each assistant message in order, the backend's per-token logprobs
    of the reply or ``None``; a list is used only when it has one value per reply token
    (end-of-turn token included or not — that one then gets ``None``), else that reply's
    logprobs stay ``None``. :class:`ValueError` when the template changes a message's text
    (then no mask could be exact)."""
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
    logprobs = _place_logprobs(segments, len(ids), replies, reply_logprobs)
    return TokenizedConversation(ids, loss, env, logprobs, prompt_length, segments)


def _place_logprobs(segments: list[Segment], n: int, replies: list[int],
                    reply_logprobs: Sequence[Sequence[float] | None] | None) -> list[float | None] | None:
    """Per-token logprobs from per-reply lists (see :func:`tokenize_messages`); ``replies``:
    the indices of the assistant messages, in order."""
    if not reply_logprobs or all(r is None for r in reply_logprobs):
        return None
    out: list[float | None] = [None] * n
    by_message = {s.message: s for s in segments if s.kind == "assistant"}
    for seg, values in zip((by_message.get(i) for i in replies), reply_logprobs, strict=False):
        if seg is not None and values is not None and len(values) in (seg.end - seg.start,
                                                                      seg.end - seg.start - 1):
            out[seg.start: seg.start + len(values)] = [float(v) for v in values]
    return out
