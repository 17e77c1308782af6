"""The router model on real parts: runs of two fixed models stored in a real SQLite store
through the CLI (the cheap one replays real SmolLM2-135M replies from
benchmarks/harness_overhead's cassette; the strong one is the reference agent, which solves
every task), the classifier fitted on them with ``sharpen router fit``, a router run through
the CLI routing each call by it and priced by the route that served it, ``sharpen report``'s
frontier, and fallback past a dead OpenAI-compatible endpoint (a closed loopback port)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import sharpen
from servers import free_port

from sharpen.core.errors import InfraError, UserError
from sharpen.core.messages import Message
from sharpen.models.router import RouterModel, task_text
from sharpen.models.routing import RouterClassifier, fit_classifier
from sharpen.store import Store

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "cassettes"
CASSETTE = BENCH / "harness_overhead.jsonl"
AGENT = BENCH / "harness_overhead.agent.yaml"
TASKS = "16"
CODE = ["code", "-E", "source=generated", "-E", "difficulty=easy", "-E", "max_submissions=2",
        "--tasks", TASKS, "--seed", "0", "-c", "2"]
PRICES = {"small": {"input": 1.0, "output": 2.0}, "big": {"input": 50.0, "output": 100.0}}


def replay(name: str) -> dict[str, Any]:
    return {"name": "replay", "args": {"cassette": str(CASSETTE), "name": name}}


class Work:
    """A store with a run of each fixed model and a classifier fitted on them."""

    small: dict[str, Any]
    """``sharpen run --json`` of the cheap model."""
    big: dict[str, Any]
    """... of the strong one."""
    fitted: dict[str, Any]
    """``sharpen router fit --json``."""
    clf: RouterClassifier
    """The classifier it wrote."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "prices.yaml").write_text(yaml.safe_dump(PRICES))
        self.env = {"SHARPEN_STORE": f"sqlite:///{root / 's.db'}",
                    "SHARPEN_PRICES": str(root / "prices.yaml")}
        self.store = Store(self.env["SHARPEN_STORE"])

    def run(self, *args: str) -> dict[str, Any]:
        res = sharpen("run", *CODE, *args, "--json", cwd=self.root, env=self.env, timeout=300)
        assert res.returncode == 0, res.stderr
        out: dict[str, Any] = json.loads(res.stdout)
        return out

    def cli(self, *args: str) -> str:
        res = sharpen(*args, cwd=self.root, env=self.env, timeout=300)
        assert res.returncode == 0, res.stderr
        return res.stdout


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Work:
    w = Work(tmp_path_factory.mktemp("router"))
    w.small = w.run("--agent", str(AGENT), "--model", "replay", "--model-arg",
                    f"cassette={CASSETTE}", "--model-arg", "name=small")
    w.big = w.run("--agent", str(AGENT), "--agent-name", "reference", "--model", "replay",
                  "--model-arg", f"cassette={CASSETTE}", "--model-arg", "name=big")
    w.fitted = json.loads(w.cli("router", "fit", w.small["run"]["id"][:8], w.big["run"]["id"],
                                "--out", "router.json", "--json"))
    w.clf = RouterClassifier.load(w.root / "router.json")
    return w


def first_user(store: Store, run_id: str) -> dict[str, str]:
    """Task id → its first user message in the run."""
    return {t.task.id: task_text(t.messages)
            for t in store.iter_trajectories(run_id, with_steps=False, with_messages=True)}


def test_fit_labels_each_task_with_the_cheapest_model_that_solved_it(work: Work) -> None:
    small, big, clf = work.small["summary"], work.big["summary"], work.clf
    assert 0 < small["n_success"] < small["n_counted"]  # the cheap model solved some, not all
    assert big["n_success"] == big["n_counted"] == int(TASKS)
    # Labels: the cheap route where it solved the task, else the reference (which solves all).
    assert clf.label_counts == [small["n_success"], int(TASKS) - small["n_success"]]
    assert work.fitted["tasks"] == clf.tasks == int(TASKS)
    assert clf.route_names == ["small", "big"]
    assert [r.model_dump() for r in clf.routes] == [replay("small"), replay("big")]
    assert clf.runs == [work.small["run"]["id"], work.big["run"]["id"]]


def test_the_json_classifier_predicts_what_scikit_learn_fitted(work: Work) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    texts = list(first_user(work.store, work.small["run"]["id"]).values())
    labels = [i % 3 for i in range(len(texts))]  # three classes: the multinomial form
    for classes in (labels, [min(x, 1) for x in labels]):  # and the binary one
        clf = fit_classifier(texts, classes, work.clf.routes + work.clf.routes[-1:],
                             ["a", "b", "c"])
        again = RouterClassifier.model_validate_json(clf.model_dump_json())
        vec = TfidfVectorizer(token_pattern=r"(?u)\b\w\w+\b", max_features=2000)
        tfidf = vec.fit_transform(texts).toarray()
        lengths = np.array([[np.log1p(len(t)), np.log1p(t.count("\n") + 1)] for t in texts])
        x = np.hstack([tfidf, (lengths - lengths.mean(0)) / lengths.std(0)])
        want = LogisticRegression(max_iter=2000).fit(x, classes).predict_proba(x)
        got = np.array([[again.probabilities(t)[c] for c in sorted(set(classes))] for t in texts])
        assert np.allclose(got, want, atol=1e-9)


