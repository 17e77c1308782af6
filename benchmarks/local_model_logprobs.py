"""What ``logprobs=true`` costs the embedded model: generation speed and memory.

What is measured
----------------
:class:`~sharpen.models.local.LocalModel` with ``logprobs`` off and on, each arm in a fresh
process (each loads its own Llama; ``logprobs=true`` builds it with ``logits_all=True``), the
two arms taking turns ``--reps`` times: one warm-up call, then ``--calls`` distinct prompts
(greedy, ``--max-tokens`` tokens at most, ``n_ctx`` 2048). Reported per arm: the median over
reps of the generated tokens per second of generation time (``Completion.latency_s``), and
the process's peak resident memory (``VmHWM``). Greedy and seeded, so both arms give the
same replies (checked: the script fails otherwise).

Usage::

    python benchmarks/local_model_logprobs.py              # 8 calls × 64 tokens, 2 reps (~1 min)
    python benchmarks/local_model_logprobs.py --calls 16 --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys

PROMPTS = ["Write a Python function that reverses a string.", "What is the capital of France?",
           "Explain recursion in one paragraph.", "Write a haiku about the sea.",
           "List three prime numbers and say why they are prime.", "Write a function that sums a list.",
           "What does HTTP stand for?", "Describe a cat to someone who has never seen one."]


async def _arm(logprobs: bool, calls: int, max_tokens: int) -> dict[str, object]:
    from sharpen.core.messages import Message
    from sharpen.models.local import LocalModel

    model = LocalModel(logprobs=logprobs)
    params = {"temperature": 0.0, "max_tokens": max_tokens}
    await model.complete([Message(role="user", content="Hi.")], params=params)  # load, warm up
    seconds, tokens, replies = 0.0, 0, []
    for i in range(calls):
        c = await model.complete([Message(role="user", content=PROMPTS[i % len(PROMPTS)] + f" ({i})")],
                                 params=params)
        seconds, tokens = seconds + c.latency_s, tokens + c.usage.output_tokens
        replies.append(c.message.content)
        assert (c.logprobs is not None) == logprobs
        assert not logprobs or len(c.logprobs or []) == c.usage.output_tokens
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    return {"tokens_per_s": tokens / seconds, "peak_rss_mb": hwm / 1024, "replies": replies}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--arm", choices=["off", "on"], help=argparse.SUPPRESS)  # one arm, in its own process
    a = ap.parse_args()
    if a.arm:
        print(json.dumps(asyncio.run(_arm(a.arm == "on", a.calls, a.max_tokens))))
        return
    results: dict[str, list[dict[str, object]]] = {"off": [], "on": []}
    for _ in range(a.reps):
        for arm in ("off", "on"):
            cmd = [sys.executable, __file__, "--arm", arm, "--calls", str(a.calls),
                   "--max-tokens", str(a.max_tokens)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results[arm].append(json.loads(out.stdout.strip().splitlines()[-1]))
    if any(r["replies"] != results["off"][0]["replies"] for rs in results.values() for r in rs):
        sys.exit("the arms gave different replies")
    for arm, rs in results.items():
        tps = statistics.median(float(r["tokens_per_s"]) for r in rs)  # type: ignore[arg-type]
        rss = statistics.median(float(r["peak_rss_mb"]) for r in rs)  # type: ignore[arg-type]
        print(f"logprobs {arm}: {tps:.1f} tokens/s, peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
