"""Training throughput of ``sharpen train grpo`` against TRL's own ``GRPOTrainer`` script: the
same prompts, model, GRPO settings, seed and CPU threads, in the same run; peak memory of each.

Protocol:

- Data: the first turn of ``--tasks`` (4) train tasks of ``sharpen demo``'s code environment
  (task seed 0), as the ``tool`` agent sends it — built once by sharpen and written to a JSONL
  file that the TRL arm reads as its dataset (what a TRL user would have).
- Model: the embedded SmolLM2-135M as a float32 checkpoint (``sharpen checkpoint``), full
  fine-tuning.
- Both arms: TRL ``GRPOConfig`` with ``--steps`` (10) optimiser steps, one prompt × 2 replies of
  at most ``--max-completion`` (48) tokens per step, temperature 0.8, learning rate 1e-6,
  beta 0, seed 0, on the CPU with the same number of torch threads (the load average's,
  :func:`sharpen.models.local.default_threads`, fixed by the parent for both), in float32
  (``bf16=False``: sharpen's default on the CPU since 2026-12-06, passed to the TRL arm too so
  that the arms differ in the loop alone; runs before that date had both arms under TRL's
  default bfloat16 autocast, 9.3x slower per step on this CPU, ``benchmarks/cpu_precision.py``).
- ``sharpen``: :class:`sharpen.train.grpo.GrpoMethod` on a ``TrainContext``, its defaults
  otherwise — its reward is the environment's verifier (each reply parsed by the agent's text
  protocol and run against the task's hidden tests in the sandbox), a resume checkpoint every
  ``save_every`` (10) steps (model and optimiser state, written by TRL inside ``train()``),
  then the merged checkpoint and the GGUF.
- ``trl``: the plain script a TRL user writes: ``GRPOTrainer`` on the JSONL prompts with a
  regex reward (a fenced python block: 1, else 0) — no test execution — and ``save_model``.
- Measured per arm, each in its own process, the arms alternating (TRL first) ``--repeats``
  (2) times: training tokens (TRL's ``num_tokens``: prompt + completion tokens of every
  sampled reply) over the wall seconds of the ``trainer.train()`` call — the *loop* rate — and
  over the seconds from start of the training call to the model saved (sharpen: the method's
  ``train`` whole, prompts, GGUF and all; TRL: building the trainer, training, saving) — the
  *end-to-end* rate; peak RSS (``ru_maxrss``). Ratios are of each arm's median rate. Target:
  sharpen's loop rate ≥ 0.9 × TRL's.

Why 10 steps and repeats (changed 2026-12-04, before the run it reports): at 3 steps, one run
each on a quiet machine gave a loop ratio of 0.80 (35.1 s against 28.2 s), but in that
configuration sharpen's one resume checkpoint (3.4 s, timed inside ``train()``) was a ninth of
its loop, where the method's default writes one per 10 steps, and the TRL arm alone took
26.9–29.6 s over three runs of the same work: one 3-step run of each could not tell a 10%
difference from noise.

Usage::

    python benchmarks/train_throughput.py            # about 10 minutes on two quiet cores

Needs the ``train`` extra. Results go to ``benchmarks/results/train_throughput.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from machine_info import cores, cpu_name, version

HERE = Path(__file__).resolve().parent
SETTINGS = {"num_generations": 2, "learning_rate": 1e-6, "temperature": 0.8, "beta": 0.0}


def _tasks(n: int) -> list[Any]:
    from sharpen.cli.demo_cmd import DEMO_ENV
    from sharpen.core.registry import REGISTRY

    return REGISTRY.create("env", DEMO_ENV).list_tasks("train", limit=n, seed=0)[:n]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def arm_sharpen(a: argparse.Namespace) -> dict[str, Any]:
    from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
    from sharpen.store import Store
    from sharpen.train.grpo import GrpoMethod
    from sharpen.train.method import TrainContext

    work = a.work / "sharpen"
    ctx = TrainContext(env=DEMO_ENV, spec=DEMO_SPEC, train_tasks=_tasks(a.tasks), val_tasks=[],
                       base_checkpoint=a.checkpoint, base_gguf=a.gguf, workdir=work,
                       store=Store(f"sqlite:///{a.work / 's.db'}"), seed=0)
    method = GrpoMethod(steps=a.steps, max_completion_length=a.max_completion,
                        threads=a.threads, **SETTINGS)  # save_every: the method's default
    t0 = time.monotonic()
    result = asyncio.run(method.train(ctx))
    wall = time.monotonic() - t0
    return {"tokens": result.extra["tokens"], "loop_s": result.extra["train_seconds"], "wall_s": wall,
            "reward": [e.reward for e in result.events], "rss_mb": _rss_mb()}


def arm_trl(a: argparse.Namespace) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(a.threads)
    rows = [json.loads(line) for line in a.prompts.read_text().splitlines()]
    fenced = re.compile(r"```python\n.*?```", re.DOTALL)

    def has_code(completions: list[Any], **_: Any) -> list[float]:
        return [1.0 if fenced.search(c[0]["content"]) else 0.0 for c in completions]

    history: list[dict[str, Any]] = []

    class Keep(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            history.append(dict(logs or {}))

    t0 = time.monotonic()
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(a.checkpoint, dtype=torch.float32),
        reward_funcs=[has_code],
        args=GRPOConfig(output_dir=str(a.work / "trl"), report_to=[], use_cpu=True, seed=0,
                        logging_steps=1, save_strategy="no", disable_tqdm=True,
                        max_steps=a.steps, per_device_train_batch_size=2,
                        max_completion_length=a.max_completion, bf16=False, **SETTINGS),
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(a.checkpoint), callbacks=[Keep()])
    t1 = time.monotonic()
    trainer.train()
    loop = time.monotonic() - t1
    trainer.save_model(str(a.work / "trl" / "final"))
    wall = time.monotonic() - t0
    tokens = max(int(x.get("num_tokens", 0)) for x in history)
    return {"tokens": tokens, "loop_s": loop, "wall_s": wall,
            "reward": [x["reward"] for x in history if "reward" in x], "rss_mb": _rss_mb()}


def _prepare(work: Path, n: int) -> tuple[Path, Path, Path]:
    """The start checkpoint, its GGUF and the prompts file (sharpen's first turns)."""
    from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
    from sharpen.train.checkpoint import write_checkpoint, write_gguf
    from sharpen.train.rewards import prompts, training_agent

    ckpt = write_checkpoint(work / "base")
    gguf = write_gguf(ckpt, work / "base.gguf")
    rows = asyncio.run(prompts(DEMO_ENV, DEMO_SPEC, training_agent(DEMO_SPEC), _tasks(n)))
    path = work / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": r.messages}) + "\n" for r in rows))
    return ckpt, gguf, path


def main(a: argparse.Namespace) -> str:
    from sharpen.models.local import default_threads

    with tempfile.TemporaryDirectory(prefix="train-throughput-") as tmp:
        work = Path(tmp)
        ckpt, gguf, path = _prepare(work, a.tasks)
        threads = a.threads or default_threads()
        got: dict[str, list[dict[str, Any]]] = {"trl": [], "sharpen": []}
        for _ in range(a.repeats):
            for arm in ("trl", "sharpen"):  # alternating: a drift in the machine hits both
                shutil.rmtree(work / arm, ignore_errors=True)  # each repeat from scratch
                (work / "s.db").unlink(missing_ok=True)
                cmd = [sys.executable, __file__, "--arm", arm, "--work", str(work), "--checkpoint",
                       str(ckpt), "--gguf", str(gguf), "--prompts", str(path), "--threads",
                       str(threads), "--steps", str(a.steps), "--tasks", str(a.tasks),
                       "--max-completion", str(a.max_completion)]
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      env={**os.environ, "TQDM_DISABLE": "1"})
                if done.returncode != 0:
                    raise SystemExit(f"{arm} arm failed:\n{done.stderr[-3000:]}")
                got[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
    # Each arm's median rate over its repeats.
    rate = {arm: (median(r["tokens"] / r["loop_s"] for r in rs),
                  median(r["tokens"] / r["wall_s"] for r in rs)) for arm, rs in got.items()}
    rss = {arm: max(r["rss_mb"] for r in rs) for arm, rs in got.items()}
    lines = [
        "# Training throughput: `sharpen train grpo` vs TRL's GRPOTrainer script",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {cpu_name()} ({cores()} cores, load "
        f"average {os.getloadavg()[0]:.1f} at the end), torch threads {threads}, trl "
        f"{version('trl')}, transformers {version('transformers')}. `python "
        f"benchmarks/train_throughput.py --steps {a.steps} --tasks {a.tasks} --max-completion "
        f"{a.max_completion} --repeats {a.repeats}` (protocol in the script's docstring).",
        "",
        "| arm | repeat | reward per step | tokens | loop s | loop tokens/s | end-to-end s "
        "| end-to-end tokens/s | peak RSS MB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, title in (("sharpen", "sharpen grpo (verifier reward)"),
                       ("trl", "TRL script (regex reward)")):
        for i, r in enumerate(got[arm], 1):
            lines.append(f"| {title} | {i} | {' '.join(f'{x:.2f}' for x in r['reward'])} | "
                         f"{r['tokens']} | {r['loop_s']:.1f} | {r['tokens'] / r['loop_s']:.1f} | "
                         f"{r['wall_s']:.1f} | {r['tokens'] / r['wall_s']:.1f} | "
                         f"{r['rss_mb']:.0f} |")
    loop, e2e = rate["sharpen"][0] / rate["trl"][0], rate["sharpen"][1] / rate["trl"][1]
    lines += [
        "",
        f"Ratio sharpen / TRL of the median rates: training loop {loop:.2f} (target ≥ 0.9: "
        f"{'met' if loop >= 0.9 else 'not met'}), end to end {e2e:.2f}; peak RSS "
        f"{rss['sharpen'] / rss['trl']:.2f}×.",
        "",
        "The loop includes each arm's reward — sharpen's runs every reply against the task's "
        "hidden tests in the sandbox, TRL's is a regex — and sharpen's resume checkpoint (model "
        "and optimiser state, which TRL writes inside `train()` every `save_every` steps). "
        "Sharpen's end to end also builds the prompts through the environment and writes the "
        "merged checkpoint and its GGUF; the TRL script saves the model once.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--max-completion", type=int, default=48)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "train_throughput.md")
    ap.add_argument("--arm", choices=("sharpen", "trl"))
    ap.add_argument("--work", type=Path)
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--gguf", type=Path)
    ap.add_argument("--prompts", type=Path)
    args = ap.parse_args()
    if args.arm:
        print(json.dumps((arm_sharpen if args.arm == "sharpen" else arm_trl)(args)))
    else:
        text = main(args)
        args.out.write_text(text)
        print(text)
