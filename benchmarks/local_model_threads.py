"""The embedded model's speed by llama.cpp thread count, on an idle and on a busy machine.

What is measured
----------------
SmolLM2-135M-Instruct (the GGUF :func:`sharpen.models.local.gguf_path` finds, loaded as
:class:`~sharpen.models.local.LocalModel` loads it: ``llama_cpp.Llama``, ``n_ctx`` 2048,
seed 0) reads each of 3 fixed prompts (a few hundred tokens each, evaluated from an empty
cache) and then writes ``--tokens`` tokens after each, greedily (temperature 0), whatever it
writes (end-of-text does not stop it). Reported per arm: prompt tokens/s (the prompts'
tokens over the time to their first sampled token) and generation tokens/s (the tokens after
the first over their time), each the median over ``--reps`` runs. A prompt whose generation
runs past ``--cap`` seconds stops there and its rate counts the tokens written by then.

Arms (every run in a fresh process, so each loads the library with its own environment):

* ``1 thread`` — ``n_threads=1, n_threads_batch=1``;
* ``1 thread, batch N`` — ``n_threads=1`` with llama-cpp-python's default ``n_threads_batch``
  (``multiprocessing.cpu_count()``): prompts on every core, generation on one. This is what
  ``LocalModel(n_threads=1)`` gets, as it passes ``n_threads`` only;
* ``N threads`` — ``n_threads=n_threads_batch=N``, N = the cores this process may use (the
  old default);
* ``N threads, passive`` — the same with ``OMP_WAIT_POLICY=PASSIVE``. The installed wheel's
  ggml is built with OpenMP (``libggml-cpu.so`` links ``libgomp`` and calls ``GOMP_barrier``),
  so llama.cpp's barriers are libgomp's, which spin (300,000 times by default) before sleeping
  unless told to wait passively;
* ``N threads, spin 10k`` — the same with ``GOMP_SPINCOUNT=10000``: spin briefly, then sleep.

ggml's own thread-pool knobs (``poll``, priority) are not used by an OpenMP build, and
llama-cpp-python exposes no ``llama_attach_threadpool``; no ``GGML_*``/``LLAMA_*`` environment
variable in the wheel's libraries touches threading (``strings`` on them).

Conditions, in this order (``--busy``, a list of busy-process counts; default ``0,N-1,N``):

* ``idle`` (0) — nothing started by the script; before it the script waits (up to ``--settle``
  seconds) for the 1-minute load average to drop below 1;
* ``K busy`` — K processes running ``while True: pass`` (started 3 s before the condition's
  first run, killed after its last): ``N-1`` leaves one core free, ``N`` = ``os.cpu_count()``
  leaves none.

Within a condition the arms run in turn, their order rotated each rep. The 1-minute load
average is recorded at the start of every run; the table gives the lowest and highest per
condition. The machine may be shared with other work: that load is in the numbers.

Usage::

    python benchmarks/local_model_threads.py                 # 3 reps, 3 x 64 tokens (~10 min)
    python benchmarks/local_model_threads.py --reps 5 --tokens 128 --busy 0,2

Results go to ``benchmarks/results/local_model_threads.md`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from machine_info import cores, cpu_name, version

HERE = Path(__file__).resolve().parent

PROMPTS = [
    "Here is a grid world. You are at (0, 0); the goal is at (4, 4); walls are at (1, 1), "
    "(2, 3) and (3, 2). Moves are up, down, left and right, one square at a time. ",
    "Write a SQL query over the table orders(id, customer, amount, placed_at) that returns "
    "each customer's total amount in 2024, largest first, with customers over 1000 only. ",
    "A shop sells pens at 3 dollars and notebooks at 5 dollars. Anna buys some of each and "
    "pays 31 dollars for 9 items. How many notebooks did she buy? Explain every step. ",
]
"""Distinct from their first word, so no prompt reuses another's cached prefix; each is
repeated to a few hundred tokens (agent prompts are that long)."""
REPEAT = 2

ARMS: dict[str, dict[str, Any]] = {
    "1 thread": {"threads": 1, "batch": 1, "env": {}},
    "1 thread, batch N": {"threads": 1, "batch": None, "env": {}},
    "N threads": {"threads": "N", "batch": "N", "env": {}},
    "N threads, passive": {"threads": "N", "batch": "N", "env": {"OMP_WAIT_POLICY": "PASSIVE"}},
    "N threads, spin 10k": {"threads": "N", "batch": "N", "env": {"GOMP_SPINCOUNT": "10000"}},
}


def child(n_threads: int, n_batch: int | None, n_tokens: int, cap: float) -> dict[str, Any]:
    """Load the model with these threads, run every prompt; tokens and seconds, summed."""
    import llama_cpp

    from sharpen.models.local import gguf_path

    t0 = time.perf_counter()
    llama = llama_cpp.Llama(model_path=str(gguf_path()), n_ctx=2048, n_threads=n_threads,
                            n_threads_batch=n_batch, seed=0, verbose=False)
    out: dict[str, Any] = {"load_s": time.perf_counter() - t0, "prompt_tokens": 0,
                           "prompt_s": 0.0, "gen_tokens": 0, "gen_s": 0.0, "capped": 0}
    for text in PROMPTS:
        tokens = llama.tokenize((text * REPEAT).encode())
        llama.reset()
        t0 = time.perf_counter()
        gen = llama.generate(tokens, temp=0.0, top_k=1, reset=True)
        next(gen)  # the prompt's evaluation, then the first sample
        t1 = time.perf_counter()
        n = 0
        while n < n_tokens - 1:
            next(gen)
            n += 1
            if time.perf_counter() - t1 > cap:
                out["capped"] += 1
                break
        t2 = time.perf_counter()
        gen.close()
        out["prompt_tokens"] += len(tokens)
        out["prompt_s"] += t1 - t0
        out["gen_tokens"] += n
        out["gen_s"] += t2 - t1
    llama.close()
    return out


def run_arm(arm: str, n: int, n_tokens: int, cap: float) -> dict[str, Any]:
    """One run of ``arm`` in a fresh process, with the load average at its start."""
    spec = ARMS[arm]
    threads = n if spec["threads"] == "N" else spec["threads"]
    batch = n if spec["batch"] == "N" else spec["batch"]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(spec["env"])
    load = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--child", json.dumps([threads, batch, n_tokens, cap])]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    res["load"] = load
    return res


def settle(limit: float) -> float:
    """Wait until the 1-minute load average is below 1 (at most ``limit`` s); the load then."""
    deadline = time.monotonic() + limit
    while os.getloadavg()[0] >= 1 and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def condition(name: str, reps: int, n: int, n_tokens: int, cap: float) -> dict[str, list]:
    """Every arm ``reps`` times, order rotated per rep."""
    names = list(ARMS)
    runs: dict[str, list] = {a: [] for a in names}
    for r in range(reps):
        for arm in names[r % len(names):] + names[: r % len(names)]:
            res = run_arm(arm, n, n_tokens, cap)
            runs[arm].append(res)
            print(f"{name} rep {r + 1} {arm}: load {res['load']:.2f}, "
                  f"prompt {res['prompt_tokens'] / res['prompt_s']:.0f} tok/s, "
                  f"gen {res['gen_tokens'] / res['gen_s']:.1f} tok/s"
                  + (f" ({res['capped']} capped)" if res["capped"] else ""), flush=True)
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tokens", type=int, default=64, help="tokens written after each prompt")
    p.add_argument("--cap", type=float, default=8.0, help="seconds of generation per prompt")
    p.add_argument("--settle", type=float, default=120.0,
                   help="seconds to wait for load < 1 before the idle condition")
    p.add_argument("--busy", default="", help="busy-process counts, e.g. 0,1,2 (default 0,N-1,N)")
    p.add_argument("--out", type=Path, default=HERE / "results" / "local_model_threads.md")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(*json.loads(a.child))))
        return

    n = cores()
    started = datetime.now(UTC)
    counts = [int(k) for k in a.busy.split(",")] if a.busy else [0, max(n - 1, 1), n]
    results: dict[str, dict[str, list]] = {}
    for k in counts:
        name = f"{k} busy" if k else "idle"
        if not k:
            print(f"idle: load {settle(a.settle):.2f} after settling", flush=True)
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]
        try:
            if busy:
                time.sleep(3)
            results[name] = condition(name, a.reps, n, a.tokens, a.cap)
        finally:
            for b in busy:
                b.kill()
                b.wait()

    first = next(iter(results.values()))["1 thread"][0]
    prompt_len = first["prompt_tokens"] // len(PROMPTS)
    cmd = "python benchmarks/local_model_threads.py" + "".join(
        f" --{k} {v}" for k, v in (("reps", a.reps), ("tokens", a.tokens), ("cap", a.cap),
                                   ("busy", ",".join(map(str, counts))))
    )
    lines = [
        "# The embedded model's speed by thread count, idle and busy", "",
        f"`{cmd}` — {started:%Y-%m-%d %H:%M} UTC, {cpu_name()}, {n} CPU(s); "
        f"sharpen {version('sharpen')}, llama-cpp-python {version('llama-cpp-python')}.", "",
        f"SmolLM2-135M (Q4_1), {len(PROMPTS)} prompts of {prompt_len} tokens on average, "
        f"{a.tokens} greedy tokens "
        f"after each, a fresh process per run; median of {a.reps} runs per arm, arms rotated. "
        "K busy = K `while True: pass` processes beside it. Load = the 1-minute load "
        "average at the start of the condition's runs (lowest-highest).", "",
        "| condition | arm | load | prompt tok/s | generation tok/s | capped prompts |",
        "|---|---|---|---|---|---|",
    ]
    for cond, runs in results.items():
        for arm, rs in runs.items():
            loads = [r["load"] for r in rs]
            prompt = statistics.median(r["prompt_tokens"] / r["prompt_s"] for r in rs)
            gen = statistics.median(r["gen_tokens"] / r["gen_s"] for r in rs)
            capped = sum(r["capped"] for r in rs)
            lines.append(f"| {cond} | {arm} | {min(loads):.1f}-{max(loads):.1f} | {prompt:.0f} "
                         f"| {gen:.1f} | {capped} |")
    text = "\n".join(lines) + "\n"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
