"""Regenerate sharpen's vendored price table from a LiteLLM wheel.

LiteLLM keeps the maintained map of model prices (``model_prices_and_context_window_backup.json``
inside its wheel). sharpen vendors a pinned, trimmed copy instead of depending on litellm:
chat models that have both an input and an output price per token, grouped by LiteLLM's
provider, as USD per one million tokens (the unit of ``sharpen/data/prices.yaml``)::

    pip download --no-deps litellm==1.110.2 -d /tmp/litellm
    python scripts/update_prices.py /tmp/litellm/litellm-1.110.2-*.whl

writes ``src/sharpen/data/prices_litellm.json``; then update the version and date in
``src/sharpen/data/README.md`` and docs/models.md, and run ``pytest tests/test_models.py``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Any

MAP = "litellm/model_prices_and_context_window_backup.json"
OUT = Path(__file__).resolve().parent.parent / "src" / "sharpen" / "data" / "prices_litellm.json"


def _per_million(per_token: float) -> float:
    # 2.5e-06 * 1e6 is 2.4999999999999996 in floats; 9 significant digits are exact enough.
    return float(f"{per_token * 1_000_000:.9g}")


def convert(cost_map: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """``{provider: {model: [input, output]}}`` (USD per 1M tokens) for LiteLLM's priced chat
    models; sorted, so a regeneration diffs cleanly."""
    by_provider: dict[str, dict[str, list[float]]] = {}
    for name, entry in cost_map.items():
        if name == "sample_spec" or not isinstance(entry, dict) or entry.get("mode") != "chat":
            continue
        inp, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if not isinstance(inp, int | float) or not isinstance(out, int | float):
            continue
        provider = str(entry.get("litellm_provider") or "")
        by_provider.setdefault(provider, {})[name] = [_per_million(inp), _per_million(out)]
    return {p: dict(sorted(models.items())) for p, models in sorted(by_provider.items())}


def _dumps(table: dict[str, Any]) -> str:
    """JSON with one model per line, so an update reads as a diff of prices."""
    lines = ['{"_source": ' + json.dumps(table["_source"], indent=1) + ",", '"providers": {']
    providers = list(table["providers"].items())
    for i, (provider, models) in enumerate(providers):
        lines.append(f"{json.dumps(provider)}: {{")
        rows = [f"  {json.dumps(name)}: {json.dumps(price)}" for name, price in models.items()]
        lines.append(",\n".join(rows))
        lines.append("}" + ("," if i < len(providers) - 1 else ""))
    lines.append("}}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", type=Path, help="a litellm-VERSION-*.whl from PyPI")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    match = re.match(r"litellm-([^-]+)-", args.wheel.name)
    if match is None:
        parser.error(f"{args.wheel.name} is not a litellm wheel (litellm-VERSION-....whl)")
    with zipfile.ZipFile(args.wheel) as wheel:
        raw = wheel.read(MAP)
    providers = convert(json.loads(raw))
    table = {
        "_source": {
            "from": f"litellm {match.group(1)} (PyPI wheel), {MAP}",
            "map_sha256": hashlib.sha256(raw).hexdigest(),
            "retrieved": datetime.date.today().isoformat(),
            "license": "MIT (LiteLLM)",
            "unit": "USD per 1M tokens: [input, output]",
            "regenerate": "python scripts/update_prices.py litellm-VERSION-*.whl",
        },
        "providers": providers,
    }
    args.out.write_text(_dumps(table), encoding="utf-8")
    n = sum(len(m) for m in providers.values())
    print(f"{args.out}: {n} chat models from {len(providers)} providers, "
          f"{args.out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
