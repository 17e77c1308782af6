"""Free vs constrained decoding on the embedded model: invalid actions, success, tokens, time.

What is measured
----------------
1. **Episodes.** Every cell of ``benchmarks/embedded_model_envs.py`` (each registered
   environment × difficulty preset, its :func:`~embedded_model_envs.plan`) is run twice through
   the real CLI, by that script's :func:`~embedded_model_envs.run_cell` (a ``sharpen run``
   subprocess into its own SQLite store, numbers read back from the store), once per
   ``decoding`` of the AgentSpec — ``free`` (the text protocol) and ``constrained`` (JSON actions
   sampled under the llama.cpp grammar of the environment's action schema) — with the same
   test tasks and seeds. Otherwise the spec is embedded_model_envs's: model ``local`` with
   ``n_threads`` 1, temperature 0, ``max_tokens`` 200, ``max_steps`` 6, ``max_seconds`` 120.

   Per cell: invalid actions per episode in each mode and the reduction; success in each mode
   and the paired difference constrained − free over the tasks both scored, with its 95%
   interval, from sharpen's own :func:`sharpen.stats.paired.compare_pair` (one attempt per
   task: exact McNemar with Newcombe's interval); tokens in / out; wall time of each CLI
   process. Per environment the same comparison pooled over its difficulty cells.

   A run that crashed or timed out is shown with its exit and left out of every comparison.
   For each cell the agent's feedback on the constrained replies that were still invalid is
   tallied (why the grammar did not prevent them).

2. **Costs of the grammar** (in this process, before the episodes and again after them,
   nothing else of this script running): for each environment, the time of
   :func:`sharpen.models.grammar.compile_grammar` on its action schema (the one the agent
   builds at the first step of the first test task; median of ``--compile-reps``); and the
   per-token time of generation under a grammar vs without: ``--gen-prompts`` prompts ×
   ``--gen-tokens`` tokens each, temperature 0.7, seeded, one thread, end-of-sequence banned in
   both modes so that both write exactly that many tokens; the grammar is a JSON object with one
   required string of at least 4,000 characters (it cannot close before the token budget). The
   per-token time is (wall time of the call − llama.cpp's prompt-evaluation time) / tokens
   decoded, so it holds both the forward pass and the sampling (where a grammar costs). The
   reference run is the free one; the ratio is constrained / free.

Resuming: every finished (cell, mode) is cached as JSON in ``--store-dir`` (with its store and
log) and skipped on the next run of the same command; the grammar costs likewise. After every
finished cell the results page is rewritten with the cells done so far, so a run stopped midway
leaves an honest partial table. Cells run in priority order — every environment's medium (or
only) difficulty first, then easy, then hard — ``--parallel`` at a time (default 2).

Usage::

    python benchmarks/constrained_decoding.py --tasks 3 --store-dir /tmp/cd_run
    python benchmarks/constrained_decoding.py --tasks 3 --envs sql,gridsafety --store-dir /tmp/x

Results go to ``benchmarks/results/constrained_decoding.md`` and ``.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from embedded_model_envs import AGENT, Cell, machine, plan, run_cell

from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.stats.paired import PairedComparison, compare_pair
from sharpen.stats.taskdata import TaskTable
from sharpen.store import Store
from sharpen.store.aggregate import RunAggregate, run_aggregate

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MODES = ("free", "constrained")
PRIORITY = {None: 0, "medium": 0, "easy": 1, "hard": 2}


def spec(mode: str) -> dict[str, Any]:
    """The AgentSpec of ``mode``: embedded_model_envs's, one thread, ``decoding`` set."""
    return {**AGENT, "model": {"name": "local", "args": {"n_threads": 1}}, "decoding": mode}


def label(cell: Cell) -> str:
    return "-".join([cell.env, *(str(v) for v in cell.args.values())])


def priority(cell: Cell) -> int:
    return PRIORITY.get(cell.args.get("difficulty"), 3)


# ---------------------------------------------------------------- episodes


