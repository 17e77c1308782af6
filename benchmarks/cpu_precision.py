"""TRL on the CPU: a training step in float32 (sharpen's default there, ``hf.trl_args``) against
TRL's own default, ``bf16=True`` (bfloat16 autocast), in the same run.

What is measured
----------------
The embedded SmolLM2-135M as a float32 checkpoint (``sharpen checkpoint``), fine-tuned in full
by TRL's ``SFTTrainer`` on ``--pairs`` (8) fixed prompt–completion conversations of about 200
tokens, ``per_device_train_batch_size`` 2, ``--steps`` (2) optimiser steps, learning rate 1e-5,
seed 0, ``--threads`` torch threads (default 1, as the test suite runs). The two arms differ in
``bf16`` alone:

* ``float32`` — ``bf16=False``, what every sharpen method passes on the CPU;
* ``bf16 autocast`` — TRL's config default (``bf16=True``), what a TRL script gets unless it
  says otherwise.

Each arm runs in its own process (a fresh torch), the arms alternating ``--repeats`` (2) times,
float32 first. Reported: seconds per optimiser step (``trainer.train()``'s wall time over the
steps; model loading and the trainer's set-up are outside it), the median per arm, and the
ratio of the medians. The CPU's bfloat16 flags (``avx512_bf16``, ``amx_bf16``) are recorded:
where the CPU has them, oneDNN computes bfloat16 natively and the ratio may well reverse.

Usage::

    python benchmarks/cpu_precision.py             # about 5 minutes on two cores

Needs the ``train`` extra. Results go to ``benchmarks/results/cpu_precision.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from machine_info import bf16_flags, cores, cpu_name, version

HERE = Path(__file__).resolve().parent
ARMS = {"float32": False, "bf16 autocast": True}


def _pairs(n: int) -> list[dict[str, Any]]:
    """``n`` fixed conversations: a coding request and a reply with code, ~200 tokens each."""
    rows = []
    for i in range(n):
        body = "\n".join(f"    total += values[{j}] * {i + j}" for j in range(12))
        rows.append({
            "prompt": [{"role": "user", "content": f"Write weighted_sum_{i}(values) that adds "
                                                   f"each value times its weight {i} + index."}],
            "completion": [{"role": "assistant", "content": f"```python\ndef weighted_sum_{i}("
                                                            f"values):\n    total = 0\n{body}\n"
                                                            f"    return total\n```"}]})
    return rows


def _arm(checkpoint: Path, bf16: bool, steps: int, pairs: int, threads: int) -> dict[str, float]:
    """One arm in this process: build the trainer, time ``train()``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as out:
        trainer = SFTTrainer(
            model=AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32),
            args=SFTConfig(output_dir=out, report_to=[], use_cpu=True, save_strategy="no",
                           disable_tqdm=True, logging_steps=1, seed=0, max_steps=steps,
                           per_device_train_batch_size=2, learning_rate=1e-5, bf16=bf16),
            train_dataset=Dataset.from_list(_pairs(pairs)),
            processing_class=AutoTokenizer.from_pretrained(checkpoint))
        started = time.monotonic()
        trainer.train()
        loop = time.monotonic() - started
    return {"step_s": loop / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="cpu_precision")
    parser.add_argument("--arm", help=argparse.SUPPRESS)  # the child process: one arm
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.arm:
        print(json.dumps(_arm(a.checkpoint, ARMS[a.arm], a.steps, a.pairs, a.threads)))
        return

    from sharpen.train.checkpoint import write_checkpoint

    started = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as work:
        checkpoint = write_checkpoint(Path(work) / "base")
        runs: dict[str, list[float]] = {arm: [] for arm in ARMS}
        for rep in range(a.repeats):
            for arm in ARMS:
                done = subprocess.run(
                    [sys.executable, __file__, "--arm", arm, "--checkpoint", str(checkpoint),
                     "--steps", str(a.steps), "--pairs", str(a.pairs), "--threads", str(a.threads)],
                    capture_output=True, text=True, check=True)
                step = json.loads(done.stdout.strip().splitlines()[-1])["step_s"]
                runs[arm].append(step)
                print(f"repeat {rep + 1} {arm}: {step:.1f} s/step", flush=True)
    med = {arm: median(v) for arm, v in runs.items()}
    ratio = med["bf16 autocast"] / med["float32"]
    lines = [
        "# TRL on the CPU: float32 against bf16 autocast", "",
        f"`python benchmarks/cpu_precision.py --steps {a.steps} --pairs {a.pairs} --repeats "
        f"{a.repeats} --threads {a.threads}`, {started:%Y-%m-%d %H:%M} UTC, "
        f"{(datetime.now(UTC) - started).total_seconds():.0f} s.", "",
        f"Machine: {cpu_name()}, {cores()} cores; bfloat16 CPU flags: {bf16_flags()}. torch "
        f"{version('torch')}, transformers {version('transformers')}, trl {version('trl')}.", "",
        "| arm | seconds per optimiser step, each repeat | median |", "|---|---|---:|",
        *[f"| {arm} | {', '.join(f'{s:.1f}' for s in v)} | {med[arm]:.1f} |"
          for arm, v in runs.items()], "",
        f"bf16 autocast ÷ float32, per step: **{ratio:.1f}x** "
        f"({'slower' if ratio > 1 else 'faster'} under TRL's default).", "",
        "Protocol: the module docstring of `benchmarks/cpu_precision.py`.", ""]
    out = HERE / "results" / f"{a.out}.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
