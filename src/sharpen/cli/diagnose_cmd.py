"""``sharpen diagnose RUN``: run detectors over a stored run, store their findings as feedback
on the steps they are about, and print the top failure modes with counts and intervals — or
the same as JSON (``--json``). What each detector looks for: docs/diagnose.md.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sharpen.cli.diagnose_stages import render_stages
from sharpen.cli.options import JsonOpt, StoreOpt, open_store
from sharpen.cli.tables import fit
from sharpen.diagnose.changes import Changes
from sharpen.diagnose.decisive import DecisiveSteps
from sharpen.diagnose.run import Diagnosis, Share
from sharpen.diagnose.taxonomy import Choice, Taxonomy
from sharpen.stats.rounding import interval_text, p_cell


def share_text(s: Share) -> str:
    """``3 of 40 (7.5%) [2.6, 19.9]``; ``—`` when there is nothing to count."""
    if not s.n:
        return "—"
    rate = s.rate or 0.0
    return f"{s.count} of {s.n} ({100 * rate:.1f}%) {interval_text(s.ci.low, s.ci.high)}"


def render(d: Diagnosis, console: Console) -> None:
    """Print ``d`` as a table of failure modes, most common among failed attempts first."""
    console.print(
        f"[bold]sharpen diagnose[/] run {d.run_id} · {d.trajectories} trajectories "
        f"({d.failed} failed, {d.solved} solved, {d.errored} errored) · {d.stored} new finding "
        "records stored", highlight=False)
    table = Table(title="Failure modes: trajectories with a finding, 95% Wilson CI (points)",
                  title_justify="left")
    for col in ("detector", "failed", "solved", "findings", "example"):
        table.add_column(col)
    for s in d.detectors:
        more = f" (+{len(s.examples) - 1})" if len(s.examples) > 1 else ""
        table.add_row(s.detector.name + (f" {s.detector.args}" if s.detector.args else ""),
                      share_text(s.failed), share_text(s.solved), str(s.findings),
                      (s.examples[0] + more) if s.examples else "—")
    console.print(fit(table, console))
    if d.stages is not None:
        render_stages(d.stages, console)
    if d.taxonomy is not None:
        render_taxonomy(d.taxonomy, console)
    if d.decisive is not None:
        render_decisive(d.decisive, console)


def render_decisive(dec: DecisiveSteps, console: Console) -> None:
    """Print the decisive-step histogram ``sharpen attribute`` left."""
    steps = " · ".join(f"step {k}: {n}" for k, n in dec.by_step.items())
    stages = " · ".join(f"{k}: {n}" for k, n in dec.by_stage.items())
    n = dec.trajectories
    console.print(f"Decisive steps (from `sharpen attribute`): {n} "
                  f"trajector{'ies' if n != 1 else 'y'}"
                  f"\n  by step: {steps}" + (f"\n  by stage: {stages}" if stages else ""),
                  highlight=False)


def render_changes(c: Changes, console: Console) -> None:
    """Print what changed from run A to run B, detector by detector."""
    table = Table(title=f"From {c.a_run[:12]} (A) to {c.b_run[:12]} (B) on {c.shared_tasks} "
                  f"shared tasks ({c.only_a} only in A, {c.only_b} only in B): tasks whose failure "
                  "mode B fixed or introduced; sign test of fixed against introduced",
                  title_justify="left")
    for col in ("detector", "A: attempts", "B: attempts", "fixed", "introduced", "kept", "p"):
        table.add_column(col)
    for r in c.detectors:
        table.add_row(r.detector, share_text(r.a), share_text(r.b), str(r.fixed),
                      str(r.introduced), str(r.kept), "—" if r.p_value is None else p_cell(r.p_value))
    console.print(fit(table, console))


def render_taxonomy(t: Taxonomy, console: Console) -> None:
    """Print the failure taxonomy: one row per group, most common first."""
    named = f", named by {t.named_with}" if t.named_with else ""
    title = (f"Failure taxonomy ({t.method}{named}): {_n(t.failures, 'failed attempt')}, "
             f"{_n(t.distinct, 'distinct signature')}, {_n(len(t.groups), 'group')}; each "
             "group's share of the failures, 95% Wilson CI (points)")
    console.print(f"{title}\n  {t.rule}", highlight=False)
    if not t.groups:
        return
    table = Table(title_justify="left")
    for col in ("group", "failures", "detectors", "example"):
        table.add_column(col)
    for g in t.groups:
        more = f" (+{len(g.examples) - 1})" if len(g.examples) > 1 else ""
        dets = ", ".join(f"{d} {c}" for d, c in g.detectors.items()) or "—"
        table.add_row(g.name, share_text(Share(count=g.count, n=t.failures, rate=g.rate, ci=g.ci)),
                      dets, (g.examples[0] + more) if g.examples else "—")
    console.print(fit(table, console))


def _named(t: Taxonomy, model: str, args: list[str] | None) -> Taxonomy:
    """``t`` with its groups named by ``model`` (``--name-with``)."""
    from sharpen.cli.options import model_ref, parse_kv
    from sharpen.core.agent_spec import AgentSpec
    from sharpen.diagnose.taxonomy_names import name_groups
    from sharpen.judges.runner import build_judge_model
    from sharpen.runner.signals import run_sync

    chat = build_judge_model(model_ref(AgentSpec(name="diagnose"), model, None, None,
                                       parse_kv(args, "--name-arg")))

    async def go() -> Taxonomy:
        try:
            return await name_groups(t, chat)
        finally:
            await chat.aclose()

    return run_sync(go())


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def diagnose(
    run: Annotated[str, typer.Argument(help="Run id, a unique prefix, or 'latest'.")],
    detector: Annotated[list[str] | None, typer.Option(
        "--detector", "-d", help="A detector to run (repeatable; default: every built-in). "
        "`sharpen plugins detector` lists them.")] = None,
    taxonomy: Annotated[Choice, typer.Option(
        "--taxonomy", help="Group the failed attempts by signature: TF-IDF (default), "
        "sentence embeddings (the diagnose extra), or none.")] = "tfidf",
    name_with: Annotated[str | None, typer.Option(
        "--name-with", help="A model that names the taxonomy's groups (e.g. local); without "
        "it, groups are named by their detectors and top terms.")] = None,
    name_arg: Annotated[list[str] | None, typer.Option(
        "--name-arg", help="KEY=VALUE for the --name-with model (repeatable).")] = None,
    against: Annotated[str | None, typer.Option(
        "--against", help="A second run (id, prefix or 'latest'), diagnosed too: what changed "
        "from RUN to it, per detector — tasks fixed, introduced, kept.")] = None,
    json_out: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Find failure modes in a stored run: loops, stalls, invalid-action bursts, ignored errors,
    limit hits, context overflow and reward-hacking signatures, stored as feedback on their
    steps, with counts and intervals; stage metrics, a failure taxonomy, the decisive steps
    `sharpen attribute` found, and with --against what changed between two runs."""
    from sharpen.diagnose.run import diagnose_run

    st = open_store(store)
    rid = st.resolve_run(run)
    result = diagnose_run(st, rid, detector or None, taxonomy=taxonomy)
    if name_with is not None and result.taxonomy is not None:
        result.taxonomy = _named(result.taxonomy, name_with, name_arg)
    if against is None:
        if json_out:
            print(result.model_dump_json(indent=2))
        else:
            render(result, Console())
        return
    from sharpen.diagnose.changes import changes

    other = diagnose_run(st, st.resolve_run(against), detector or None, taxonomy=taxonomy)
    changed = changes(st, result, other)
    if json_out:
        print(json.dumps({"a": result.model_dump(mode="json"), "b": other.model_dump(mode="json"),
                          "changes": changed.model_dump(mode="json")}, indent=2))
        return
    console = Console()
    render(result, console)
    render(other, console)
    render_changes(changed, console)