def run_one(cell: Cell, mode: str, tasks: int, root: Path, timeout: float) -> dict[str, Any]:
    """Run ``cell`` in ``mode`` (or read it from the cache) and return its cached record."""
    cache = root / "cells" / f"{label(cell)}.{mode}.json"
    if cache.exists():
        rec = json.loads(cache.read_text())
        if rec["tasks"] == tasks:
            return rec
    mode_dir = root / mode
    done = run_cell(cell.model_copy(deep=True), tasks, mode_dir / "agent.yaml", mode_dir, timeout)
    db = mode_dir / f"{label(cell)}.db"
    rec = {"tasks": tasks, "mode": mode, "cell": done.model_dump(), "db": str(db),
           "decoding_recorded": recorded_decoding(db), "finished": datetime.now(UTC).isoformat()}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(rec, indent=1))
    return rec


def recorded_decoding(db: Path) -> str | None:
    """``extra["decoding"]`` of the run manifest in ``db`` (what the agent actually did)."""
    if not db.exists():
        return None
    with Store(f"sqlite:///{db}") as st:
        runs = st.list_runs(limit=1)
        return str(runs[0].manifest.extra.get("decoding")) if runs else None


def invalid_reasons(db: str) -> dict[str, int]:
    """The feedback given for each invalid reply in ``db``, by its first sentence."""
    if not Path(db).exists():
        return {}
    out: dict[str, int] = {}
    with Store(f"sqlite:///{db}") as st:
        runs = st.list_runs(limit=1)
        for t in st.iter_trajectories(runs[0].id, with_messages=False) if runs else []:
            for step in t.steps:
                if step.invalid_action:
                    key = step.invalid_action.split("\n")[0][:80]
                    out[key] = out.get(key, 0) + 1
    return out


def aggregate(db: str) -> RunAggregate | None:
    if not Path(db).exists():
        return None
    with Store(f"sqlite:///{db}") as st:
        runs = st.list_runs(limit=1)
        return run_aggregate(st, runs[0].id) if runs else None


def paired(free: list[str], constrained: list[str]) -> PairedComparison | None:
    """constrained − free over the tasks both runs scored, pooling the runs' task tables."""
    tables = []
    for dbs, name in ((free, "free"), (constrained, "constrained")):
        pooled = RunAggregate(run_id=name)
        for db in dbs:
            agg = aggregate(db)
            if agg is not None:
                pooled.tasks += agg.tasks
        tables.append(TaskTable.from_aggregate(pooled))
    if not len(tables[0]) or not len(tables[1]):
        return None
    return compare_pair(tables[0], tables[1], np.random.default_rng(0), label_a="free",
                        label_b="constrained")


# ---------------------------------------------------------------- grammar costs


def action_schemas(envs: list[str]) -> dict[str, Any]:
    """Each env's action schema as the agent builds it at the first step of its first test
    task (default arguments; the admissible commands where the env lists them)."""
    from sharpen.agents.constrained import action_schema, admissible_of

    out: dict[str, Any] = {}
    for name in envs:
        env = REGISTRY.create("env", PluginRef(name=name, args={}))
        try:
            task = env.list_tasks(split="test", limit=1)[0]
            _, info = asyncio.run(env.reset(task))
            out[name] = action_schema(env.tools, admissible_of(info))
        except Exception as exc:  # noqa: BLE001 - an optional adapter missing: say so, go on
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


