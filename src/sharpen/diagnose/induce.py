"""Metrics induced from free-text human feedback (AutoLibra, arXiv 2505.02820):
``sharpen induce RUN`` (docs/diagnose.md, Induced metrics).

1. **Notes.** A person's free-text comments on a run's trajectories: the human feedback the
   viewer stores (``Feedback(source="human")`` with a comment; an edit replaces the record it
   supersedes), or a JSONL file of ``{"trajectory_id", "text"[, "step"]}`` lines.
2. **Grounding.** A model splits each note into *aspects* — ``behaviour`` (what the agent did,
   citing its step), ``feedback`` (what the person said about it) and ``sign`` (liked or not)
   — through the judges' structured ask (a JSON Schema the reply is validated against; a
   constraining backend can give nothing else). A note the model cannot ground is counted,
   with the reason, and gives no aspect.
3. **Clustering.** Aspects are clustered over TF-IDF of behaviour and feedback (k-means; the
   number of clusters by silhouette unless given), and the model names each cluster as a
   metric — a snake_case name and a one-sentence definition (the cluster's top terms when its
   reply is unusable). A metric's good and bad examples are its positive and negative aspects.
4. **Evaluation.** The metrics, written as a rubric (scale ``-1-1``: 1 done well, -1 done
   badly, 0 does not apply), are judged by the ``rubric`` judge on every annotated trajectory;
   :mod:`sharpen.diagnose.metaeval` turns the ratings into coverage and redundancy (their
   definitions are there).

The rubric is what ``sharpen judge RUN --judge rubric.yaml`` reads. Nothing is stored: the
metrics are a file, the rest the :class:`Induction` report (``--json``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sharpen.core.errors import UserError
from sharpen.core.trajectory import Trajectory
from sharpen.diagnose.metaeval import Aspect, MetaEval, Trait, judge_traits, meta_evaluate
from sharpen.judges.ask import ask
from sharpen.judges.base import JudgeError
from sharpen.judges.rubric import Criterion, Example, Rubric
from sharpen.judges.transcript import cited_steps, render
from sharpen.models.base import ChatModel
from sharpen.store import Store

SYSTEM = ("You are an expert analyst of AI agents' work. You read a transcript of what an "
          "agent did and the feedback a person wrote on it, and you answer exactly as asked.")

GROUND_PROMPT = """{cut}Transcript:
{transcript}

A person wrote this feedback on the agent's work{where}:
"{note}"

Split the feedback into its separate points (1 to {most}). For each point give \
"behaviour": what the agent did that the point is about, citing its step such as [S0]; \
"feedback": what the person said about it; "sign": "+" if the person liked it, "-" if not.
Reply with a JSON object {{"aspects": [...]}}."""

NAME_PROMPT = """People commented on these behaviours of AI agents:
{aspects}

Name one evaluation metric that covers all of them: a short generic snake_case name (no \
names of people, orders or products) and a one-sentence definition of what it checks.
Reply with a JSON object {{"name": ..., "definition": ...}}."""

SCALE_NOTE = ("Rate 1 if the agent did this well, -1 if it did it badly, 0 if it does not "
              "apply to this transcript.")
TEXT_CHARS = 200
"""Longest behaviour or feedback text an aspect keeps (and the model may write)."""


class Note(BaseModel):
    """One free-text comment on a trajectory."""

    trajectory_id: str
    text: str
    step: int | None = None
    """The step it was written on (a step or span annotation), if any."""
    source: str = ""
    """Where it came from: the feedback record's id, or ``FILE:LINE``."""


class Metric(BaseModel):
    """An induced metric: a cluster of aspects, named."""

    name: str
    definition: str
    good: list[str] = Field(default_factory=list)
    """Behaviours people liked (positive aspects), for the rubric's examples."""
    bad: list[str] = Field(default_factory=list)
    """Behaviours people did not like (negative aspects)."""
    aspects: list[int] = Field(default_factory=list)
    """Indexes of its aspects (in :attr:`Induction.aspects`)."""
    terms: list[str] = Field(default_factory=list)
    """The cluster's top TF-IDF terms."""
    named_by: str = "model"
    """``model``, or ``terms`` when the model's name was unusable."""