def test_the_threshold_trades_cheap_routes_for_success(work: Work) -> None:
    texts = first_user(work.store, work.small["run"]["id"]).values()
    low = [work.clf.route(t, 0.05) for t in texts]
    high = [work.clf.route(t, 0.95) for t in texts]
    assert low.count(0) > high.count(0)
    assert all(a <= b for a, b in zip(low, high, strict=True))


def test_a_router_run_routes_each_call_and_prices_it_as_its_route(work: Work) -> None:
    out = work.run("--agent", str(AGENT), "--model", "router", "--model-arg",
                   f"classifier={work.root / 'router.json'}")
    run_id = out["run"]["id"]
    served: dict[str, int] = {}
    for traj in work.store.iter_trajectories(run_id):
        want = work.clf.route_names[work.clf.route(task_text(traj.messages))]
        for step in traj.steps:
            route = step.info["route"]
            assert route == want  # every call of an episode goes where its task was routed
            price = PRICES[route]
            u = step.usage
            assert u.cost_usd == pytest.approx(
                (u.input_tokens * price["input"] + u.output_tokens * price["output"]) / 1e6)
            served[route] = served.get(route, 0) + 1
    assert set(served) == {"small", "big"}
    # The routes replay the same recorded replies, so the router solves what the cheap model did.
    assert out["summary"]["n_success"] == work.small["summary"]["n_success"]

    report = json.loads(work.cli("report", run_id, "--json"))["routing"]
    assert {r["route"]: r["calls"] for r in report["routes"]} == served
    assert report["fallbacks"] == 0
    points = {p["label"]: p for p in report["frontier"]["points"]}
    assert list(points) == ["router", "small", "big"]
    assert report["frontier"]["axis"] == "cost_usd"
    assert points["router"]["accuracy"] == out["summary"]["success_rate"]
    assert points["small"]["run_id"] == work.small["run"]["id"]
    assert points["big"]["run_id"] == work.big["run"]["id"]
    # Same successes as the cheap model at a higher price: dominated.
    assert points["router"]["cost_per_task"] > points["small"]["cost_per_task"]
    assert not points["router"]["on_frontier"]
    text = work.cli("report", run_id)
    assert "Routing: calls per route" in text and "Cost–success frontier" in text


def test_a_dead_endpoint_falls_back_to_the_next_route(work: Work) -> None:
    dead = {"name": "openai", "args": {"base_url": f"http://127.0.0.1:{free_port()}/v1",
                                       "name": "dead", "timeout": 10}}
    spec = yaml.safe_load(AGENT.read_text())
    spec["model"] = {"name": "router", "args": {"routes": [dead, replay("small")]}}
    agent = work.root / "fallback.agent.yaml"
    agent.write_text(yaml.safe_dump(spec))
    out = work.run("--agent", str(agent), "--tasks", "4")
    assert out["summary"]["errors"] == {} and out["summary"]["n_counted"] == 4
    steps = [s for t in work.store.iter_trajectories(out["run"]["id"]) for s in t.steps]
    assert steps and all(s.info["route"] == "small" for s in steps)
    for s in steps:
        (failed,) = s.info["route_failed"]
        assert failed["route"] == "dead" and "ConnectError" in failed["error"]
    report = json.loads(work.cli("report", out["run"]["id"], "--json"))["routing"]
    assert report["fallbacks"] == len(steps)
    assert {r["route"]: r["calls"] for r in report["routes"]} == {"dead": 0, "small": len(steps)}


def test_every_route_dead_is_an_infra_error_and_bad_configs_are_user_errors(work: Work) -> None:
    def dead(name: str) -> dict[str, Any]:
        return {"name": "openai", "args": {"base_url": f"http://127.0.0.1:{free_port()}/v1",
                                           "name": name}}

    model = RouterModel(routes=[dead("a"), dead("b")])
    with pytest.raises(InfraError, match="ConnectError"):
        asyncio.run(model.complete([Message(role="user", content="hi")]))
    with pytest.raises(UserError, match="fitted on 2"):
        RouterModel(routes=[dead("a")], classifier=str(work.root / "router.json"))
    with pytest.raises(UserError, match="sharpen router fit"):
        RouterModel(classifier=str(work.root / "missing.json"))
    with pytest.raises(UserError, match="no routes"):
        RouterModel()