def grammar_costs(envs: list[str], reps: int, prompts: int, tokens: int) -> dict[str, Any]:
    """Compile time per action schema and ms/token with vs without a grammar (see module doc)."""
    import llama_cpp

    from sharpen.models.grammar import compile_grammar, schema_to_gbnf
    from sharpen.models.local import LocalModel
    from sharpen.models.structured import ResponseSchema, UnsupportedSchema

    llama = LocalModel(n_threads=1).llama
    compile_rows: list[dict[str, Any]] = []
    for name, rs in action_schemas(envs).items():
        if isinstance(rs, str):
            compile_rows.append({"env": name, "error": rs})
            continue
        times = []
        try:
            for _ in range(reps):
                t = time.perf_counter()
                compile_grammar(rs, llama)
                times.append(time.perf_counter() - t)
        except UnsupportedSchema as exc:  # what the agent meets too: report it, go on
            compile_rows.append({"env": name, "error": f"UnsupportedSchema: {exc}"})
            continue
        compile_rows.append({"env": name, "schema_chars": len(json.dumps(rs.json_schema)),
                             "gbnf_chars": len(schema_to_gbnf(rs)),
                             "median_ms": 1000 * statistics.median(times),
                             "times_ms": [1000 * x for x in times]})
    long_text = ResponseSchema.of({
        "type": "object", "properties": {"story": {"type": "string", "minLength": 4000}},
        "required": ["story"], "additionalProperties": False}, name="long_text")
    grammar = compile_grammar(long_text, llama)
    asks = ["Write a long story about a lighthouse keeper.",
            "Describe, step by step, how to bake bread.",
            "Explain how a bicycle works, in detail.",
            "Tell the history of the printing press.",
            "Describe a walk through a forest in autumn."][:prompts]
    ctx = llama._ctx.ctx
    ban = {llama.token_eos(): -1e9}
    gen: dict[str, list[dict[str, Any]]] = {"free": [], "constrained": []}
    for i, ask in enumerate(asks):
        for mode in ("free", "constrained"):  # alternate, so that load changes hit both alike
            content = ask if mode == "free" else ask + ' Reply as JSON {"story": "..."}.'
            llama.reset()  # evaluate the whole prompt every time (prefix cache off)
            llama_cpp.llama_perf_context_reset(ctx)
            t = time.perf_counter()
            raw = llama.create_chat_completion(
                messages=[{"role": "user", "content": content}], max_tokens=tokens,
                temperature=0.7, seed=i, logit_bias=ban,
                grammar=grammar if mode == "constrained" else None)
            wall = time.perf_counter() - t
            perf = llama_cpp.llama_perf_context(ctx)
            n_out = int(raw["usage"]["completion_tokens"])
            decode_s = wall - perf.t_p_eval_ms / 1000
            gen[mode].append({"prompt": i, "tokens": n_out, "wall_s": wall,
                              "prompt_eval_ms": perf.t_p_eval_ms, "n_eval": perf.n_eval,
                              "ms_per_token": 1000 * decode_s / max(n_out, 1)})
    per_token = {m: 1000 * sum(r["wall_s"] - r["prompt_eval_ms"] / 1000 for r in rows)
                 / max(sum(r["tokens"] for r in rows), 1) for m, rows in gen.items()}
    return {"compile": compile_rows, "generation": gen, "ms_per_token": per_token,
            "ratio": per_token["constrained"] / per_token["free"],
            "prompts": prompts, "tokens": tokens, "load": os.getloadavg()[0]}


# ---------------------------------------------------------------- report


def _rate(c: dict[str, Any]) -> str:
    return f"{c['n_success']}/{c['n_counted']}" if c["n_counted"] else "—"


def _status(c: dict[str, Any]) -> str:
    if c["timed_out"]:
        return f"timeout ({c['wall_s']:.0f} s)"
    if c["exit_code"] == 0:
        return "0"
    return f"crash {c['exit_code']}: `{c['error_line'].replace('|', '¦')[:120]}`"


def ran(c: dict[str, Any]) -> bool:
    """The CLI run ended normally and stored episodes."""
    return c["exit_code"] == 0 and not c["timed_out"] and c["n_trajectories"] > 0


def per_episode(c: dict[str, Any]) -> float | None:
    return c["invalid_actions"] / c["n_trajectories"] if c["n_trajectories"] else None


def reduction(free: float | None, con: float | None) -> float | None:
    if free is None or con is None or free == 0:
        return None
    return 1 - con / free


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _ci(cmp: PairedComparison | None) -> str:
    if cmp is None or cmp.difference is None or cmp.ci is None:
        return "—"
    return (f"{100 * cmp.difference:+.0f} [{100 * cmp.ci.low:+.0f}, {100 * cmp.ci.high:+.0f}] "
            f"(n={cmp.matched_tasks})")


