"""Fine-tuning the embedded model on its own successes (rejection-sampling fine-tuning, STaR):
does it raise held-out success? A pre-registered check.

Protocol (fixed in this docstring and committed before the run; run once):

- Environment and agent: ``sharpen demo``'s (generated ``code`` tasks, easy, one submission;
  SmolLM2-135M, 200 tokens per reply, two steps), task seed ``--task-seed`` (5). None of the
  tasks used is among the first 200 train, val or test tasks of task seeds 0–4 (checked at
  start).
- Sampling (train split only): ``--train`` (80) train tasks × 4 epochs at temperature 0.8
  with the embedded model. Kept: the successful episodes (``sharpen export --format sft
  --success --split train``), every one, duplicates included.
- Fine-tuning: ``sharpen checkpoint`` (the embedded model de-quantized to float32), then
  TRL's ``SFTTrainer`` on the kept episodes as prompt–completion pairs (the conversation up to
  the last reply is the prompt, the reply the completion, so the loss is on the reply only):
  full fine-tuning, 2 epochs, learning rate 3e-5 with linear decay, batch 4, seed 0, on the CPU.
  The result goes back to llama.cpp with ``sharpen gguf`` (float32).
- Evaluation: ``--test`` (100) test tasks, the demo's greedy seed spec, three models with the
  same seeds: Q, the embedded model as shipped (Q4_1); U, the untrained checkpoint written
  back to float32 GGUF (the same weights as Q, de-quantized: what fine-tuning starts from);
  T, the trained one.
- Primary: T better than U on the test tasks, exact McNemar at α = 0.05 with a Newcombe 95%
  interval (``sharpen.stats.paired.compare_pair``). Secondary: T vs Q, U vs Q. No prediction
  of the direction: on a 135M model, a few dozen of its own successes may teach it nothing.

Usage::

    python benchmarks/star_finetune.py                      # about 30 minutes on two cores

Needs the ``train`` extra. Results go to ``benchmarks/results/star_finetune.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from machine_info import cores, cpu_name, version
from preregistered import comparison_table, fresh_tasks, protocol_commit

from sharpen.cli.demo_cmd import DEMO_ENV, DEMO_SPEC
from sharpen.core.agent_spec import AgentSpec
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.runner import RunConfig, Runner
from sharpen.stats.paired import compare_pair
from sharpen.stats.report import load_table
from sharpen.store import Store
from sharpen.train import Where, export
from sharpen.train.checkpoint import write_checkpoint, write_gguf

HERE = Path(__file__).resolve().parent
USED_SEEDS = (0, 1, 2, 3, 4)
EPOCHS, TEMPERATURE = 4, 0.8
TRAINING = {"num_train_epochs": 2, "learning_rate": 3e-5, "lr_scheduler_type": "linear",
            "per_device_train_batch_size": 4, "seed": 0}
COMPARISONS = (("U", "T", "primary"), ("Q", "T", "secondary"), ("Q", "U", "secondary"))


def fine_tune(checkpoint: Path, lines: list[dict], out: Path) -> list[float]:
    """TRL SFT of ``checkpoint`` on ``lines`` as prompt–completion pairs, saved to ``out``;
    the logged training losses."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    pairs = Dataset.from_list([{"prompt": x["messages"][:-1], "completion": x["messages"][-1:]}
                               for x in lines])
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(checkpoint),
        args=SFTConfig(output_dir=str(out / "runs"), report_to=[], save_strategy="no", use_cpu=True,
                       logging_steps=1, max_length=1024, **TRAINING),
        train_dataset=pairs, processing_class=AutoTokenizer.from_pretrained(checkpoint))
    trainer.train()
    trainer.save_model(str(out))
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


async def run(store: Store, spec: AgentSpec, tasks: list, epochs: int = 1) -> str:
    summary = await Runner(store, progress=False).run(
        RunConfig(env=DEMO_ENV, agent=spec, tasks=tasks, epochs=epochs))
    return summary.run_id


