"""Outcomes and feedback as Phoenix span annotations (``sharpen export --format otlp
--phoenix-annotations``).

Phoenix does not read ``gen_ai.evaluation.result`` events as scores, so these are also posted
to its REST API (``POST /v1/span_annotations``), one annotation per event on the episode's
span: its name, score, label and explanation; annotator ``CODE`` for the outcome and the
verifier, ``LLM`` for a judge, ``HUMAN`` for a person. Phoenix keeps one annotation per
(span, name, identifier); the identifier is ``outcome`` for the outcome and
``sharpen:SOURCE:AUTHOR`` for a feedback record, so a later record of the same name by the
same author (a second submission's test results, an edit) replaces the earlier one, and
exporting again updates rather than copies. Phoenix queues them until their spans arrive.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx

from sharpen.core.errors import UserError
from sharpen.interop.otel_spans import EVALUATION_EVENT, SpanRecord

_KINDS = {"human": "HUMAN", "judge": "LLM"}


def annotations_of(records: Iterable[SpanRecord]) -> list[dict[str, Any]]:
    """The Phoenix span annotations of the evaluation events in ``records``."""
    out = []
    for r in records:
        for e in r.events:
            if e.name != EVALUATION_EVENT:
                continue
            a = e.attributes
            source = str(a.get("sharpen.feedback.source", "verifier"))
            result = {k: v for k, v in {
                "score": a.get("gen_ai.evaluation.score.value"),
                "label": a.get("gen_ai.evaluation.score.label"),
                "explanation": a.get("gen_ai.evaluation.explanation")}.items() if v is not None}
            ident = "outcome"
            if "sharpen.feedback.record" in a:
                ident = f"sharpen:{source}:{a.get('sharpen.feedback.author', '')}"
            out.append({"span_id": f"{r.span_id:016x}", "name": str(a["gen_ai.evaluation.name"]),
                        "annotator_kind": _KINDS.get(source, "CODE"), "result": result,
                        "identifier": ident, "metadata": {"source": source}})
    return out


def post_annotations(endpoint: str, annotations: list[dict[str, Any]], *,
                     headers: dict[str, str] | None = None, timeout: float = 30.0) -> int:
    """Post ``annotations`` to the Phoenix at ``endpoint`` (its base URL) in batches of 500;
    how many were accepted."""
    base = endpoint.rstrip("/").removesuffix("/v1/traces")
    with httpx.Client(timeout=timeout, headers=headers) as client:
        for i in range(0, len(annotations), 500):
            try:
                res = client.post(f"{base}/v1/span_annotations",
                                  json={"data": annotations[i:i + 500]})
            except httpx.HTTPError as exc:
                raise UserError(f"cannot post annotations to Phoenix at {base}: {exc}",
                                "check --endpoint, or drop --phoenix-annotations") from exc
            if res.status_code >= 400:
                raise UserError(f"Phoenix at {base} refused the annotations ({res.status_code}: "
                                f"{res.text[:200]})", "drop --phoenix-annotations for a "
                                "receiver that is not Phoenix")
    return len(annotations)