class Induction(BaseModel):
    """What :func:`induce` found: the notes, their aspects, the metrics, their ratings on the
    annotated trajectories, and coverage and redundancy."""

    run_id: str
    model: str
    notes: list[Note]
    grounding_errors: list[str]
    """One message per note that gave no aspect (its index first)."""
    aspects: list[Aspect]
    metrics: list[Metric]
    ratings: list[Trait]
    """Every (trajectory, metric) rating, 0 included; traits are the non-zero ones."""
    judge_errors: list[str]
    meta: MetaEval | None
    """``None`` when the metrics were not judged (``evaluate=False``) or there are none."""
    rubric: dict[str, Any] | None
    """The metrics as rubric data (what :func:`write_rubric` writes); ``None`` if none."""


class InduceConfig(BaseModel):
    """How :func:`induce` works (the CLI's flags)."""

    metrics: int | None = None
    """Number of metrics (clusters); ``None`` picks it by silhouette, 2 to ``max_metrics``."""
    max_metrics: int = 4
    """Most metrics when picking: the judge rates them all in one call, which must fit the
    embedded model's 2048-token context with the transcript and the reply."""
    max_aspects: int = 3
    """Most aspects the model may split one note into."""
    token_budget: int = 400
    """Transcript tokens the grounding and the judge see (the embedded model has 2048)."""
    examples: int = 1
    """Good and bad examples per metric in the rubric (each)."""
    evaluate: bool = True
    """Judge the metrics and compute coverage and redundancy."""
    seed: int = 0
    rubric_name: str = ""
    """The rubric's name (default ``induced-RUN``)."""


# -- notes ----------------------------------------------------------------------------------


def notes_from_store(store: Store, run_id: str) -> list[Note]:
    """The run's human comments: human feedback records with text, an edited record replaced
    by its edit — trajectories by task and epoch (not by when they ran, so that the same notes
    give the same prompts), each one's notes in the order written."""
    out: list[Note] = []
    runs = sorted(store.iter_trajectories(run_id, with_steps=False),
                  key=lambda t: (t.task.id, t.epoch, t.id))
    for t in runs:
        human = [fb for fb in t.feedback if fb.source == "human"]
        edited = {fb.supersedes for fb in human if fb.supersedes}
        out += [Note(trajectory_id=t.id, text=fb.rationale.strip(), source=fb.id,
                     step=fb.target.step_index)
                for fb in human if fb.id not in edited and fb.rationale.strip()]
    return out


