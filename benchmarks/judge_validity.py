"""Judge validity of the embedded model on ``code`` and ``sql`` (issue 20's acceptance).

Runs ``sharpen validate-judge ENV --judge rubric:solved --tasks 34`` (transcripts cut to 500
tokens, 10 pairs, 10 × 3 samples in-process) — reference, null and the
embedded tool agent on 34 tasks each (102 trajectories), judged by SmolLM2-135M — twice per
environment: the model in-process (``--model local``) and the same GGUF behind
``python -m llama_cpp.server`` on loopback (``--base-url``). The agents' runs are shared by the
two judges (one store; the second call finds them by config hash). Writes
``benchmarks/results/judge_validity.{md,json}``.

    python benchmarks/judge_validity.py [--tasks 34] [--envs code sql]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
OUT = ROOT / "benchmarks" / "results"
STORE = ROOT / "benchmarks" / ".judge_validity.db"


JUDGE = ["--judge", "rubric:solved", "--judge-arg", "token_budget=500"]
"""The judge under test; a 500-token transcript budget keeps ~500 judge calls within the hour
this benchmark may take on two cores."""


def validate(env: str, tasks: int, backend: list[str], samples: int) -> dict:
    cmd = [str(Path(sys.executable).with_name("sharpen")), "validate-judge", env, *JUDGE,
           "--tasks", str(tasks), "--pairs", "10", "--consistency-items", "10",
           "--samples", str(samples), "--json", "--store", f"sqlite:///{STORE}", *backend]
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    report = json.loads(out.stdout)
    report["seconds"] = time.monotonic() - t0
    report["command"] = "sharpen " + " ".join(cmd[1:])
    return report


def _est(e: dict | None, percent: bool = False) -> str:
    if not e or e.get("value") is None:
        return "n/a"
    k = 100 if percent else 1
    f = ".1f" if percent else ".2f"
    ci = "" if e.get("low") is None else f" [{k * e['low']:{f}}, {k * e['high']:{f}}]"
    return f"{k * e['value']:{f}}{'%' if percent else ''}{ci}"


def row(env: str, judge: str, r: dict) -> str:
    v = r["verifier"]
    src = {s["source"]: s for s in r["sources"]}

    def rate(name: str) -> str:
        s = src.get(name)
        return "n/a" if not s or s["judge_rate"] is None else f"{100 * s['judge_rate']:.0f}%"

    lb = r.get("length_bias") or {}
    flip = r.get("flip") or {}
    cons = r.get("consistency") or {}
    return (f"| {env} | {judge} | {r['n']} | {100 * v['base_rate']:.0f}% | "
            f"{_est(v['accuracy'], True)} | {_est(v['kappa'])} | {rate('reference')} | "
            f"{rate('null')} | {rate('agent')} | {_est(lb.get('within'))} | "
            f"{_est(flip.get('rate'), True)} | {_est(cons.get('pairwise_agreement'), True)} | "
            f"{r['judge_errors']} | {r['seconds']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=34)
    ap.add_argument("--envs", nargs="+", default=["code", "sql"])
    ap.add_argument("--from-json", type=Path, default=None, help="Write the table from "
                    "ENV_BACKEND.json files (validate-judge --json outputs, each with 'seconds' "
                    "and 'command' added) instead of running.")
    args = ap.parse_args()
    results: dict[str, dict] = {}
    if args.from_json is not None:
        for env in args.envs:
            for backend in ("local", "server"):
                f = args.from_json / f"{env}_{backend}.json"
                if f.exists():
                    results[f"{env}/{backend}"] = json.loads(f.read_text())
        write(results, args.tasks)
        return
    from servers import start_llama_server, stop_server


    def one_env(env: str) -> None:
        # self-consistency is sampled with the in-process judge only: the same model behind
        # the server would repeat the measurement at the price of 30 more calls per env
        results[f"{env}/local"] = validate(env, args.tasks, ["--model", "local"], samples=3)
        url, proc = start_llama_server()
        try:
            results[f"{env}/server"] = validate(env, args.tasks, [
                "--base-url", url, "--model-name", "smollm2-135m"], samples=0)
        finally:
            stop_server(proc)

    # the environments in parallel: one's agent episodes overlap the other's judging
    with ThreadPoolExecutor(len(args.envs)) as pool:
        list(pool.map(one_env, args.envs))
    results = {k: results[k] for k in sorted(results, key=lambda k: (args.envs.index(
        k.split("/")[0]), k))}
    write(results, args.tasks)


def write(results: dict[str, dict], tasks: int) -> None:
    """``benchmarks/results/judge_validity.{json,md}`` from ``results``."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "judge_validity.json").write_text(json.dumps(results, indent=2))
    lines = [
        "# Judge validity: SmolLM2-135M judging `rubric:solved` against the verifier",
        "",
        f"`python benchmarks/judge_validity.py --tasks {tasks}` — per environment, "
        f"{tasks} tasks × (reference, null, embedded tool agent), judged by the embedded "
        "model in-process (`local`) and by the same GGUF behind `llama_cpp.server` on loopback "
        "(`server`). 95% intervals by the bootstrap over tasks (BCa; Wilson for rates). "
        "Length bias: Spearman ρ of score and transcript length within verifier outcomes. "
        "Flip: (agent, reference) pairs judged in both orders by the pairwise judge. "
        "Consistency (in-process judge only): 10 transcripts × 3 samples at temperature 0.7. "
        "Flip: 10 pairs. The judge reads transcripts cut to 500 tokens (`token_budget=500`).",
        "",
        "| env | judge | n | verifier passes | accuracy | Cohen's κ | judge passes reference "
        "| judge passes null | judge passes agent | length bias ρ | flip rate | "
        "self-agreement | judge errors | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [row(*k.split("/"), r) for k, r in results.items()]
    lines += ["", "Commands:", ""] + [f"- `{r['command']}`" for r in results.values()]
    (OUT / "judge_validity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
