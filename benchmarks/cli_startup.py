"""CLI start-up: ``sharpen --help`` against ``inspect --help`` (Inspect AI), in the same run.

What is measured
----------------
Wall time of each command as a fresh subprocess (interpreter start, imports, printing the
help, exit), stdout to a pipe, ``COLUMNS=80``. The commands alternate (sharpen, inspect,
sharpen, ...) so that a busy moment on the machine hits both alike; one untimed warm-up call
each first fills the OS page cache. Reported: the median and the fastest of ``--repeats``
calls. ``sharpen --version`` and ``sharpen runs --help`` (which imports its command's
module, the store and the runner) are timed too, for what a user meets next.

Target (issue 24): ``sharpen --help`` median ≤ 0.5 s and no slower than ``inspect --help``.

Run: ``python benchmarks/cli_startup.py [--repeats N]`` from the repository root, with the
venv's ``sharpen`` and ``inspect`` next to this interpreter (``.venv/bin``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from machine_info import cores, cpu_name, version

RESULTS = Path(__file__).parent / "results"
BIN = Path(sys.executable).parent


def timed(cmd: list[str]) -> float:
    """Seconds one call of ``cmd`` takes; fails loudly if it exits non-zero."""
    env = {**os.environ, "COLUMNS": "80"}
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    repeats = parser.parse_args().repeats
    commands = {
        "sharpen --help": [str(BIN / "sharpen"), "--help"],
        "inspect --help": [str(BIN / "inspect"), "--help"],
        "sharpen --version": [str(BIN / "sharpen"), "--version"],
        "sharpen runs --help": [str(BIN / "sharpen"), "runs", "--help"],
    }
    for cmd in commands.values():
        timed(cmd)  # warm-up: page cache, .pyc files
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, cmd in commands.items():
            times[name].append(timed(cmd))
    load_after = os.getloadavg()[0]
    med = {name: statistics.median(ts) for name, ts in times.items()}
    ours, theirs = med["sharpen --help"], med["inspect --help"]
    rows = [f"| `{name}` | {med[name]:.3f} | {min(ts):.3f} | {max(ts):.3f} |"
            for name, ts in times.items()]
    met = ours <= 0.5 and ours <= theirs
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    md = [
        "# CLI start-up: `sharpen --help` vs `inspect --help`",
        "",
        f"`python benchmarks/cli_startup.py --repeats {repeats}` — {now}.",
        "",
        f"Each command a fresh subprocess, stdout to a pipe, COLUMNS=80; {repeats} calls each, "
        "interleaved, after one warm-up call each. Definitions are in the script's docstring.",
        "",
        "| command | median (s) | fastest (s) | slowest (s) |",
        "|---|---|---|---|",
        *rows,
        "",
        f"`sharpen --help` ÷ `inspect --help` (medians): {ours / theirs:.2f} "
        f"({theirs / ours:.1f}× faster).",
        f"Target: ≤ 0.5 s and no slower than Inspect — **{'met' if met else 'not met'}** "
        f"({ours:.3f} s vs {theirs:.3f} s).",
        "",
        "## Machine",
        "",
        f"- date: {now}",
        f"- cpu: {cpu_name()} ({cores()} cores usable); load average (1 min) {load_before:.1f} "
        f"before the timed calls, {load_after:.1f} after — other work on the machine slows "
        "both commands alike, the ratio less than the seconds",
        f"- python: {sys.version.split()[0]}",
        f"- sharpen {version('sharpen')}, inspect-ai {version('inspect-ai')}, "
        f"typer {version('typer')}, rich {version('rich')}",
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "cli_startup.md"
    out.write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