def notes_from_file(path: str | Path, trajectory_ids: Sequence[str]) -> list[Note]:
    """Notes from a JSONL file of ``{"trajectory_id", "text"[, "step"]}`` (a unique prefix of
    an id will do); an unknown trajectory or a bad line is a :class:`UserError`."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"notes file {p} does not exist", "check the path")
    out: list[Note] = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            note = Note(trajectory_id=str(rec["trajectory_id"]), text=str(rec["text"]).strip(),
                        step=rec.get("step"), source=f"{p.name}:{n}")
        except (ValueError, KeyError, TypeError, ValidationError):
            raise UserError(f"notes file {p} line {n} is not a note",
                            'write one JSON object a line: {"trajectory_id": ..., "text": ...}'
                            ) from None
        match = [t for t in trajectory_ids if t.startswith(note.trajectory_id)]
        if len(match) != 1:
            raise UserError(f"notes file {p} line {n}: trajectory {note.trajectory_id!r} is "
                            + ("not in the run" if not match else "ambiguous"),
                            "use the ids `sharpen show RUN` or `sharpen export RUN` gives")
        if note.text:
            out.append(note.model_copy(update={"trajectory_id": match[0]}))
    return out


# -- grounding ------------------------------------------------------------------------------


def _ground_schema(most: int) -> dict[str, Any]:
    text = {"type": "string", "minLength": 3, "maxLength": TEXT_CHARS}
    item = {"type": "object", "properties": {"behaviour": text, "feedback": text,
                                             "sign": {"type": "string", "enum": ["+", "-"]}},
            "required": ["behaviour", "feedback", "sign"], "additionalProperties": False}
    return {"type": "object", "properties": {"aspects": {
        "type": "array", "minItems": 1, "maxItems": most, "items": item}},
        "required": ["aspects"], "additionalProperties": False}


async def ground(model: ChatModel, t: Trajectory, note: Note, index: int,
                 config: InduceConfig) -> list[Aspect]:
    """The aspects of ``note`` (the ``index``-th) on ``t``; :class:`JudgeError` when the model
    gives no valid reply."""
    text, cut = render(t, config.token_budget)
    where = f" at step [S{note.step}]" if note.step is not None else ""
    prompt = GROUND_PROMPT.format(cut="(The transcript was cut to fit.)\n" if cut else "",
                                  transcript=text, where=where, most=config.max_aspects,
                                  note=note.text[:1000])
    reply = await ask(model, SYSTEM, prompt, _ground_schema(config.max_aspects),
                      {"max_tokens": 120 * config.max_aspects})
    out = []
    for a in reply["aspects"]:
        steps = cited_steps(a["behaviour"], len(t.steps))
        out.append(Aspect(note=index, trajectory_id=t.id, behaviour=a["behaviour"].strip(),
                          feedback=a["feedback"].strip(), sign=1 if a["sign"] == "+" else -1,
                          step=steps[0] if steps else note.step))
    return out


# -- clustering -----------------------------------------------------------------------------


def cluster(aspects: Sequence[Aspect], k: int | None = None, max_k: int = 4,
            seed: int = 0) -> tuple[list[int], list[list[str]]]:
    """``(labels, terms)``: a cluster label per aspect (0..k-1, numbered by first appearance)
    and each cluster's top TF-IDF terms. k-means over TF-IDF of behaviour and feedback (step
    ids left out); ``k`` ``None`` picks the best silhouette for k in 2..``max_k``."""
    try:
        from sklearn.cluster import KMeans  # type: ignore[import-untyped]
        from sklearn.feature_extraction.text import (  # type: ignore[import-untyped]
            TfidfVectorizer,
        )
        from sklearn.metrics import silhouette_score  # type: ignore[import-untyped]
    except ImportError:  # a dev dependency, not a core one
        raise UserError("inducing metrics clusters with scikit-learn, which is not installed",
                        "pip install scikit-learn") from None

    texts = [re.sub(r"\[S\d+\]", " ", f"{a.behaviour} {a.feedback}") for a in aspects]
    if not texts:
        return [], []
    try:
        tfidf = TfidfVectorizer(stop_words="english", sublinear_tf=True, min_df=1)
        x = tfidf.fit_transform(texts)
    except ValueError:  # no word left (every text empty or stop words): one cluster
        return [0] * len(texts), [[]]
    dense = x.toarray()
    distinct = len({row.tobytes() for row in dense})
    if k is None:
        best: tuple[float, int] | None = None
        for n in range(2, min(max_k, distinct - 1) + 1):
            labels = KMeans(n, n_init=10, random_state=seed).fit_predict(x)
            score = float(silhouette_score(x, labels, metric="cosine"))
            if best is None or score > best[0] + 1e-9:
                best = (score, n)
        k = best[1] if best is not None else 1
    k = max(1, min(k, distinct))
    raw = KMeans(k, n_init=10, random_state=seed).fit_predict(x) if k > 1 else [0] * len(texts)
    order: dict[int, int] = {}
    labels = [order.setdefault(int(r), len(order)) for r in raw]
    vocab = tfidf.get_feature_names_out()
    terms = []
    for c in range(len(order)):
        weight = dense[[i for i, lab in enumerate(labels) if lab == c]].sum(axis=0)
        terms.append([str(vocab[j]) for j in weight.argsort()[::-1][:4] if weight[j] > 0])
    return labels, terms


_WORD = re.compile(r"[^a-z0-9]+")


def _slug(text: str) -> str:
    """``text`` as a criterion name (a letter first, then letters, digits and ``_``)."""
    s = _WORD.sub("_", text.lower()).strip("_")[:40].strip("_")
    return s if s[:1].isalpha() else f"m_{s}".rstrip("_")


async def name_metric(model: ChatModel, members: Sequence[Aspect],
                      terms: Sequence[str]) -> tuple[str, str, str]:
    """``(name, definition, named_by)`` of a cluster: the model's, or from its ``terms`` when
    the model gives no usable reply."""
    listed = "\n".join(f"- Behaviour: {a.behaviour[:150]} Feedback: {a.feedback[:150]} "
                       f"({'liked' if a.sign > 0 else 'disliked'})" for a in members[:8])
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z][a-z_]{2,39}$"},
        "definition": {"type": "string", "minLength": 10, "maxLength": 300}},
        "required": ["name", "definition"], "additionalProperties": False}
    try:
        reply = await ask(model, SYSTEM, NAME_PROMPT.format(aspects=listed), schema,
                          {"max_tokens": 160})
        name, definition = _slug(reply["name"]), reply["definition"].strip()
        if len(name) >= 3 and definition:
            return name, definition, "model"
    except JudgeError:
        pass
    words = list(terms[:3]) or ["metric"]
    return (_slug("_".join(words)), "How the agent does on: " + ", ".join(words) + ".",
            "terms")


# -- the rubric -----------------------------------------------------------------------------


def to_rubric(metrics: Sequence[Metric], name: str, description: str,
              examples: int = 1) -> Rubric:
    """The metrics as a rubric for the ``rubric`` judge: each a criterion on the scale
    ``-1-1`` with up to ``examples`` good (1) and bad (-1) examples."""
    crits = [Criterion(name=m.name, description=f"{m.definition.rstrip('.')}. {SCALE_NOTE}",
                       scale="-1-1",
                       examples=[Example(text=g[:TEXT_CHARS], value=1) for g in m.good[:examples]]
                       + [Example(text=b[:TEXT_CHARS], value=-1) for b in m.bad[:examples]])
             for m in metrics]
    return Rubric(name=name, description=description, criteria=crits)


def write_rubric(induction: Induction, path: str | Path) -> Path:
    """Write the induction's rubric as YAML (``sharpen judge RUN --judge PATH`` reads it)."""
    import yaml

    if induction.rubric is None:
        raise UserError("no metric was induced, so there is no rubric to write",
                        "check the notes: every note failed grounding, or there were none")
    p = Path(path)
    head = (f"# Metrics induced by `sharpen induce` from {len(induction.notes)} notes on run "
            f"{induction.run_id} ({induction.model}).\n")
    data = Rubric.parse(induction.rubric).model_dump(mode="json", exclude_defaults=True)
    p.write_text(head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
                 encoding="utf-8")
    return p


