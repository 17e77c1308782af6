"""How often the simulated parties' replies can be read: free text vs JSON, on the embedded model.

What is measured
----------------
The embedded model (SmolLM2-135M-Instruct, ``local``, temperature 0) plays

* the **negotiation opponent** (:class:`~sharpen.envs.negotiation.opponents.ModelOpponent`):
  the first ``N`` medium test tasks, one call each, answering the reference agent's first offer
  of that task;
* the **toolshop customer** (:class:`~sharpen.envs.toolshop.user.SimulatedUser`): the first
  ``N // 3`` medium test tasks, three turns each (its first message, then the answers to two
  fixed agent lines), the conversation going on whatever the turn gave;

each in three arms, same tasks, seeds and prompts:

``free``
    today's text reading: the reply is free text (opponent: :func:`parse_reply`, one
    correction; customer: :func:`check_reply` and its ``###STOP###`` marker);
``validate``
    :func:`~sharpen.models.structured.complete_structured` on the model presented as one that
    cannot constrain (``structured_output = "validate"``): the schema is appended as an
    instruction and an invalid reply is re-asked once — what ``complete_structured`` gives a
    model that declares no capability (the parties do not use it: see the results);
``grammar``
    ``complete_structured`` with the schema compiled to a llama.cpp grammar (the embedded
    model's own capability), one re-ask as well.

Per arm: **unusable** — calls that gave no move / turn (opponent: an ``error`` move after the
correction; customer: any failed turn, split into *format* failures — no valid JSON, a mangled
or misplaced stop marker — and *content* failures that the same checks find in every arm:
parroting, loops, leaked prompt, empty); **re-asked** — calls that needed a second model call;
for the opponent the moves (accept / counter / walk) and **sane counters** (counters between
the agent's offer and the opponent's standing offer, inclusive: a counter outside that range
concedes past the agent or moves back); for the customer how many turns ended the
conversation; output tokens and wall seconds summed over the arm.

Usage::

    .venv/bin/python benchmarks/sim_parsing.py                      # N=30 (validate arms: 12)
    .venv/bin/python benchmarks/sim_parsing.py --n 9 --validate-n 3  # a quick look

The default run took 774 s at load average 4-7 on two cores shared with other work.

The model runs with one llama.cpp thread (the machine is shared; greedy decoding, so the
thread count changes speed, not replies). Results go to ``benchmarks/results/sim_parsing.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.envs.negotiation import NegotiationEnv
from sharpen.envs.negotiation.deal import deal_of
from sharpen.envs.negotiation.episode import Episode
from sharpen.envs.negotiation.opponents import ModelOpponent
from sharpen.envs.negotiation.reference import reference_actions
from sharpen.envs.toolshop import ToolshopEnv
from sharpen.envs.toolshop.env import DEFAULT_USER_PARAMS
from sharpen.envs.toolshop.generator import shop_of
from sharpen.envs.toolshop.user import SimulatedUser, UserTurn
from sharpen.models.base import ChatModel, Completion, ModelWrapper
from sharpen.models.structured import StructuredOutput

OUT = Path(__file__).resolve().parent / "results" / "sim_parsing.md"
ARMS = ("free", "validate", "grammar")
AGENT_LINES = ("Sure. What is your name and zip code?", "Thanks. Which order do you mean?")
FORMAT_ERRORS = ("no valid reply", "STOP", "stop marker")


class Counted(ModelWrapper):
    """The model with its calls and output tokens counted, and presented with a chosen
    ``structured_output``."""

    def __init__(self, inner: ChatModel, mode: StructuredOutput) -> None:
        super().__init__(inner)
        self.mode = mode
        self.calls = 0
        self.output_tokens = 0

    @property
    def structured_output(self) -> StructuredOutput:
        return self.mode

    async def complete(self, *args: Any, **kwargs: Any) -> Completion:
        completion = await super().complete(*args, **kwargs)
        self.calls += 1
        self.output_tokens += completion.usage.output_tokens
        return completion

    async def aclose(self) -> None:
        """The shared model stays loaded for the next arm."""


def _model_for(local: ChatModel, arm: str) -> Counted:
    return Counted(local, "validate" if arm in ("free", "validate") else "grammar")


async def opponent_arm(local: ChatModel, arm: str, n: int) -> dict[str, Any]:
    model = _model_for(local, arm)
    tasks = NegotiationEnv(difficulty="medium").list_tasks("test", limit=n)
    moves: Counter[str] = Counter()
    sane = reasked = 0
    examples: list[str] = []
    start = time.perf_counter()
    for task in tasks:
        deal = deal_of(task)
        ep = Episode(deal)
        plan = reference_actions(deal)
        assert plan, task.id
        action = plan[0]
        ep.agent_turn(action)
        offer = float(action.arguments["price"])
        opponent = ModelOpponent(model, deal, task.seed, structured=arm != "free")
        calls = model.calls
        move = await opponent.respond(deal, ep, offer)
        reasked += model.calls - calls > 1
        moves[move.kind] += 1
        if move.kind == "counter" and move.price is not None:
            low, high = sorted((offer, ep.standing))
            sane += low <= move.price <= high
        if len(examples) < 3:
            examples.append(f"{move.kind} {move.price or ''} <- {move.replies[-1][:60]!r}")
    return {"n": len(tasks), "unusable": moves["error"], "reasked": reasked, "moves": moves,
            "sane": sane, "tokens": model.output_tokens, "calls": model.calls,
            "wall": time.perf_counter() - start, "examples": examples}


def _kind(turn: UserTurn) -> str:
    assert turn.error is not None
    return "format" if any(m in turn.error for m in FORMAT_ERRORS) else "content"


async def customer_arm(local: ChatModel, arm: str, n: int) -> dict[str, Any]:
    model = _model_for(local, arm)
    tasks = ToolshopEnv(difficulty="medium").list_tasks("test", limit=max(1, n // 3))
    failures: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    turns = done = reasked = 0
    examples: list[str] = []
    start = time.perf_counter()
    for task in tasks:
        user = SimulatedUser(model, shop_of(task).instruction, params=DEFAULT_USER_PARAMS,
                             seed=task.seed)
        user.constrained = arm != "free"
        for i in range(3):
            calls = model.calls
            turn = await (user.start() if i == 0 else user.reply(AGENT_LINES[i - 1]))
            reasked += model.calls - calls > 1
            turns += 1
            done += turn.stop
            if turn.error is not None:
                failures[_kind(turn)] += 1
                errors[turn.error.split(":")[0][:40]] += 1
            if len(examples) < 3:
                examples.append(turn.error or f"{turn.text[:60]!r}{' [done]' if turn.stop else ''}")
    return {"n": turns, "unusable": sum(failures.values()), "failures": failures,
            "errors": errors, "reasked": reasked, "done": done, "tokens": model.output_tokens,
            "calls": model.calls, "wall": time.perf_counter() - start, "examples": examples}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=30, help="calls per arm and party")
    parser.add_argument("--validate-n", type=int, default=12,
                        help="calls of the validate arms (the slowest: long failed replies)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    local = REGISTRY.create("model", PluginRef(name="local", args={"n_threads": 1}))
    began = time.perf_counter()
    def n(arm: str) -> int:
        return args.validate_n if arm == "validate" else args.n

    opp = {arm: await opponent_arm(local, arm, n(arm)) for arm in ARMS}
    cus = {arm: await customer_arm(local, arm, n(arm)) for arm in ARMS}
    total = time.perf_counter() - began
    await local.aclose()

    lines = [
        "# Simulated parties: free text vs JSON replies (embedded model)",
        "",
        f"Command: `.venv/bin/python benchmarks/sim_parsing.py --n {args.n} "
        f"--validate-n {args.validate_n}`  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.machine()}, "
        f"model {local.name}, 1 llama.cpp thread; whole run {total:.0f} s.",
        "",
        "See the script's docstring for what each column counts.",
        "",
        "## Negotiation opponent (one answer to the reference agent's first offer per task)",
        "",
        "| arm | calls | unusable | re-asked | accept / counter / walk | sane counters | "
        "model calls | output tokens | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, r in opp.items():
        m = r["moves"]
        lines.append(f"| {arm} | {r['n']} | {r['unusable']} | {r['reasked']} | "
                     f"{m['accept']} / {m['counter']} / {m['walk']} | {r['sane']} of {m['counter']} "
                     f"| {r['calls']} | {r['tokens']} | {r['wall']:.1f} |")
    lines += ["", "Examples (move <- last raw reply):", ""]
    lines += [f"- {arm}: " + "; ".join(r["examples"]) for arm, r in opp.items()]
    lines += [
        "", "## Toolshop customer (three turns per task)", "",
        "| arm | turns | unusable | format / content | re-asked | ended conversation | "
        "model calls | output tokens | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, r in cus.items():
        f = r["failures"]
        lines.append(f"| {arm} | {r['n']} | {r['unusable']} | {f['format']} / {f['content']} | "
                     f"{r['reasked']} | {r['done']} | {r['calls']} | {r['tokens']} | "
                     f"{r['wall']:.1f} |")
    lines += ["", "Failures by kind:", ""]
    lines += [f"- {arm}: " + (", ".join(f"{k} ×{v}" for k, v in r["errors"].most_common()) or "none")
              for arm, r in cus.items()]
    lines += ["", "Examples (first three turns):", ""]
    lines += [f"- {arm}: " + "; ".join(r["examples"]) for arm, r in cus.items()]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
