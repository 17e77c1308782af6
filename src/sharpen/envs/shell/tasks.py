"""ShellTaskGenerator: procedural "do this in a shell" tasks with difficulty knobs.

A task is a directory of generated files plus a goal stated in words. Five families:

- ``count`` — count the lines of one log level in ``app.log`` (or in every ``.log`` file
  under ``logs/``) and write the number to ``answer.txt``;
- ``users`` — create ``out/`` with one file ``<name>.txt`` per user of ``users.csv`` holding
  the user's email (with ``twist``: only the users of one team);
- ``sort`` — sort the integers of ``numbers.txt`` (or of all files of ``nums/``) numerically
  into ``sorted.txt`` (with ``twist``: descending, duplicates removed);
- ``replace`` — replace every occurrence of one word with another in all ``.txt`` files (and,
  with ``nested``, those in subdirectories), leaving decoy files alone;
- ``script`` — write an executable ``script.sh`` printing the sum of the numbers in
  ``data.txt`` (with ``twist``: skipping a header line). The verifier also runs it on other
  contents of ``data.txt``, so printing a constant fails.

Everything is drawn from one ``random.Random(seed)``: :func:`build` returns a byte-for-byte
identical :class:`ShellProblem` for the same ``(seed, knobs)`` in any process. Split ``s``
owns the seed range ``[i * SPLIT_SPAN, (i + 1) * SPLIT_SPAN)`` (train, val, test), so splits
never share a task. The problem carries its reference commands and its checks; the checks are
only ever evaluated after the episode (see :mod:`sharpen.envs.shell.check`).
"""

from __future__ import annotations

import functools
import random
from typing import Any

from pydantic import BaseModel, Field

from sharpen.core.errors import UserError
from sharpen.core.task import TaskSpec
from sharpen.envs import generation
from sharpen.envs.base import Knob
from sharpen.envs.perturbation import perturbed_of, rng_of, unknown
from sharpen.envs.shell.perturb import PERTURBATIONS, perturb_problem

FAMILIES = ("count", "users", "sort", "replace", "script")

KNOBS: tuple[Knob, ...] = (
    Knob(name="family", type="choice", default="any", choices=["any", *FAMILIES],
         help="task family (any: drawn per task)"),
    Knob(name="size", type="int", default=8, low=4, high=300,
         help="lines per generated file (users per csv)"),
    Knob(name="n_files", type="int", default=1, low=1, high=8,
         help="input files for count, sort and replace tasks"),
    Knob(name="nested", type="bool", default=False,
         help="put input files in subdirectories (count, replace)"),
    Knob(name="twist", type="bool", default=False,
         help="harder variants: two log levels, one team only, descending unique sort, "
              "header line in data"),
)

PRESETS: dict[str, dict[str, Any]] = {
    "easy": {"family": "any", "size": 8, "n_files": 1, "nested": False, "twist": False},
    "medium": {"family": "any", "size": 40, "n_files": 2, "nested": False, "twist": True},
    "hard": {"family": "any", "size": 150, "n_files": 4, "nested": True, "twist": True},
}
"""Named difficulty presets (full knob dicts)."""


class Check(BaseModel):
    """One hidden check of the final workdir."""

    kind: str
    """``file_equals`` (text, compared line by line, trailing blanks ignored), ``file_set``
    (a directory holds exactly these file names), ``executable`` (a regular file with the
    owner's execute bit) or ``script_output`` (running ``./path`` after writing
    ``inputs`` prints ``expected``)."""
    path: str
    """Relative path checked."""
    expected: str | list[str] = ""
    """Expected text (or file names for ``file_set``)."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Files written before running a script (``script_output``)."""


class ShellProblem(BaseModel):
    """A materialised shell task."""

    family: str
    goal: str
    """The task in words, shown to the agent."""
    files: dict[str, str]
    """Initial workdir contents: relative path -> text."""
    reference: list[str]
    """Bash commands that solve the task, in order."""
    checks: list[Check]
    """Hidden checks; all must pass."""




