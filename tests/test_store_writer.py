"""The runner's store writer: batched saves give every trajectory what a single save gives."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import pytest
from test_store import make_run, make_trajectory

from sharpen.core.trajectory import Trajectory
from sharpen.runner.writer import StoreWriter
from sharpen.store import Store


def _mixed(store: Store) -> tuple[list[Trajectory], Trajectory, Trajectory]:
    """Six good trajectories, one whose feedback targets another trajectory (invalid) and one
    repeating the first one's key (a duplicate)."""
    spec, tasks = make_run(store)
    good = [make_trajectory("run-aaaa", tasks[i % 3], spec.hash(), epoch=i) for i in range(6)]
    bad = make_trajectory("run-aaaa", tasks[0], spec.hash(), epoch=99)
    bad.feedback[0].target.trajectory_id = "someone-else"
    dup = make_trajectory("run-aaaa", tasks[0], spec.hash(), epoch=0)
    return good, bad, dup


def _check(store: Store, good: list[Trajectory], futures: list[Future[bool]]) -> None:
    *first, bad_f, fifth, sixth, dup_f = futures  # in the order of [*good[:4], bad, *good[4:], dup]
    assert [f.result() for f in (*first, fifth, sixth)] == [True] * 6
    with pytest.raises(ValueError, match="targets another trajectory"):
        bad_f.result()
    assert dup_f.result() is False
    stored = {t.id: t.model_dump() for t in store.iter_trajectories("run-aaaa")}
    assert stored == {t.id: t.model_dump() for t in good}


def test_submitted_trajectories_are_all_written_and_only_the_bad_one_fails(
        tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    good, bad, dup = _mixed(store)
    writer = StoreWriter(store)
    order = [*good[:4], bad, *good[4:], dup]
    futures = [writer.submit(t) for t in order]
    writer.shutdown()  # returns once everything queued is written
    _check(store, good, futures)
    with pytest.raises(RuntimeError):
        writer.submit(good[0])
    store.close()


def test_a_failing_batch_is_saved_one_by_one(tmp_path: Path) -> None:
    """However the queue is cut into batches: one batch holding everything fails as a whole
    in the store, and the writer falls back to single saves."""
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    good, bad, dup = _mixed(store)
    with pytest.raises(ValueError):
        store.save_trajectories([*good, bad])
    writer = StoreWriter(store)
    order = [*good[:4], bad, *good[4:], dup]
    batch: list[tuple[Trajectory, Future[bool]]] = [(t, Future()) for t in order]
    writer._write(batch)  # the batch the thread would take when all were queued at once
    writer.shutdown()
    _check(store, good, [f for _, f in batch])
    store.close()


def test_a_cancelled_wait_still_saves_the_trajectory(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    good, _, _ = _mixed(store)
    writer = StoreWriter(store)
    futures = [writer.submit(t) for t in good]
    for f in futures:
        f.cancel()  # as Ctrl-C would: only possible while still queued
    writer.shutdown()
    assert {t.id for t in store.iter_trajectories("run-aaaa")} == {t.id for t in good}
    store.close()