def excludes_zero(cmp: PairedComparison | None) -> bool:
    return cmp is not None and cmp.ci is not None and cmp.difference is not None and (
        cmp.ci.low > 0 or cmp.ci.high < 0)


def summarise(cells: list[Cell], recs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """Per cell and per env: the numbers of the table, from the cached records."""
    rows, by_env = [], {}
    for cell in cells:
        pair = {m: recs.get((label(cell), m)) for m in MODES}
        if cell.skipped or not all(pair.values()):
            continue
        f, c = (pair[m]["cell"] for m in MODES)  # type: ignore[index]
        cmp = paired([pair["free"]["db"]], [pair["constrained"]["db"]])  # type: ignore[index]
        red = reduction(per_episode(f), per_episode(c))
        rows.append({"env": cell.env, "args": cell.flags() or "(defaults)", "free": f,
                     "constrained": c, "reduction": red, "cmp": cmp, "ok": ran(f) and ran(c),
                     "why": invalid_reasons(pair["constrained"]["db"]),  # type: ignore[index]
                     "decoding_recorded": {m: pair[m]["decoding_recorded"] for m in MODES}})  # type: ignore[index]
        if not rows[-1]["ok"]:  # a crashed or timed-out run is shown, never compared
            continue
        by_env.setdefault(cell.env, {"free": [], "constrained": [], "rows": []})
        for m in MODES:
            by_env[cell.env][m].append(pair[m]["db"])  # type: ignore[index]
        by_env[cell.env]["rows"].append(rows[-1])
    envs = {}
    for env, d in by_env.items():
        inv = {m: sum(r[m]["invalid_actions"] for r in d["rows"]) for m in MODES}
        eps = {m: sum(r[m]["n_trajectories"] for r in d["rows"]) for m in MODES}
        # A cell free decoding made no invalid action in meets the target when constrained made none.
        met = [(r["reduction"] is None and r["constrained"]["invalid_actions"] == 0)
               or (r["reduction"] or 0) >= 0.9 for r in d["rows"]]
        envs[env] = {"cells": len(d["rows"]), "cmp": paired(d["free"], d["constrained"]),
                     "invalid_per_episode": {m: inv[m] / eps[m] if eps[m] else None for m in MODES},
                     "every_cell_90": all(met)}
        envs[env]["reduction"] = reduction(*envs[env]["invalid_per_episode"].values())
    return {"rows": rows, "envs": envs}


def report(cells: list[Cell], recs: dict[tuple[str, str], dict[str, Any]], costs: dict[str, Any] | None,
           argv: list[str], tasks: int, meta: dict[str, Any], final: bool,
           notes: str = "") -> tuple[str, dict[str, Any]]:
    """The markdown page and the raw JSON, from the cells cached so far."""
    s = summarise(cells, recs)
    started = datetime.fromisoformat(meta["started"])
    planned = [c for c in cells if not c.skipped]
    lines = [
        "# Free vs constrained decoding on the embedded model",
        "",
        f"`{shlex.join(['python', 'benchmarks/constrained_decoding.py', *meta.get('argv', argv)])}`"
        " (resumed from its cache until every cell was done) — started "
        f"{started:%Y-%m-%d %H:%M} UTC"
        + (f", written {datetime.now(UTC):%H:%M} UTC." if final else
           f"; **partial: written {datetime.now(UTC):%H:%M} UTC while running**."),
        "",
        f"Cells done (both modes): {len(s['rows'])} of {len(planned)} planned"
        + (f"; skipped (package missing): {', '.join(c.env for c in cells if c.skipped)}"
           if any(c.skipped for c in cells) else "") + ".",
        "",
        f"Each cell is two `sharpen run ENV ARGS --split test --tasks {tasks} --agent AGENT.yaml "
        "--store sqlite:///DIR/CELL.db --no-progress -c 1` (run by `embedded_model_envs.run_cell`), "
        "the same first tasks of the test split and the same seeds, one attempt each, with this "
        "AgentSpec and `decoding: free` or `decoding: constrained`:",
        "",
        "```yaml",
        yaml.safe_dump({k: v for k, v in spec("MODE").items() if k != "decoding"},
                       sort_keys=False).rstrip(),
        "decoding: free | constrained",
        "```",
        "",
        "## Episodes, per cell",
        "",
        "| env | args | invalid / episode free → constrained | reduction | success free | "
        "success constrained | constrained − free, points [95% CI] | tokens in / out free | "
        "tokens in / out constrained | wall s free / constrained | exit free / constrained |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["rows"]:
        f, c = r["free"], r["constrained"]
        pf, pc = per_episode(f), per_episode(c)
        inv = f"{pf:.2f} → {pc:.2f}" if pf is not None and pc is not None else "—"
        red = ("—" if not r["ok"] else "n/a (0 free)" if r["reduction"] is None
               else f"{r['reduction']:.0%}")
        lines.append(
            f"| {r['env']} | {r['args']} | {inv} | {red} | {_rate(f)} | {_rate(c)} | {_ci(r['cmp'])} | "
            f"{f['input_tokens']:,} / {f['output_tokens']:,} | {c['input_tokens']:,} / "
            f"{c['output_tokens']:,} | {f['wall_s']:.0f} / {c['wall_s']:.0f} | "
            f"{_status(f)} / {_status(c)} |")
    lines += [
        "",
        "invalid / episode = replies with no valid action ÷ stored episodes. reduction = 1 − "
        "constrained / free. success = successes / counted attempts (ended normally or by an agent "
        "limit). The paired difference and its interval are `sharpen.stats.paired.compare_pair` "
        "(free = A, constrained = B) over the tasks both runs scored: with one attempt per task, "
        "exact McNemar and Newcombe's 95% interval. wall s = the whole CLI process, model load "
        "included; two cells ran at a time on a shared machine, so wall times carry that load.",
        "",
        "## Per environment (difficulty cells pooled)",
        "",
        "| env | cells | invalid / episode free → constrained | reduction | every cell ≥ 90% | "
        "success free → constrained | constrained − free, points [95% CI] | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env, e in s["envs"].items():
        ipe = e["invalid_per_episode"]
        cmp = e["cmp"]
        rates = (f"{cmp.rate_a:.0%} → {cmp.rate_b:.0%}" if cmp is not None and cmp.rate_a is not None
                 else "—")
        red = "n/a" if e["reduction"] is None else f"{e['reduction']:.0%}"
        lines.append(f"| {env} | {e['cells']} | {_num(ipe['free'])} → {_num(ipe['constrained'])} | {red} | "
                     f"{'yes' if e['every_cell_90'] else 'no'} | {rates} | {_ci(cmp)} | "
                     f"{cmp.verdict if cmp else '—'} |")
    ok = [r for r in s["rows"] if r["ok"]]
    failed = [f"{r['env']} {r['args']}" for r in s["rows"] if not r["ok"]]
    failed_envs = sorted({r["env"] for r in s["rows"] if not r["ok"]} - set(s["envs"]))
    n90 = sum(1 for r in ok if r["reduction"] is not None and r["reduction"] >= 0.9)
    n_def = sum(1 for r in ok if r["reduction"] is not None)
    env90 = [e for e, d in s["envs"].items() if d["every_cell_90"]]
    rose = [e for e, d in s["envs"].items() if excludes_zero(d["cmp"]) and d["cmp"].difference > 0]
    rose_cells = [f"{r['env']} {r['args']}" for r in s["rows"]
                  if excludes_zero(r["cmp"]) and r["cmp"].difference > 0]
    fell = [e for e, d in s["envs"].items() if excludes_zero(d["cmp"]) and d["cmp"].difference < 0]
    lines += [
        "",
        "## Summary",
        "",
        f"- Invalid actions per episode fell by ≥ 90% in {n90} of {n_def} cells where free decoding "
        f"had any ({len(ok) - n_def} cell(s) had none in free decoding); in every cell of "
        f"{len(env90)} of {len(s['envs']) + len(failed_envs)} environments "
        f"({', '.join(env90) or 'none'}). Target: every environment — "
        f"{'met' if len(env90) == len(s['envs']) and s['envs'] and not failed_envs else '**not met**'}"
        " on the cells run.",
        f"- Not compared (a run crashed or timed out; see the exit column): {len(failed)} cell(s)"
        + (f" — {'; '.join(failed)}" if failed else "")
        + (f". Environments with no comparable cell: {', '.join(failed_envs)}" if failed_envs else "")
        + ".",
        f"- Success rose with a paired 95% interval excluding zero in {len(rose)} environment(s) "
        f"(pooled over difficulties): {', '.join(rose) or 'none'}; in single cells: "
        f"{', '.join(rose_cells) or 'none'}. Target: at least three environments — "
        f"{'met' if len(rose) >= 3 else '**not met**'}. "
        f"Success fell with an interval excluding zero in: {', '.join(fell) or 'none'}. With "
        f"{tasks} tasks per cell (≤ {3 * tasks} per environment) an interval excludes zero only "
        "when nearly every task flips one way, so most intervals include zero whatever the "
        "true effect.",
        "- Decoding recorded in each run's manifest (`extra[\"decoding\"]`): "
        + ", ".join(sorted({f"{m}: {r['decoding_recorded'][m]}" for r in s["rows"] for m in MODES})),
        "",
    ]
    why = [(r, k, v) for r in ok for k, v in sorted(r["why"].items(), key=lambda kv: -kv[1])]
    lines += ["## Why constrained replies were still invalid", "",
              "The agent's feedback on each invalid constrained reply (its first 80 characters), per cell:",
              "", "| env | args | feedback | replies |", "|---|---|---|---|",
              *(f"| {r['env']} | {r['args']} | {k.replace('|', '¦')} | {v} |" for r, k, v in why),
              *([] if why else ["| — | — | none | 0 |"]), ""]
    lines += grammar_section(costs, meta.get("costs_end"))
    lines += [
        "## Machine",
        "",
        *(f"- {k}: {v}" for k, v in machine().items()),
        f"- load average (1 min), start → end: {meta['load_start']:.2f} → "
        + (f"{meta['load_end']:.2f}" if final else "(still running)")
        + " on 2 cores shared with other work (above 2 means others competed with this run)",
        f"- code: commit {meta['git_start']} at the start"
        + (f", {meta['git_end']} at the end" if final else "")
        + "; each cell's CLI runs the working tree as it is when the cell starts; files under src/ "
        f"with uncommitted changes at the start: {meta['src_dirty_start'] or 'none'}"
        + (f"; at the end: {meta['src_dirty_end'] or 'none'}" if final else ""),
        "",
        *([notes.rstrip(), ""] if notes else []),
    ]
    raw = {"argv": argv, "tasks": tasks, "meta": meta, "final": final, "costs": costs,
           "cells": [{"env": r["env"], "args": r["args"], "free": r["free"],
                      "constrained": r["constrained"], "reduction": r["reduction"],
                      "decoding_recorded": r["decoding_recorded"], "ok": r["ok"],
                      "constrained_invalid_feedback": r["why"],
                      "paired": r["cmp"].model_dump() if r["cmp"] else None} for r in s["rows"]],
           "envs": {e: {**{k: v for k, v in d.items() if k != "cmp"},
                        "paired": d["cmp"].model_dump() if d["cmp"] else None}
                    for e, d in s["envs"].items()}}
    return "\n".join(lines), raw


def git_state() -> tuple[str, str]:
    """HEAD's short hash and the src/ files with uncommitted changes (comma-separated)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True).stdout

    dirty = [ln[3:] for ln in git("status", "--short", "--", "src").splitlines() if ln.strip()]
    return git("rev-parse", "--short", "HEAD").strip(), ", ".join(dirty)


def grammar_section(costs: dict[str, Any] | None, end: dict[str, Any] | None = None) -> list[str]:
    if not costs:
        return ["## Grammar costs", "", "(not measured in this run)", ""]
    lines = ["## Grammar costs (same run, before and after the episodes)", "",
             "`compile_grammar` on each environment's action schema (as built at the first step of "
             "its first test task, default arguments), median of the repetitions, in ms:", "",
             "| env | when | schema chars | GBNF chars | median ms | all ms |", "|---|---|---|---|---|---|"]
    for when, c in (("before", costs), ("after", end)):
        for r in (c or {}).get("compile", []):
            if "error" in r:
                lines.append(f"| {r['env']} | {when} | — | — | — | {r['error'][:300]} |")
            else:
                times = ", ".join(f"{x:.3f}" for x in r["times_ms"])
                lines.append(f"| {r['env']} | {when} | {r['schema_chars']:,} | {r['gbnf_chars']:,} | "
                             f"{r['median_ms']:.3f} | {times} |")
    lines += ["", f"Sampling: {costs['prompts']} prompts × {costs['tokens']} tokens, temperature 0.7, "
              "seeded, 1 thread, end-of-sequence banned; constrained = a required string of ≥ 4,000 "
              "characters. ms/token = (call wall time − llama.cpp's prompt-eval time) / tokens. "
              "Measured before the episodes and again after them (same code, same prompts).", "",
              "| when | load | mode | tokens | ms / token (per prompt) | ms / token (all) | "
              "constrained / free |", "|---|---|---|---|---|---|---|"]
    for when, c in (("before", costs), ("after", end)):
        if not c:
            continue
        for m in ("free", "constrained"):
            rows = c["generation"][m]
            each = ", ".join(f"{r['ms_per_token']:.1f}" for r in rows)
            ratio = f"**{c['ratio']:.2f}×** ({c['ratio'] - 1:+.0%})" if m == "constrained" else ""
            lines.append(f"| {when} | {c['load']:.1f} | {m} | {sum(r['tokens'] for r in rows)} | "
                         f"{each} | {c['ms_per_token'][m]:.2f} | {ratio} |")
    worst = max(c["ratio"] for c in (costs, end) if c)
    lines += ["", f"Target ≤ +15% per token: {'met' if worst <= 1.15 else '**not met**'}.", ""]
    return lines


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=3, help="test tasks per cell (default 3)")
    p.add_argument("--envs", default="", help="comma-separated subset of envs (default: all)")
    p.add_argument("--difficulties", default="",
                   help="comma-separated subset of difficulties (default: all; 'none' = cells "
                        "without presets)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per CLI run (default 900)")
    p.add_argument("--parallel", type=int, default=2, help="CLI runs at a time (default 2)")
    p.add_argument("--store-dir", type=Path, default=Path("/tmp/sharpen-constrained-decoding"),
                   help="stores, logs and the resume cache (default /tmp/sharpen-constrained-decoding)")
    p.add_argument("--compile-reps", type=int, default=5)
    p.add_argument("--gen-prompts", type=int, default=3)
    p.add_argument("--gen-tokens", type=int, default=150)
    p.add_argument("--skip-costs", action="store_true", help="do not measure the grammar costs")
    p.add_argument("--report-only", action="store_true",
                   help="write the page from the cached cells and run nothing")
    p.add_argument("--notes", type=Path, default=None, help="markdown appended to the page")
    p.add_argument("--out", type=Path, default=RESULTS / "constrained_decoding.md")
    a = p.parse_args(argv)
    root: Path = a.store_dir
    for m in MODES:
        (root / m).mkdir(parents=True, exist_ok=True)
        (root / m / "agent.yaml").write_text(yaml.safe_dump(spec(m), sort_keys=False))
    meta_file = root / "meta.json"  # the first start's, kept across resumes
    if meta_file.exists():
        meta = json.loads(meta_file.read_text())
    else:
        head, dirty = git_state()
        meta = {"argv": argv, "started": datetime.now(UTC).isoformat(), "load_start": os.getloadavg()[0],
                "git_start": head, "src_dirty_start": dirty}
        meta_file.write_text(json.dumps(meta, indent=1))
    load0 = os.getloadavg()[0]
    notes = a.notes.read_text() if a.notes else ""
    cells = plan([e for e in a.envs.split(",") if e] or None)
    if a.difficulties:
        want = set(a.difficulties.split(","))
        cells = [c for c in cells if str(c.args.get("difficulty", "none")) in want]
    print(f"{len(cells)} cells, stores, logs and cache in {root}; load {load0:.2f}", flush=True)

    costs: dict[str, Any] | None = None
    costs_file = root / "grammar_costs.json"
    if costs_file.exists():
        costs = json.loads(costs_file.read_text())
    elif not a.skip_costs and not a.report_only:
        envs = list(dict.fromkeys(c.env for c in cells if not c.skipped))
        costs = grammar_costs(envs, a.compile_reps, a.gen_prompts, a.gen_tokens)
        costs_file.write_text(json.dumps(costs, indent=1))
        print(f"grammar costs: {costs['ms_per_token']} ratio {costs['ratio']:.2f}", flush=True)

    recs: dict[tuple[str, str], dict[str, Any]] = {}
    lock = threading.Lock()

    def write(final: bool) -> None:
        # The end state is the run's: recorded when it finishes, kept for --report-only.
        if final and not (a.report_only and "git_end" in meta):
            meta["load_end"] = os.getloadavg()[0]
            meta["git_end"], meta["src_dirty_end"] = git_state()
            meta_file.write_text(json.dumps({k: v for k, v in meta.items() if k != "costs_end"},
                                            indent=1))
        page, raw = report(cells, recs, costs, argv, a.tasks, meta, final, notes)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(page)
        a.out.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=str))

    def job(cell: Cell, mode: str) -> None:
        rec = run_one(cell, mode, a.tasks, root, a.timeout)
        c = rec["cell"]
        with lock:
            recs[(label(cell), mode)] = rec
            print(f"{datetime.now(UTC):%H:%M:%S} {label(cell)} {mode}: invalid {c['invalid_actions']}"
                  f"/{c['n_trajectories']} success {c['n_success']}/{c['n_counted']} "
                  f"{c['wall_s']:.0f} s exit {c['exit_code']} load {os.getloadavg()[0]:.1f}",
                  flush=True)
            write(final=False)

    order = sorted((c for c in cells if not c.skipped), key=priority)
    if (root / "grammar_costs_end.json").exists():
        meta["costs_end"] = json.loads((root / "grammar_costs_end.json").read_text())
    if a.report_only:
        for c in order:
            for m in MODES:
                cache = root / "cells" / f"{label(c)}.{m}.json"
                if cache.exists() and json.loads(cache.read_text())["tasks"] == a.tasks:
                    recs[(label(c), m)] = json.loads(cache.read_text())
        done = len(recs) == 2 * len(order)
        write(final=done)
        print(f"{len(recs)} of {2 * len(order)} runs cached; written to {a.out}")
        return 0
    with ThreadPoolExecutor(max_workers=a.parallel) as pool:
        futures = [pool.submit(job, c, m) for c in order for m in MODES]
        for fut in futures:
            fut.result()
    end_file = root / "grammar_costs_end.json"  # the sampling costs again, after the episodes
    if end_file.exists():
        meta["costs_end"] = json.loads(end_file.read_text())
    elif costs is not None and not a.skip_costs:
        envs = list(dict.fromkeys(c.env for c in cells if not c.skipped))
        meta["costs_end"] = grammar_costs(envs, a.compile_reps, a.gen_prompts, a.gen_tokens)
        end_file.write_text(json.dumps(meta["costs_end"], indent=1))
    write(final=True)
    print(a.out.read_text())
    print(f"written to {a.out} and {a.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
