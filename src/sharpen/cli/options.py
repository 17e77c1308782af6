"""Shared CLI options and parsing helpers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
import yaml

from sharpen.core.agent_spec import AgentSpec, Decoding
from sharpen.core.errors import UserError
from sharpen.core.registry import REGISTRY, PluginRef
from sharpen.models.base import MODEL

if TYPE_CHECKING:
    from sharpen.store import RunRecord

StoreOpt = Annotated[
    str | None,
    typer.Option("--store", envvar="SHARPEN_STORE",
                 help="SQLAlchemy URL of the store (default: sqlite:///.sharpen/sharpen.db)."),
]

ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", help="Model backend: local (embedded SmolLM2), openai, replay, or any "
    "registered name or module:Name / file.py:Name (`sharpen plugins model` lists them).")]
BaseUrlOpt = Annotated[str | None, typer.Option(
    help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (implies --model openai).")]
ModelNameOpt = Annotated[str | None, typer.Option(help="Model name sent to the OpenAI-compatible server.")]
ModelArgOpt = Annotated[list[str] | None, typer.Option(
    "--model-arg", help="Extra model args, KEY=VALUE (repeatable).")]
DecodingOpt = Annotated[str | None, typer.Option(
    help="How replies are decoded: auto, free or constrained (default: the agent spec's; "
         "see docs/agent-spec.md).")]
EnvArgOpt = Annotated[list[str] | None, typer.Option(
    "--env-arg", "-E", help="Environment args, KEY=VALUE (e.g. max_submissions=2).")]
CurvePlotOpt = Annotated[Path | None, typer.Option(
    "--plot", help="Write the anytime curve here: a folder (anytime.png and .svg) or a .png/.svg "
    "file (and its sibling in the other format). Needs matplotlib.")]
JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print JSON instead of tables: stdout holds only the JSON (its keys: "
    "docs/running.md, Machine-readable output).")]
WideOpt = Annotated[bool, typer.Option(
    "--wide", help="Print tables at their full width: every cell on one line, ids whole.")]


def above_zero(value: float | None) -> float | None:
    """Option callback: ``value`` unless it is 0 or less (``min=`` cannot exclude 0 itself);
    the message has the form of ``min=``'s: ``Invalid value for '--budget-usd': ...``."""
    if value is not None and not value > 0:
        raise typer.BadParameter(f"Input should be greater than 0, got {value:g}")
    return value


def parse_kv(pairs: list[str] | None, flag: str) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}``; values are read as YAML scalars."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"{flag} {pair!r} is not KEY=VALUE", f"write it as {flag} key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def run_json(r: RunRecord) -> dict[str, Any]:
    """A stored run as ``--json`` prints it: the record (``model_dump(mode="json")``) with its
    full ``id`` first."""
    return {"id": r.id, **r.model_dump(mode="json")}


def open_store(url: str | None):
    """The store at ``url``, else ``$SHARPEN_STORE``, else the default (see
    :func:`sharpen.store.open.open_store`, which the Python API uses too)."""
    from sharpen.store.open import open_store as open_named

    return open_named(url)


def model_ref(spec: AgentSpec, model: str | None, base_url: str | None, model_name: str | None,
              model_args: dict) -> PluginRef:
    """The spec's model ref, overridden by the CLI's model flags (``--base-url`` alone implies
    ``openai``); an unknown model name fails with suggestions."""
    if model is None and base_url is None and model_name is None and not model_args:
        return spec.model
    name = model or ("openai" if base_url else spec.model.name)
    args = dict(spec.model.args) if name == spec.model.name else {}
    if base_url is not None:
        args["base_url"] = base_url
    if model_name is not None:
        args["model"] = model_name
    args.update(model_args)
    REGISTRY.get(MODEL, name)  # unknown names fail here, with suggestions
    return PluginRef(name=name, args=args)


def with_decoding(spec: AgentSpec, decoding: str | None) -> AgentSpec:
    """``spec`` with ``--decoding`` applied (unchanged when the option was not given)."""
    if decoding is None:
        return spec
    if decoding not in get_args(Decoding):
        raise UserError(f"--decoding {decoding!r} is not a decoding mode",
                        f"use one of: {', '.join(get_args(Decoding))}")
    return spec.model_copy(update={"decoding": decoding})
