"""Fine-tuning data from stored runs: SFT examples, preference pairs and RL groups, kept or
dropped by their outcome and feedback.

Every format is one JSON object per line, in the conversational shapes TRL's trainers read
(``messages`` lists of OpenAI chat messages):

- ``jsonl`` — everything stored about a trajectory: task, messages, tools, outcome, feedback,
  usage (``sharpen export``'s original format);
- ``sft`` — ``{"messages": [...]}`` for ``SFTTrainer``; ``"tools"`` (JSON Schema) is added
  when the conversation used native tool calls (a text-protocol run describes its tools in
  the system prompt, and a second copy would teach the model a prompt it never saw);
- ``completion`` — ``{"prompt": [...], "completion": [reply]}``, one line per agent reply
  (the conversation before it is the prompt), ``"tools"`` as for ``sft``: TRL's
  ``SFTTrainer`` then puts the loss on the replies only, which ``messages`` cannot do for a
  chat template without generation markers (SmolLM2's has none);
- ``preference`` — ``{"prompt": [...], "chosen": [...], "rejected": [...]}`` for
  ``DPOTrainer`` / ``RewardTrainer``: two trajectories with the *same prompt* (the messages
  before the first assistant reply) where ``chosen`` scored strictly better — or, with
  ``preference="judge"``, where a pairwise judge preferred it (:func:`_judged_pairs`);
- ``groups`` — ``{"prompt": [...], "completions": [[...], ...], "rewards": [...],
  "advantages": [...]}``: every kept trajectory of one prompt, with group-normalised
  advantages ``(r − mean) / std`` as GRPO uses them (all 0 when the group's rewards are equal);
- ``tokens`` — ``{"input_ids", "loss_mask", "env_mask", "logprobs", "prompt_length",
  "segments"}``: the conversation as token ids under a tokenizer's chat template (default the
  embedded model's), with the agent's and the environment's tokens marked and the logprobs
  the steps stored (a run with ``logprobs=true``) on the tokens they align with
  (:mod:`sharpen.train.tokens`; :attr:`ExportCount.unaligned` counts the replies whose did not).

The training formats end each conversation at the agent's last reply: the environment's
final verdict (``5/5 tests passed.``) is nothing the model says, and a trainer that computes
its loss on every completion token would teach the model to say it. Observations *between*
replies stay (they are the multi-turn context); use the trainer's assistant-only loss for SFT.

A trajectory's score is ``(success, reward)``: a success beats a failure, then the higher
reward (for ``code``, the fraction of hidden tests passed). Every line but ``jsonl``'s carries
``meta`` (run, trajectory and task ids, scores) so a training example can be traced back to
its episode; drop the column if a trainer objects.

Which trajectories are used is a :class:`Where`. Attempts that ended in an ``env``,
``infra``, ``judge`` or ``user_sim`` error say nothing about the agent and are left out unless
``include_errors``. :attr:`ExportCount.kept_test` counts kept episodes on ``test``-split
tasks, which training data should not hold (the CLI warns).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, field_validator

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback, FeedbackSource
from sharpen.core.outcome import Outcome
from sharpen.core.registry import REGISTRY
from sharpen.core.task import Split
from sharpen.core.trajectory import Trajectory
from sharpen.envs.base import ENV
from sharpen.envs.generation import check_split
from sharpen.store import Store

Format = Literal["jsonl", "sft", "completion", "preference", "groups", "tokens"]
FORMATS: tuple[str, ...] = get_args(Format)
PreferenceSource = Literal["verifier", "judge"]
"""What makes a preference pair: the outcome's score, or a pairwise judge's verdict."""
PREFERENCE_SOURCES: tuple[str, ...] = get_args(PreferenceSource)
SOURCES: tuple[str, ...] = get_args(FeedbackSource)

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "!=": operator.ne, ">": operator.gt, "<": operator.lt,
    "=": operator.eq,
}
_CONDITION = re.compile(r"^\s*(?:(?P<source>[a-z_]+):)?(?P<name>[^<>=!:\s]+)\s*"
                        r"(?:(?P<op>>=|<=|!=|=|>|<)\s*(?P<value>.+?))?\s*$")


class FeedbackCondition(BaseModel):
    """A condition on a trajectory's feedback, written ``[source:]name[op value]``: e.g.
    ``human:verdict=good``, ``judge:helpfulness>=4``, ``tests_passed>0``. Without an
    operator the record must exist and not be false. It is checked against the newest record
    of that name (and source, if given) that no later record supersedes; a trajectory
    without one fails it."""

    source: str | None = None
    name: str
    op: str | None = None
    value: str | None = None

    @classmethod
    def parse(cls, text: str) -> FeedbackCondition:
        """The condition ``text`` spells; a :class:`UserError` naming the syntax otherwise."""
        m = _CONDITION.match(text)
        if m is None:
            raise UserError(f"cannot read the feedback condition {text!r}",
                            "write [source:]name[op value], e.g. human:verdict=good or "
                            "judge:helpfulness>=4 (op one of = != > >= < <=)")
        source = m["source"]
        if source is not None and source not in SOURCES:
            raise UserError(f"unknown feedback source {source!r} in {text!r}",
                            f"use one of {', '.join(SOURCES)}, or leave the source out")
        return cls(**m.groupdict())

    def __str__(self) -> str:
        head = f"{self.source}:{self.name}" if self.source else self.name
        return head if self.op is None else f"{head}{self.op}{self.value}"

    def holds(self, records: list[Feedback]) -> bool:
        """Whether the newest current record this condition names satisfies it."""
        replaced = {f.supersedes for f in records if f.supersedes}
        found = [f for f in records if f.name == self.name and f.id not in replaced
                 and (self.source is None or f.source == self.source)]
        if not found:
            return False
        value = max(found, key=lambda f: f.created_at).value
        if self.op is None:
            return value is not None and value is not False
        return _compare(value, self.op, self.value or "")


def _compare(value: float | bool | str | None, op: str, wanted: str) -> bool:
    """``value op wanted``: numerically when both read as numbers, a bool against
    ``true``/``false``, else as text (so ``verdict=good`` and ``score>=4`` both do what they
    say). An order between texts or bools never holds."""
    if value is None:
        return False
    if isinstance(value, bool):
        want = wanted.strip().lower()
        if op not in ("=", "!=") or want not in ("true", "false"):
            return False
        return (value == (want == "true")) == (op == "=")
    try:
        return _OPS[op](float(value), float(wanted))
    except ValueError:
        return op in ("=", "!=") and _OPS[op](str(value), wanted)


class Where(BaseModel):
    """Which stored trajectories an export uses; every set condition must hold."""

    success: bool | None = None
    """Keep only successes (``True``) or only failures (``False``)."""
    split: Split | None = None
    """Keep only tasks of this split (``train`` keeps held-out tasks out of training data)."""
    min_reward: float | None = None
    """Keep only trajectories whose reward is at least this."""
    feedback: list[FeedbackCondition] = Field(default_factory=list)
    """Conditions on feedback records (all must hold)."""
    include_errors: bool | None = None
    """Keep attempts that ended in a non-agent error or did not end (they say nothing about
    the agent); ``None``: the format decides — ``jsonl``, the full dump, keeps them, the
    training formats do not. Training formats never use an attempt that did not end or in
    which the agent never replied."""

    def describe(self) -> str:
        """The conditions in words, e.g. ``success, reward ≥ 0.5, human:verdict=good``."""
        parts = [] if self.success is None else ["success" if self.success else "failure"]
        if self.split is not None:
            parts.append(f"{self.split} split")
        if self.min_reward is not None:
            parts.append(f"reward ≥ {self.min_reward:g}")
        parts += [str(c) for c in self.feedback]
        if self.include_errors:
            parts.append("errors included")
        return ", ".join(parts) or "no filter"

    @field_validator("split", mode="before")
    @classmethod
    def _known_split(cls, value: str | None) -> str | None:
        check_split(value)  # a UserError that names the splits, not a validation trace
        return value

    def keeps(self, t: Trajectory, records: list[Feedback]) -> bool:
        """Whether ``t`` (with its feedback ``records``) passes."""
        o = t.outcome
        if (o is None or not o.counts) and not self.include_errors:
            return False
        if self.success is not None and (o is None or o.success != self.success):
            return False
        if self.split is not None and t.task.split != self.split:
            return False
        if self.min_reward is not None and (o is None or o.reward < self.min_reward):
            return False
        return all(c.holds(records) for c in self.feedback)


@dataclass
class ExportCount:
    """What an export read, kept and wrote."""

    read: int = 0
    """Trajectories read."""
    kept: int = 0
    """Trajectories that passed the :class:`Where`."""
    written: int = 0
    """Lines written (trajectories, examples, pairs or groups)."""
    kept_test: int = 0
    """Kept trajectories on ``test``-split tasks: training on them leaks the held-out tasks."""
    unit: str = "trajectories"
    """What a line is, in words."""
    runs: list[str] = field(default_factory=list)
    """Full ids of the runs read."""
    where: str = ""
    """The filter applied, in words (:meth:`Where.describe`, the format's defaults resolved)."""
    ties: int = 0
    """Judge pairs: pairs the judge found tied (share 0.5), left out."""
    unpaired: int = 0
    """Judge pairs: decisive verdicts left out because the other trajectory was not kept (its
    run not exported, or filtered out) or the two prompts differ."""
    unaligned: int = 0
    """Tokens: replies with stored logprobs that did not align with the tokenizer's tokens."""


@dataclass
class _Kept:
    run_id: str
    t: Trajectory
    records: list[Feedback]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    """The tools the run's environment offered (OpenAI JSON Schema)."""

    @property
    def outcome(self) -> Outcome:
        """The trajectory's outcome: every format but ``jsonl`` reads only finished trajectories
        (``_kept(finished_only=True)``), which have one."""
        if self.t.outcome is None:
            raise AssertionError(f"trajectory {self.t.id} has no outcome")
        return self.t.outcome

    @property
    def score(self) -> tuple[bool, float]:
        return (self.outcome.success, self.outcome.reward)

    def turns(self) -> list[dict[str, Any]]:
        """The conversation up to the agent's last reply: what follows it (the environment's
        verdict) is nothing the model says, and a trainer would learn to say it."""
        last = max((k for k, m in enumerate(self.messages) if m["role"] == "assistant"), default=-1)
        return self.messages[: last + 1]

    def split(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(prompt, completion) of :meth:`turns`: the messages before the first assistant
        reply, and the rest."""
        turns = self.turns()
        i = next((k for k, m in enumerate(turns) if m["role"] == "assistant"), len(turns))
        return turns[:i], turns[i:]

    def meta(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "trajectory_id": self.t.id, "task": self.t.task.hash(),
                "success": self.outcome.success, "reward": self.outcome.reward}


def _uses_tool_calls(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("tool_calls") or m["role"] == "tool" for m in messages)


def export(
    store: Store, runs: Iterable[str], fmt: str, where: Where | None = None, *,
    pairs_per_prompt: int = 1, preference: str = "verifier", tokenizer: Any = None,
) -> tuple[Iterator[dict[str, Any]], ExportCount]:
    """Lines of ``fmt`` (one of :data:`FORMATS`) from the trajectories of ``runs`` (ids,
    prefixes or ``latest``) that ``where`` keeps; the count fills in as the lines are read.
    ``pairs_per_prompt`` bounds the preference pairs made from one prompt (best against
    worst, then second best against second worst, ...). ``preference="judge"`` makes the
    pairs from pairwise judge verdicts instead (:func:`_judged_pairs`; every decisive judged
    pair is a line, ``pairs_per_prompt`` does not apply). ``tokenizer`` (``tokens`` only): a
    loaded tokenizer, or what :func:`sharpen.train.tokens.load_tokenizer` takes (``None``:
    the embedded model's)."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}", f"use --format with one of {', '.join(FORMATS)}")
    if pairs_per_prompt < 1:
        raise UserError(f"pairs per prompt must be at least 1, got {pairs_per_prompt}",
                        "set --pairs-per-prompt to 1 or more")
    if preference not in PREFERENCE_SOURCES:
        raise UserError(f"unknown preference source {preference!r}",
                        f"use --pairs with one of {', '.join(PREFERENCE_SOURCES)}")
    label = "embedded" if tokenizer is None else str(tokenizer)  # what meta names
    if fmt == "tokens" and (tokenizer is None or isinstance(tokenizer, str | PathLike)):
        from sharpen.train.tokens import load_tokenizer  # needs transformers; fails before a line

        tokenizer = load_tokenizer(tokenizer)
    elif fmt == "tokens":
        label = tokenizer.name_or_path
    where = where or Where()
    if where.include_errors is None:
        where = where.model_copy(update={"include_errors": fmt == "jsonl"})
    ids = list(dict.fromkeys(store.resolve_run(r) for r in runs))  # a run named twice is read once
    count = ExportCount(runs=ids)
    pairs = ((lambda k: _judged_pairs(k, count)) if preference == "judge"
             else (lambda k: _pairs(k, pairs_per_prompt)))
    unit, write = {"jsonl": ("trajectories", _jsonl), "sft": ("examples", _sft),
                   "completion": ("examples", _completions),
                   "preference": ("pairs", pairs),
                   "groups": ("groups", _groups),
                   "tokens": ("trajectories", lambda k: _tokens(k, tokenizer, label, count))}[fmt]
    count.unit, count.where = unit, where.describe()
    lines = write(_kept(store, ids, where, count, finished_only=fmt != "jsonl", steps=fmt == "tokens"))

    def counted() -> Iterator[dict[str, Any]]:
        for line in lines:
            count.written += 1
            yield line
    return counted(), count


def _kept(store: Store, ids: list[str], where: Where, count: ExportCount, *,
          finished_only: bool, steps: bool = False) -> Iterator[_Kept]:
    for rid in ids:
        tools = [s.to_openai() for s in REGISTRY.create(ENV, store.get_run(rid).manifest.env).tools]
        for t in store.iter_trajectories(rid, with_steps=steps, with_messages=True):
            count.read += 1
            records = store.feedback_for(t.id)
            if finished_only and (t.outcome is None or not any(m.role == "assistant" for m in t.messages)):
                continue  # unfinished, or the agent never replied: nothing to learn from
            if where.keeps(t, records):
                count.kept += 1
                count.kept_test += t.task.split == "test"
                yield _Kept(rid, t, records, [m.to_openai() for m in t.messages], tools)


def _jsonl(kept: Iterable[_Kept]) -> Iterator[dict[str, Any]]:
    for k in kept:
        t = k.t
        yield {"run_id": k.run_id, "trajectory_id": t.id, "task": t.task.model_dump(mode="json"),
               "agent_hash": t.agent_hash, "epoch": t.epoch, "messages": k.messages, "tools": k.tools,
               "outcome": t.outcome.model_dump(mode="json") if t.outcome else None,
               "feedback": [f.model_dump(mode="json") for f in k.records],
               "usage": t.usage.model_dump(mode="json")}


def _sft(kept: Iterable[_Kept]) -> Iterator[dict[str, Any]]:
    for k in kept:
        turns = k.turns()
        line: dict[str, Any] = {"messages": turns}
        if _uses_tool_calls(turns):
            line["tools"] = k.tools
        line["meta"] = k.meta()
        yield line


def _completions(kept: Iterable[_Kept]) -> Iterator[dict[str, Any]]:
    for k in kept:
        turns = k.turns()
        replies = [i for i, m in enumerate(turns) if m["role"] == "assistant"]
        for n, i in enumerate(replies):
            line: dict[str, Any] = {"prompt": turns[:i], "completion": [turns[i]]}
            if _uses_tool_calls(turns):
                line["tools"] = k.tools
            line["meta"] = {**k.meta(), "reply": n}
            yield line


def _tokens(kept: Iterable[_Kept], tokenizer: Any, label: str,
            count: ExportCount) -> Iterator[dict[str, Any]]:
    from sharpen.train.tokens import tokenize_trajectory

    for k in kept:
        tokens = tokenize_trajectory(k.t, tokenizer)  # its steps' logprobs
        count.unaligned += tokens.unaligned
        yield {**tokens.to_json(), "meta": {**k.meta(), "tokenizer": label}}


def _by_prompt(kept: Iterable[_Kept]) -> list[list[_Kept]]:
    """Kept trajectories grouped by identical prompt, groups in first-seen order, each
    sorted best first (ties by trajectory id, so the output is deterministic)."""
    groups: dict[str, list[_Kept]] = {}
    for k in kept:
        groups.setdefault(repr(k.split()[0]), []).append(k)
    return [sorted(g, key=lambda k: (not k.score[0], -k.score[1], k.t.id)) for g in groups.values()]


def _pairs(kept: Iterable[_Kept], per_prompt: int) -> Iterator[dict[str, Any]]:
    for group in _by_prompt(kept):
        for i in range(min(per_prompt, len(group) // 2)):
            good, bad = group[i], group[-1 - i]
            if good.score <= bad.score:
                break  # the rest of the group ties: no preference to learn
            prompt, chosen = good.split()
            yield {"prompt": prompt, "chosen": chosen, "rejected": bad.split()[1],
                   "meta": {"chosen": good.meta(), "rejected": bad.meta()}}


def _pairwise_verdicts(k: _Kept) -> dict[tuple[str, str, str], Feedback]:
    """``(author, name, other trajectory) → record``: the current pairwise judge records on
    ``k`` (newest per judge, criterion and other trajectory, superseded ones dropped)."""
    replaced = {f.supersedes for f in k.records if f.supersedes}
    out: dict[tuple[str, str, str], Feedback] = {}
    for f in sorted(k.records, key=lambda f: f.created_at):
        if f.source == "judge" and f.versus and f.id not in replaced:
            out[(f.author, f.name, f.versus)] = f
    return out


def _judged_pairs(kept: Iterable[_Kept], count: ExportCount) -> Iterator[dict[str, Any]]:
    """Preference pairs from pairwise judge verdicts (``sharpen judge A --judge pairwise
    --versus B``): a record on ``a`` with ``versus=b`` is ``a``'s share of the preference (1
    preferred, 0.5 tie, 0 ``b`` preferred). A pair's share is the mean of every current
    verdict on it, whichever side it was stored on and whichever judge or criterion gave it
    (a record on ``b`` counts as ``1 − value``); above 0.5 ``a`` is chosen, below ``b``, and
    a tie is left out. Both trajectories must be kept (name both runs) and share the prompt,
    as DPO needs; :attr:`ExportCount.ties` and :attr:`ExportCount.unpaired` count the rest."""
    kept = list(kept)  # the other side of a pair may come later (the other run)
    by_id = {k.t.id: k for k in kept}
    shares: dict[tuple[str, str], list[float]] = {}
    for k in kept:
        for fb in _pairwise_verdicts(k).values():
            if isinstance(fb.value, str) or fb.value is None or fb.versus is None:
                continue
            a, b = sorted((k.t.id, fb.versus))
            value = float(fb.value)
            shares.setdefault((a, b), []).append(value if a == k.t.id else 1.0 - value)
    for (a, b), values in shares.items():
        share = sum(values) / len(values)
        if share == 0.5:
            count.ties += 1
            continue
        ka, kb = by_id.get(a), by_id.get(b)
        if ka is None or kb is None or ka.split()[0] != kb.split()[0]:
            count.unpaired += 1
            continue
        good, bad = (ka, kb) if share > 0.5 else (kb, ka)
        prompt, chosen = good.split()
        yield {"prompt": prompt, "chosen": chosen, "rejected": bad.split()[1],
               "meta": {"chosen": good.meta(), "rejected": bad.meta(),
                        "judge": {"share": max(share, 1 - share), "verdicts": len(values)}}}


def _groups(kept: Iterable[_Kept]) -> Iterator[dict[str, Any]]:
    for group in _by_prompt(kept):
        if len(group) < 2:
            continue
        rewards = [k.outcome.reward for k in group]
        mean = sum(rewards) / len(rewards)
        std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
        yield {"prompt": group[0].split()[0], "completions": [k.split()[1] for k in group],
               "rewards": rewards,
               "advantages": [(r - mean) / std if std > 0 else 0.0 for r in rewards],
               "meta": [k.meta() for k in group]}