def resolve_knobs(knobs: dict[str, Any] | None = None, difficulty: str | None = None) -> dict:
    """Full, validated knobs: knob defaults, then the ``difficulty`` preset, then ``knobs``.
    Unknown names or bad values raise a :class:`UserError` naming the fix."""
    out = generation.resolve_knobs(KNOBS, PRESETS, knobs, difficulty, what="shell tasks")
    return out


def difficulty_of(knobs: dict[str, Any]) -> str:
    """The preset whose knobs equal ``knobs`` exactly, else ``"custom"``."""
    return generation.difficulty_of(PRESETS, knobs)


# -- vocabulary
_WORDS = ("alpha", "bravo", "cache", "delta", "engine", "fetch", "gamma", "harbor", "index",
          "jolt", "kernel", "lambda", "matrix", "node", "orbit", "parser", "queue", "router",
          "signal", "token", "update", "vector", "worker", "yield", "zone")
_SERVICES = ("api", "db", "auth", "cache", "queue", "web", "mail", "search")
_MESSAGES = ("request served", "connection lost", "retrying job", "user logged in",
             "cache miss", "disk usage high", "timeout waiting for lock", "config reloaded",
             "payment declined", "slow query", "worker started", "shutting down")
_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fe", "go", "ha",
              "jo", "pu", "ze")
_TEAMS = ("red", "blue", "green", "gold")
_DOMAINS = ("example.org", "corp.test", "mail.test")
_PAIRS = (("foo", "bar"), ("colour", "color"), ("teh", "the"), ("recieve", "receive"),
          ("server", "host"), ("todo", "done"), ("cat", "dog"), ("apple", "pear"))


def _log(rng: random.Random, n: int, levels: tuple[str, ...]) -> tuple[str, int]:
    """A log of ``n`` lines and how many have one of ``levels`` (at least one, not all)."""
    while True:
        lines, hits = [], 0
        for i in range(n):
            level = rng.choice(_LEVELS)
            hits += level in levels
            ts = f"2026-03-{rng.randint(1, 28):02d} {i % 24:02d}:{rng.randint(0, 59):02d}:" \
                 f"{rng.randint(0, 59):02d}"
            lines.append(f"{ts} {level} [{rng.choice(_SERVICES)}] {rng.choice(_MESSAGES)}")
        if 0 < hits < n:
            return "\n".join(lines) + "\n", hits


def _count(rng: random.Random, k: dict[str, Any]) -> ShellProblem:
    levels = ("ERROR", "WARN") if k["twist"] else (rng.choice(("ERROR", "WARN")),)
    what = " or ".join(levels)
    pattern = f"' ({'|'.join(levels)}) '"
    files: dict[str, str] = {}
    total = 0
    if k["n_files"] == 1 and not k["nested"]:
        text, total = _log(rng, k["size"], levels)
        files["app.log"] = text
        goal = (f"Count the lines of app.log whose log level is {what} and write the number "
                "to answer.txt.")
        reference = [f"grep -cE {pattern} app.log > answer.txt"]
    else:
        for i in range(k["n_files"]):
            svc = _SERVICES[i % len(_SERVICES)]
            path = f"logs/{svc}/app.log" if k["nested"] else f"logs/{svc}.log"
            text, hits = _log(rng, k["size"], levels)
            files[path] = text
            total += hits
        files["logs/README.txt"] = f"Old {levels[0]} lines were archived; this file is not a log.\n"
        where = "every .log file under logs/ (including subdirectories)" if k["nested"] \
            else "all .log files in logs/"
        goal = (f"Count the lines whose log level is {what} across {where}, and write the "
                "total to answer.txt. Other files in logs/ are not logs.")
        reference = [f"find logs -type f -name '*.log' -exec cat {{}} + | grep -cE {pattern} "
                     "> answer.txt"]
    return ShellProblem(family="count", goal=goal, files=files, reference=reference,
                        checks=[Check(kind="file_equals", path="answer.txt", expected=str(total))])


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3)))