async def main(args: argparse.Namespace) -> str:
    started, load = datetime.now(UTC), os.getloadavg()[0]
    env = REGISTRY.create("env", DEMO_ENV)
    train = fresh_tasks(env, "train", args.train, args.task_seed, USED_SEEDS)
    test = fresh_tasks(env, "test", args.test, args.task_seed, USED_SEEDS)
    steps: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store = Store(f"sqlite:///{tmp / 'bench.db'}")
        t0 = time.perf_counter()
        sampled = DEMO_SPEC.model_copy(update={"params": {**DEMO_SPEC.params, "temperature": TEMPERATURE}})
        sample_run = await run(store, sampled, train, EPOCHS)
        lines, count = export(store, [sample_run], "sft", Where(success=True, split="train"))
        lines = list(lines)
        steps["sample"] = time.perf_counter() - t0
        print(f"sampled: {count.kept} of {count.read} episodes succeeded", flush=True)
        if not lines:
            raise SystemExit("no successful episode to fine-tune on")

        t0 = time.perf_counter()
        base = write_checkpoint(tmp / "base")
        losses = fine_tune(base, lines, tmp / "trained")
        models = {"Q": None, "U": write_gguf(base, tmp / "untrained.gguf"),
                  "T": write_gguf(tmp / "trained", tmp / "trained.gguf")}
        steps["fine-tune"] = time.perf_counter() - t0
        print(f"fine-tuned: {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)

        tables, rows = {}, []
        for key, path in models.items():
            t0 = time.perf_counter()
            spec = DEMO_SPEC if path is None else DEMO_SPEC.model_copy(
                update={"model": PluginRef(name="local", args={"model_path": str(path)})})
            run_id = await run(store, spec, test)
            tables[key] = load_table(store, run_id)
            steps[f"test {key}"] = time.perf_counter() - t0
            rows.append((key, int(tables[key].c.sum())))
            print(f"{key}: {rows[-1][1]}/{len(test)}", flush=True)
    rng = np.random.default_rng(0)
    results = [(a, b, role, compare_pair(tables[a], tables[b], rng, label_a=a, label_b=b))
               for a, b, role in COMPARISONS]
    names = {"Q": "the embedded model as shipped (Q4_1)",
             "U": "untrained, written back as float32 GGUF", "T": "fine-tuned on its successes"}
    page = [
        "# Fine-tuning the embedded model on its own successes: a pre-registered check", "",
        f"`python benchmarks/star_finetune.py --train {args.train} --test {args.test} --task-seed "
        f"{args.task_seed}` — protocol in the script's docstring, fixed at commit "
        f"{protocol_commit('star_finetune.py')}; run "
        f"{started:%Y-%m-%d %H:%M} UTC, {cpu_name()}, {cores()} CPU(s), load average {load:.1f} at "
        f"the start and {os.getloadavg()[0]:.1f} at the end; sharpen {version('sharpen')}, trl "
        f"{version('trl')}, transformers {version('transformers')}, torch {version('torch')}, "
        f"llama-cpp-python {version('llama-cpp-python')}.", "",
        f"Sampling: {args.train} train tasks × {EPOCHS} epochs at temperature {TEMPERATURE}: "
        f"{count.kept} of {count.read} episodes succeeded and were kept. Fine-tuning: "
        f"{json.dumps(TRAINING)}, {len(losses)} steps, training loss {losses[0]:.3f} → "
        f"{losses[-1]:.3f}. Wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items()) + ".", "",
        f"| model | success on {args.test} test tasks |", "|---|---|",
        *(f"| {k}: {names[k]} | {w}/{args.test} = {w / args.test:.1%} |" for k, w in rows), "",
        *comparison_table(results, "T better than U"),
    ]
    return "\n".join(page) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=int, default=80)
    ap.add_argument("--test", type=int, default=100)
    ap.add_argument("--task-seed", type=int, default=5)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "star_finetune.md")
    a = ap.parse_args()
    text = asyncio.run(main(a))
    a.out.write_text(text)
    print(text)
