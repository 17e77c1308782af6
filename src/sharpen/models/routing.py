"""The router's classifier: predicted difficulty of a task from its text, as a JSON file.

A task's *label* is the cheapest route that solved it in stored runs (the last route when
none did: the best chance it has). :func:`fit_classifier` fits a multinomial logistic
regression (scikit-learn) on features of the task's text — TF-IDF of its words, plus the
log of its length in characters and in lines, standardised — and :class:`RouterClassifier`
holds what predicting needs: the vocabulary, the IDF weights, the scaling and the
coefficients. It is written and read as JSON (never pickle), and predicts with numpy alone,
computing the features exactly as scikit-learn's ``TfidfVectorizer`` did when it was fitted
(lower-cased ``\\w\\w+`` tokens, raw counts × IDF, L2-normalised).

The route of a call (:meth:`RouterClassifier.route`) is the cheapest route ``i`` whose
predicted probability of being enough, ``P(label ≤ i)``, reaches ``threshold`` (default
0.5): a higher threshold buys success with cost.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from sharpen.core.errors import UserError
from sharpen.core.registry import PluginRef

FORMAT: Literal["sharpen-router/1"] = "sharpen-router/1"
"""The classifier file's format tag."""

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""Words, as scikit-learn's ``TfidfVectorizer`` finds them by default."""

_TOKENS = re.compile(TOKEN_PATTERN)


class TextFeatures(BaseModel):
    """How a task's text becomes a feature vector."""

    vocabulary: dict[str, int]
    """Word → column of the TF-IDF block."""
    idf: list[float]
    """IDF weight of each column."""
    scale_mean: list[float]
    """Mean of ``[log1p(chars), log1p(lines)]`` over the fitted tasks."""
    scale_std: list[float]
    """Their standard deviation (1 where it was 0)."""

    def vector(self, text: str) -> np.ndarray:
        """The features of ``text``: the L2-normalised TF-IDF block, then the two scaled
        length features."""
        tfidf = np.zeros(len(self.idf))
        for word, n in Counter(_TOKENS.findall(text.lower())).items():
            col = self.vocabulary.get(word)
            if col is not None:
                tfidf[col] = n * self.idf[col]
        norm = float(np.linalg.norm(tfidf))
        if norm > 0:
            tfidf /= norm
        lengths = (np.array(length_features(text)) - self.scale_mean) / self.scale_std
        return np.concatenate([tfidf, lengths])


def length_features(text: str) -> list[float]:
    """``[log1p(characters), log1p(lines)]`` of ``text``."""
    return [math.log1p(len(text)), math.log1p(text.count("\n") + 1)]


class RouterClassifier(BaseModel):
    """A fitted router classifier: the JSON file ``sharpen router fit`` writes."""

    format: Literal["sharpen-router/1"] = FORMAT
    """File format tag."""
    routes: list[PluginRef]
    """The model refs of the routes, cheapest first (the models of the fitted runs)."""
    route_names: list[str]
    """Display names of the routes (their runs' model names)."""
    runs: list[str] = Field(default_factory=list)
    """The stored runs it was fitted on, one per route."""
    features: TextFeatures
    """How the task text becomes features."""
    classes: list[int]
    """The route indexes the regression predicts (the labels seen when fitting)."""
    coef: list[list[float]]
    """One coefficient row per class (one row for two classes, scikit-learn's binary form)."""
    intercept: list[float]
    """One intercept per row of ``coef``."""
    tasks: int = 0
    """Tasks it was fitted on."""
    label_counts: list[int] = Field(default_factory=list)
    """Fitted tasks per label (route index)."""

    def probabilities(self, text: str) -> list[float]:
        """``P(label = i)`` for every route ``i`` (0 for a route no fitted task needed)."""
        x = self.features.vector(text)
        scores = np.asarray(self.coef) @ x + np.asarray(self.intercept)
        if len(self.classes) == 1:
            class_p = np.ones(1)
        elif len(self.classes) == 2:  # binary: one row, the second class's log-odds
            p1 = 1.0 / (1.0 + math.exp(-float(scores[0])))
            class_p = np.array([1.0 - p1, p1])
        else:
            e = np.exp(scores - scores.max())
            class_p = e / e.sum()
        out = [0.0] * len(self.routes)
        for c, p in zip(self.classes, class_p, strict=True):
            out[c] = float(p)
        return out

    def route(self, text: str, threshold: float = 0.5) -> int:
        """The cheapest route whose predicted ``P(label ≤ i)`` reaches ``threshold``."""
        total = 0.0
        probs = self.probabilities(text)
        for i, p in enumerate(probs):
            total += p
            if total >= threshold - 1e-12:
                return i
        return len(probs) - 1

    def save(self, path: Path) -> None:
        """Write the classifier as JSON."""
        path.write_text(self.model_dump_json(indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> RouterClassifier:
        """Read a classifier file; a missing or malformed one is a :class:`UserError`."""
        p = Path(path).expanduser()
        fix = "fit one with  sharpen router fit RUN_CHEAP RUN_STRONG ... --out router.json"
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"router classifier {p}: {exc.strerror or exc}", fix) from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise UserError(f"router classifier {p} is not a {FORMAT} file: "
                            f"{exc.errors()[0]['msg']}", fix) from None


def fit_classifier(texts: list[str], labels: list[int], routes: list[PluginRef],
                   route_names: list[str], *, runs: list[str] | None = None,
                   max_features: int = 2000, c: float = 1.0) -> RouterClassifier:
    """Fit the classifier on task ``texts`` and their ``labels`` (route indexes into
    ``routes``, cheapest first). ``max_features`` bounds the vocabulary; ``c`` is the
    regression's inverse regularisation strength. Deterministic (no random state used)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

    if not texts or len(texts) != len(labels):
        raise UserError("the router classifier needs at least one task with a label",
                        "fit it on runs that scored the same tasks")
    vectorizer = TfidfVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN,
                                 max_features=max_features, norm="l2")
    try:
        tfidf = vectorizer.fit_transform(texts).toarray()
        vocabulary = {str(k): int(v) for k, v in vectorizer.vocabulary_.items()}
        idf = [float(v) for v in vectorizer.idf_]
    except ValueError:  # no word in any text: the length features alone
        tfidf, vocabulary, idf = np.zeros((len(texts), 0)), {}, []
    lengths = np.array([length_features(t) for t in texts])
    mean = lengths.mean(axis=0)
    std = lengths.std(axis=0)
    std[std == 0] = 1.0
    x = np.hstack([tfidf, (lengths - mean) / std])
    features = TextFeatures(vocabulary=vocabulary, idf=idf, scale_mean=mean.tolist(),
                            scale_std=std.tolist())
    classes = sorted(set(labels))
    if len(classes) == 1:  # every task needed the same route: nothing to learn
        coef, intercept = [[0.0] * x.shape[1]], [0.0]
    else:
        reg = LogisticRegression(C=c, max_iter=2000).fit(x, labels)
        coef, intercept = reg.coef_.tolist(), reg.intercept_.tolist()
    counts = Counter(labels)
    return RouterClassifier(routes=routes, route_names=route_names, runs=runs or [],
                            features=features, classes=classes, coef=coef, intercept=intercept,
                            tasks=len(texts), label_counts=[counts[i] for i in range(len(routes))])
