"""FunctionTaskGenerator: procedural "write this small function" tasks with difficulty knobs.

A task is a pipeline of ``n_ops`` operations from one family (see
:mod:`sharpen.envs.code.families`), e.g. "keep the even elements, then square every element,
then return the sum". The generator writes, from the same sampled pipeline,

- the prompt: a HumanEval-style signature and docstring stating every step in words, with
  two examples;
- the reference: ``prompt`` + one line of code per step — a complete, trusted program;
- the hidden tests: ``def check(candidate):`` with one ``assert candidate(x) == y`` per line,
  where ``y`` is computed by running the reference in-process at generation time.

Determinism. A task is rebuilt from ``(seed, knobs)`` alone: everything random is drawn from
one ``random.Random(seed)``, so :meth:`FunctionTaskGenerator.materialize` returns a
byte-for-byte identical :class:`CodeProblem` in any process, in any order.

Splits are disjoint twice over.

1. Seeds: split ``s`` owns the seed range ``[i * SPLIT_SPAN, (i + 1) * SPLIT_SPAN)`` with
   ``i`` = 0, 1, 2 for train, val, test. ``sample(knobs, index, split)`` gives the task the seed
   ``i * SPLIT_SPAN + index % SPLIT_SPAN``, and the split of a seed is
   ``SPLITS[(seed // SPLIT_SPAN) % 3]`` — the seed (part of the TaskSpec identity) decides it.
2. Behaviour: every pipeline (family + operations with their parameters) hashes (SHA-256) into
   one split bucket (40% train, 20% val, 40% test); generation redraws until the pipeline's
   bucket is the seed's split. So no function asked for in test is ever asked for in train,
   even with other inputs.

Quality: a pipeline is redrawn when more than half its tests (rounded up) share one output or
leave the input unchanged, so a constant function or the identity never passes, and a stub
(``pass``, returning ``None``) passes no test at all.
"""

from __future__ import annotations

import copy
import hashlib
import random
from typing import Any

from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.base import Knob
from sharpen.envs.code.families import FAMILIES, Family, Op, instantiate
from sharpen.envs.code.problem import CodeProblem
from sharpen.envs.generation import seed_for, split_of_seed

SOURCE = "generated"
"""``TaskSpec.metadata["source"]`` of generated tasks."""


_BUCKETS = ("train",) * 4 + ("val",) * 2 + ("test",) * 4

KNOBS: tuple[Knob, ...] = (
    Knob(name="family", type="choice", default="any", choices=["any", *FAMILIES],
         help="function family: integer arithmetic, list transforms, string transforms, or "
              "any (drawn per task)"),
    Knob(name="n_ops", type="int", default=1, low=1, high=6,
         help="how many operations are composed (the last may reduce to an int)"),
    Knob(name="n_tests", type="int", default=5, low=3, high=20,
         help="how many hidden assertions check the function"),
    Knob(name="edge_cases", type="bool", default=False,
         help="include empty, negative and boundary inputs in the tests"),
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"family": "any", "n_ops": 1, "n_tests": 5, "edge_cases": False},
    "medium": {"family": "any", "n_ops": 3, "n_tests": 8, "edge_cases": True},
    "hard": {"family": "any", "n_ops": 5, "n_tests": 12, "edge_cases": True},
}
"""Named difficulty presets (full knob dicts)."""

_MAX_ATTEMPTS = 500




def resolve_knobs(knobs: dict[str, Any] | None = None, difficulty: str | None = None) -> dict:
    """Full, validated knobs: knob defaults, then the ``difficulty`` preset, then ``knobs``.
    Unknown names or bad values raise a :class:`UserError` naming the fix."""
    out = generation.resolve_knobs(KNOBS, PRESETS, knobs, difficulty, what="generated code tasks")
    return out


def difficulty_of(knobs: dict[str, Any]) -> str:
    """The preset whose knobs equal ``knobs`` exactly, else ``"custom"``."""
    return generation.difficulty_of(PRESETS, knobs)


def _bucket(key: str) -> str:
    return _BUCKETS[int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % len(_BUCKETS)]


def _pipeline(fam: Family, n_ops: int, rng: random.Random) -> list[Op]:
    """``n_ops`` operations, each kind at most once; the last may be a reducer (30%)."""
    reduce_last = bool(fam.reducers) and rng.random() < 0.3
    kinds = rng.sample(fam.transforms, n_ops - 1 if reduce_last else n_ops)
    if reduce_last:
        kinds.append(rng.choice(fam.reducers))
    return [instantiate(t, fam.var, rng) for t in kinds]