def _users(rng: random.Random, k: dict[str, Any]) -> ShellProblem:
    n = min(k["size"], 120)
    while True:
        names: list[str] = []
        while len(names) < n:
            name = _name(rng)
            if name not in names:
                names.append(name)
        teams = [rng.choice(_TEAMS) for _ in names]
        team = rng.choice(_TEAMS)
        chosen = [i for i, t in enumerate(teams) if t == team] if k["twist"] else list(range(n))
        if chosen and (not k["twist"] or len(chosen) < n):
            break
    emails = [f"{name}.{rng.randint(1, 99)}@{rng.choice(_DOMAINS)}" for name in names]
    csv = "name,email,team\n" + "".join(
        f"{a},{b},{c}\n" for a, b, c in zip(names, emails, teams, strict=True))
    only = f" who are in team {team}" if k["twist"] else ""
    goal = (f"Create a directory out/ holding one file per user listed in users.csv{only} "
            "(the first line is a header): the file is named <name>.txt and contains that "
            "user's email address on one line. Nothing else goes in out/.")
    cond = f'[ "$team" = "{team}" ] && ' if k["twist"] else ""
    reference = ["mkdir -p out && tail -n +2 users.csv | while IFS=, read -r name email team; "
                 f"do {cond}printf '%s\\n' \"$email\" > \"out/$name.txt\"; done; true"]
    checks = [Check(kind="file_set", path="out", expected=[f"{names[i]}.txt" for i in chosen])]
    checks += [Check(kind="file_equals", path=f"out/{names[i]}.txt", expected=emails[i])
               for i in chosen]
    return ShellProblem(family="users", goal=goal, files={"users.csv": csv},
                        reference=reference, checks=checks)


def _numbers(rng: random.Random, n: int) -> list[int]:
    return [rng.randint(-999, 999) for _ in range(n)]


def _sort(rng: random.Random, k: dict[str, Any]) -> ShellProblem:
    while True:
        parts = [_numbers(rng, k["size"]) for _ in range(k["n_files"])]
        if k["twist"]:  # make sure there are duplicates to remove
            parts[-1] += rng.sample(parts[0], max(1, k["size"] // 5))
            rng.shuffle(parts[-1])
        values = [v for part in parts for v in part]
        if values not in (sorted(values), sorted(values, reverse=True)):
            break
    if k["twist"]:
        expected = sorted(set(values), reverse=True)
        order, flags = "in descending numeric order with duplicate numbers removed", "-nru"
    else:
        expected, order, flags = sorted(values), "in ascending numeric order", "-n"
    if k["n_files"] == 1:
        files = {"numbers.txt": "".join(f"{v}\n" for v in parts[0])}
        source, inputs = "the integers in numbers.txt (one per line)", "numbers.txt"
    else:
        files = {f"nums/part{i + 1}.txt": "".join(f"{v}\n" for v in part)
                 for i, part in enumerate(parts)}
        source, inputs = "all the integers in the files of nums/ (one per line)", "nums/*.txt"
    goal = f"Write {source} {order}, one per line, to sorted.txt."
    reference = [f"cat {inputs} | sort {flags} > sorted.txt"]
    return ShellProblem(family="sort", goal=goal, files=files, reference=reference,
                        checks=[Check(kind="file_equals", path="sorted.txt",
                                      expected="\n".join(map(str, expected)))])


def _prose(rng: random.Random, n: int, word: str) -> str:
    lines = []
    for _ in range(n):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(3, 8))]
        if rng.random() < 0.4:
            words.insert(rng.randrange(len(words) + 1), word)
        lines.append(" ".join(words))
    if word not in " ".join(lines):
        lines[rng.randrange(n)] += f" {word}"
    return "\n".join(lines) + "\n"


