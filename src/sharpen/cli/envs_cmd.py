"""``sharpen envs [NAME]``: one line per environment, or one environment's arguments, knobs,
presets and tools, as text or JSON (docs/running.md describes the JSON)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sharpen.cli.options import EnvArgOpt, parse_kv
from sharpen.core.registry import REGISTRY
from sharpen.envs.base import ENV, Knob
from sharpen.envs.schema import EnvSchema, env_schema

SPLIT_ORDER = ("train", "val", "test")


def envs(
    name: Annotated[str | None, typer.Argument(
        help="An environment: show its arguments, knobs, presets and tools.")] = None,
    env_arg: EnvArgOpt = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print JSON: a list of environments, or one environment's schema.")] = False,
) -> None:
    """List environments (one line each), or one environment's arguments, knobs, presets and
    tools."""
    args = parse_kv(env_arg, "--env-arg")
    if name is not None:
        schema = env_schema(REGISTRY, name, args)
        if json_out:
            print(schema.model_dump_json(indent=2))
        else:
            _print_schema(Console(highlight=False), schema)
        return
    schemas = [env_schema(REGISTRY, n) for n in REGISTRY.names(ENV)]
    if json_out:
        print(json.dumps([s.model_dump(mode="json") for s in schemas], indent=2))
        return
    console = Console(highlight=False)
    rows = [("env", "train/val/test", "description")]
    rows += [(s.name, _counts(s.task_counts), s.description) for s in schemas]
    name_w = max(len(r[0]) for r in rows)
    count_w = max(len(r[1]) for r in rows)
    for i, (env, counts, text) in enumerate(rows):
        line = Text(f"{env:<{name_w}}  {counts:<{count_w}}  ", style="bold" if i == 0 else "")
        room = max(console.width - len(line), 10)
        line.append(text if len(text) <= room else text[:room - 1].rstrip() + "…")
        console.print(line, no_wrap=True, overflow="ignore")
    console.print("Details: sharpen envs NAME (arguments, knobs, presets, tools; --json).")


def _counts(counts: dict[str, int]) -> str:
    """``64/36/64`` (train/val/test) or ``N`` for one split, ``—`` for none."""
    ordered = [counts[s] for s in SPLIT_ORDER if s in counts]
    ordered += [v for k, v in counts.items() if k not in SPLIT_ORDER]
    return "/".join(str(v) for v in ordered) if ordered else "—"


def _print_schema(console: Console, s: EnvSchema) -> None:
    """The schema as sections of plain text (every cell a ``Text``, so Rich reads no markup:
    ``dict[str, Any]`` and ``'sharpen[gym]'`` stay as written)."""
    console.print(Text(s.name, style="bold"))
    console.print(Text(s.description))
    if s.task_counts:
        console.print(Text("tasks: " + ", ".join(f"{k} {v}" for k, v in s.task_counts.items())))
    console.print(Text("presets (difficulty=): " + (", ".join(s.difficulties) or "—")))
    console.print(Text("tools: " + (", ".join(s.tools) or "—")))
    if s.stages:
        kinds: dict[str, list[str]] = {}
        for kind, stage in s.stages.items():
            kinds.setdefault(stage, []).append(kind)
        console.print(Text("stages: " + " → ".join(f"{stage} ({', '.join(k)})"
                                                   for stage, k in kinds.items())))
    if s.perturbations:
        console.print(Text("perturbations (--perturb): " + "; ".join(
            f"{name} — {what}" for name, what in s.perturbations.items())))
    args = Table(title="arguments (-E name=value)", title_justify="left", box=None,
                 header_style="bold", pad_edge=False)
    for col in ("name", "type", "default", "help"):
        args.add_column(col, overflow="fold", ratio=1 if col == "help" else None)
    for a in s.arguments:
        args.add_row(Text(a.name), Text(a.type),
                     Text("(required)") if a.required else _show(a.default), Text(a.help))
    console.print(args)
    if not s.knobs:
        return
    via = f" or {s.knobs_argument}={{name: value}}" if s.knobs_argument else ""
    knobs = Table(title=f"knobs (-E name=value{via})", title_justify="left", box=None,
                  header_style="bold", pad_edge=False)
    for col in ("name", "type", "default", "range", "help"):
        knobs.add_column(col, overflow="fold", ratio=1 if col == "help" else None)
    for k in s.knobs:
        knobs.add_row(Text(k.name), Text(k.type), _show(k.default), Text(_range(k)), Text(k.help))
    console.print(knobs)


def _range(k: Knob) -> str:
    """``1..4``, ``a | b | c`` or ``—``."""
    if k.choices is not None:
        shown = " | ".join(str(c) for c in k.choices[:8])
        return shown + (f" | … ({len(k.choices)} in all)" if len(k.choices) > 8 else "")
    if k.low is not None or k.high is not None:
        return f"{_num(k.low)}..{_num(k.high)}"
    return "—"


def _num(x: float | None) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else str(x))


def _show(value: Any) -> Text:
    """A default as YAML would take it back on ``-E`` (``null``, ``true``, ``'text'``)."""
    return Text(json.dumps(value) if not isinstance(value, str) else repr(value))