def _inputs(fam: Family, n_tests: int, edge_cases: bool, rng: random.Random) -> list[Any]:
    """``n_tests`` distinct inputs: typical ones first, then (with edge cases) about a third
    drawn from the family's boundary inputs."""
    edges = fam.edges(rng)
    n_edge = min(len(edges), max(1, n_tests // 3)) if edge_cases else 0
    chosen = rng.sample(edges, n_edge)
    out: list[Any] = []
    seen: set[str] = set()
    for _ in range(n_tests * 50):
        if len(out) >= n_tests - n_edge:
            break
        x = fam.typical(rng)
        if repr(x) not in seen and repr(x) not in map(repr, chosen):
            seen.add(repr(x))
            out.append(x)
    return out + chosen


def _render(fam: Family, ops: list[Op], examples: list[tuple[Any, Any]], returns: str) -> str:
    steps = [op for op in ops if not op.reduces]
    reducer = ops[-1] if ops[-1].reduces else None
    if steps:
        lines = [f"Apply these steps to {fam.noun}, in order:"]
        lines += [f"{i}. {op.description}" for i, op in enumerate(steps, 1)]
        lines.append(f"Then return {reducer.description}." if reducer
                     else f"Return {fam.result_noun}.")
    else:
        assert reducer is not None
        lines = [f"Given {fam.noun}, return {reducer.description}."]
    lines.append("")
    for x, y in examples:
        lines += [f">>> {fam.entry_point}({x!r})", repr(y)]
    doc = "\n".join(("    " + line) if line else "" for line in lines)
    return (f"def {fam.entry_point}({fam.var}: {fam.arg_type}) -> {returns}:\n"
            f'    """{doc.lstrip()}\n    """\n')


def _build(seed: int, knobs: dict[str, Any]) -> tuple[str, CodeProblem]:
    """The family name and the problem for ``(seed, knobs)`` (knobs already resolved)."""
    rng = random.Random(seed)
    split = split_of_seed(seed)
    for _ in range(_MAX_ATTEMPTS):
        fam = FAMILIES[rng.choice(list(FAMILIES)) if knobs["family"] == "any" else knobs["family"]]
        ops = _pipeline(fam, knobs["n_ops"], rng)
        if _bucket(fam.name + "|" + ";".join(op.key for op in ops)) != split:
            continue
        inputs = _inputs(fam, knobs["n_tests"], knobs["edge_cases"], rng)
        returns = "int" if ops[-1].reduces else fam.arg_type
        body = [f"    {fam.var} = {op.expr}\n" for op in ops[:-1]]
        body.append(f"    return {ops[-1].expr}\n")
        stub = _render(fam, ops, [], returns)
        fn = _compile(stub + "".join(body), fam.entry_point, f"gen-{seed}")
        outputs = [fn(copy.deepcopy(x)) for x in inputs]
        if not _discriminative(inputs, outputs):
            continue
        prompt = _render(fam, ops, _examples(inputs, outputs), returns)
        task_id = f"gen/{fam.name}-{knobs['n_ops']}/{seed}"
        test = "def check(candidate):\n" + "".join(
            f"    assert candidate({x!r}) == {y!r}\n" for x, y in zip(inputs, outputs, strict=False))
        return fam.name, CodeProblem(task_id=task_id, prompt=prompt, entry_point=fam.entry_point,
                                     test=test, context="", reference=prompt + "".join(body))
    raise RuntimeError(f"no usable pipeline for seed {seed} and knobs {knobs}")  # pragma: no cover


def _discriminative(inputs: list[Any], outputs: list[Any]) -> bool:
    """At most half the tests (rounded up) share one output, and at most half are fixed points,
    so a constant function or the identity passes at most half of them (rounded up)."""
    most = max(sum(repr(y) == repr(z) for z in outputs) for y in outputs)
    fixed = sum(repr(x) == repr(y) for x, y in zip(inputs, outputs, strict=False))
    return max(most, fixed) <= (len(outputs) + 1) // 2


def _examples(inputs: list[Any], outputs: list[Any]) -> list[tuple[Any, Any]]:
    """The first test, and the next one whose output differs from it."""
    first = (inputs[0], outputs[0])
    other = next(((x, y) for x, y in zip(inputs, outputs, strict=False) if repr(y) != repr(outputs[0])), None)
    return [first, other] if other else [first]


def _compile(source: str, entry_point: str, name: str) -> Any:
    """Trusted code only: the generator's own reference source, as a callable."""
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[entry_point]


class FunctionTaskGenerator(generation.PresetKnobs):
    """Implements the :class:`~sharpen.envs.base.Generator` protocol for the ``code`` env.
    Stateless: any two instances produce the same tasks."""

    KNOB_SCHEMA = KNOBS
    PRESET_TABLE = PRESETS

    def sample(self, knobs: dict[str, Any], seed: int, split: str = "test") -> TaskSpec:
        """The ``seed``-th task of ``split`` at ``knobs`` (missing knobs take their defaults).
        The TaskSpec's seed is moved into the split's seed range (see the module doc)."""
        full = resolve_knobs(knobs)
        task_seed = seed_for(split, seed)
        family, _ = _build(task_seed, full)
        return TaskSpec(
            env="code", id=f"gen/{family}-{full['n_ops']}/{task_seed}", seed=task_seed,
            knobs=full, split=generation.as_split(split),
            metadata={"source": SOURCE, "difficulty": difficulty_of(full), "family": family},
        )

    def materialize(self, task: TaskSpec) -> CodeProblem:
        """Rebuild the problem from ``task.seed`` and ``task.knobs`` alone."""
        return _build(task.seed, resolve_knobs(task.knobs))[1]

    def is_solvable(self, task: TaskSpec) -> bool:
        """Whether the reference passes its own hidden tests (run in-process; trusted code)."""
        problem = self.materialize(task)
        try:
            candidate = _compile(problem.reference or "", problem.entry_point, task.id)
            namespace: dict[str, Any] = {}
            checker = compile(problem.context + "\n" + problem.test, "<check>", "exec")
            exec(checker, namespace)
            namespace["check"](candidate)
        except Exception:  # noqa: BLE001 - any failure of the reference means "not solvable"
            return False
        return problem.test.count("assert ") >= 1