def _replace(rng: random.Random, k: dict[str, Any]) -> ShellProblem:
    old, new = rng.choice(_PAIRS)
    files: dict[str, str] = {}
    for i in range(k["n_files"]):
        name = f"{rng.choice(_WORDS)}{i + 1}.txt"
        path = f"docs/{rng.choice(_SERVICES)}/{name}" if k["nested"] and i % 2 else name
        files[path] = _prose(rng, k["size"], old)
    decoys = {"README.md": _prose(rng, 3, old)}
    if k["twist"]:
        decoys["backup.txt.bak"] = _prose(rng, 3, old)
    files.update(decoys)
    where = "in every .txt file in this directory and its subdirectories" if k["nested"] \
        else "in every .txt file in this directory"
    goal = (f"Replace every occurrence of the text '{old}' with '{new}' {where}. "
            "Files that do not end in .txt must stay unchanged.")
    sed = f"sed -i 's/{old}/{new}/g'"
    reference = ([f"find . -type f -name '*.txt' -exec {sed} {{}} +"] if k["nested"]
                 else [f"{sed} *.txt"])
    checks = [Check(kind="file_equals", path=p, expected=t.replace(old, new))
              for p, t in files.items() if p.endswith(".txt")]
    checks += [Check(kind="file_equals", path=p, expected=t) for p, t in decoys.items()]
    return ShellProblem(family="replace", goal=goal, files=files, reference=reference,
                        checks=checks)


def _script(rng: random.Random, k: dict[str, Any]) -> ShellProblem:
    def data(values: list[int]) -> str:
        return ("value\n" if k["twist"] else "") + "".join(f"{v}\n" for v in values)

    shown, hidden = _numbers(rng, k["size"]), _numbers(rng, k["size"] + 3)
    while sum(hidden) == sum(shown):
        hidden = _numbers(rng, k["size"] + 3)
    header = " The first line of data.txt is a header and is not a number." if k["twist"] else ""
    goal = ("Create an executable bash script script.sh that prints the sum of the integers "
            f"in data.txt (one per line) as a single number.{header} It must compute the "
            "sum when run, as it will also be run with other contents of data.txt.")
    skip = "NR > 1 " if k["twist"] else ""
    reference = [f"printf '%s\\n' '#!/bin/bash' \"awk '{skip}{{s += \\$1}} END {{print s + 0}}' "
                 "data.txt\" > script.sh && chmod +x script.sh"]
    checks = [
        Check(kind="executable", path="script.sh"),
        Check(kind="script_output", path="script.sh", expected=str(sum(shown))),
        Check(kind="script_output", path="script.sh", expected=str(sum(hidden)),
              inputs={"data.txt": data(hidden)}),
    ]
    return ShellProblem(family="script", goal=goal, files={"data.txt": data(shown)},
                        reference=reference, checks=checks)


_BUILDERS = {"count": _count, "users": _users, "sort": _sort, "replace": _replace,
             "script": _script}


def build(seed: int, knobs: dict[str, Any]) -> ShellProblem:
    """The problem for ``(seed, knobs)`` (knobs already resolved); deterministic."""
    rng = random.Random(seed)
    family = rng.choice(FAMILIES) if knobs["family"] == "any" else knobs["family"]
    return _BUILDERS[family](rng, knobs)


@functools.lru_cache(maxsize=2048)
def _cached(seed: int, knobs_key: tuple) -> ShellProblem:
    return build(seed, dict(knobs_key))


def materialize(task: TaskSpec) -> ShellProblem:
    """The problem of ``task`` (cached; callers must not mutate it); a perturbed variant's is
    its original's, changed by :mod:`.perturb`."""
    if task.env != "shell":
        raise UserError(f"task {task.id!r} belongs to env {task.env!r}, not 'shell'",
                        "run it with its own environment")
    variant = perturbed_of(task)
    if variant is not None:
        if variant.name not in PERTURBATIONS:
            raise unknown("shell", variant, PERTURBATIONS)
        return perturb_problem(materialize(variant.base), variant.name, rng_of(variant))
    knobs = resolve_knobs(task.knobs)
    return _cached(task.seed, tuple(sorted(knobs.items())))