# -- the pipeline ---------------------------------------------------------------------------


async def induce(store: Store, run_id: str, model: ChatModel, notes: Sequence[Note] | None = None,
                 config: InduceConfig | None = None) -> Induction:
    """Induce metrics from ``notes`` (default: the run's human comments) on run ``run_id``
    with ``model`` (see the module doc). The caller owns ``model`` (closes it)."""
    cfg = config or InduceConfig()
    trajectories = {t.id: t for t in store.iter_trajectories(run_id)}
    notes = list(notes_from_store(store, run_id) if notes is None else notes)
    if not notes:
        raise UserError(f"run {run_id[:12]} has no human comment to induce metrics from",
                        "annotate trajectories in `sharpen view` (write a comment), or give "
                        "--notes FILE (JSONL of {trajectory_id, text})")
    aspects: list[Aspect] = []
    errors: list[str] = []
    for i, note in enumerate(notes):
        t = trajectories.get(note.trajectory_id)
        if t is None:
            errors.append(f"{i}: trajectory {note.trajectory_id} is not in run {run_id}")
            continue
        try:
            aspects += await ground(model, t, note, i, cfg)
        except JudgeError as exc:  # ask() words it for judges; here the model grounds
            errors.append(f"{i}: " + str(exc).replace("the judge's reply", "the model's reply"))
    labels, terms = cluster(aspects, cfg.metrics, cfg.max_metrics, cfg.seed)
    metrics: list[Metric] = []
    for c, words in enumerate(terms):
        idx = [i for i, lab in enumerate(labels) if lab == c]
        members = [aspects[i] for i in idx]
        name, definition, by = await name_metric(model, members, words)
        taken = Counter(m.name for m in metrics)
        name = name if not taken[name] else f"{name}_{c + 1}"
        metrics.append(Metric(name=name, definition=definition, aspects=idx, terms=words,
                              named_by=by, good=[a.behaviour for a in members if a.sign > 0],
                              bad=[a.behaviour for a in members if a.sign < 0]))
        for i in idx:
            aspects[i].metric = name
    rubric = None
    ratings: list[Trait] = []
    judge_errors: list[str] = []
    meta = None
    if metrics:
        rubric = to_rubric(metrics, cfg.rubric_name or f"induced-{run_id[:12]}",
                           # No run id: the judge reads it, and the same notes on a rerun of
                           # the same tasks must give the same prompts (a cassette replays them).
                           f"Metrics induced from {len(notes)} human notes (sharpen induce).",
                           cfg.examples)
        if cfg.evaluate:
            annotated = list(dict.fromkeys(a.trajectory_id for a in aspects))
            ratings, judge_errors = await judge_traits(
                rubric, [trajectories[t] for t in annotated], model, cfg.token_budget,
                {"max_tokens": 120 * len(metrics) + 40})  # an explanation and value each
            judged = {t for t in annotated if not any(e.startswith(t) for e in judge_errors)}
            meta = meta_evaluate(aspects, ratings, judged)
    return Induction(run_id=run_id, model=model.name, notes=notes, grounding_errors=errors,
                     aspects=aspects, metrics=metrics, ratings=ratings,
                     judge_errors=judge_errors, meta=meta,
                     rubric=rubric.model_dump(mode="json") if rubric else None)
