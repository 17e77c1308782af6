"""What the pre-registered checks in this folder share (imported by ``reflexion_feedback.py``
and ``star_finetune.py``, which run as ``python benchmarks/NAME.py``): tasks no earlier
measurement used, the commit that fixed a protocol, and the table of paired comparisons."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sharpen.envs.base import Environment
from sharpen.stats.paired import PairedComparison

HERE = Path(__file__).resolve().parent


def fresh_tasks(env: Environment, split: str, count: int, seed: int, used_seeds: tuple[int, ...]) -> list:
    """The first ``count`` tasks of ``split`` for task seed ``seed``; exits if any is among the
    first 200 train, val or test tasks of ``used_seeds``."""
    used = {t.hash() for s in used_seeds for sp in ("train", "val", "test")
            for t in env.list_tasks(split=sp, limit=200, seed=s)}
    tasks = env.list_tasks(split=split, limit=count, seed=seed)
    seen = sum(t.hash() in used for t in tasks)
    if seen:
        raise SystemExit(f"{seen} of the {split} tasks were used by earlier experiments: not fresh")
    return tasks


def protocol_commit(script: str) -> str:
    """The last commit that changed ``benchmarks/<script>`` (where its protocol was fixed),
    and whether the script has changed since."""
    here = ["--", f"benchmarks/{script}"]
    last = subprocess.run(["git", "log", "-1", "--format=%h %cd", "--date=format:%H:%M UTC", *here],
                          capture_output=True, text=True, cwd=HERE.parent, env={**os.environ, "TZ": "UTC"})
    dirty = subprocess.run(["git", "status", "--porcelain", *here], capture_output=True, text=True,
                           cwd=HERE.parent).stdout.strip()
    return last.stdout.strip() + (" (script modified since)" if dirty else "")


def comparison_table(results: list[tuple[str, str, str, PairedComparison]], hypothesis: str) -> list[str]:
    """Markdown lines: one row per ``(a, b, role, comparison)`` read as "b vs a", then the
    verdict on the first (the primary ``hypothesis``): confirmed when p < 0.05 and the
    interval lies above zero."""
    lines = ["| comparison | role | difference, pts [95% CI] | tasks only the first / second solved "
             "| test | p |", "|---|---|---|---|---|---|"]
    for a, b, role, cmp in results:
        first, second = cmp.discordant or ("—", "—")
        lines.append(f"| {b} vs {a} | {role} | {100 * cmp.difference:+.1f} [{100 * cmp.ci.low:+.1f}, "
                     f"{100 * cmp.ci.high:+.1f}] | {first} / {second} | {cmp.method} | {cmp.p_value:.3g} |")
    primary = results[0][3]
    confirmed = primary.p_value < 0.05 and primary.ci.low > 0
    return [*lines, "", f"Primary hypothesis ({hypothesis}): "
            f"**{'confirmed' if confirmed else 'not confirmed'}** — {primary.verdict}."]
