"""The runner's store writer: one thread that saves finished trajectories, batching what queues.

Episodes never wait on the database: :meth:`StoreWriter.submit` queues a trajectory and returns
a future at once. The thread takes everything queued since its last write and saves it in one
transaction (:meth:`~sharpen.store.Store.save_trajectories`): a trajectory is written as soon as
the thread is free, as with one write per trajectory, but a busy run pays one ``BEGIN``/commit
and one round of statements per batch instead of per trajectory (at 8 trajectories a batch,
a third of the CPU time per trajectory). One writer also means writers never contend for
SQLite's lock.

Each future gets exactly what a single :meth:`~sharpen.store.Store.save_trajectory` of its
trajectory would have given: should a batch fail, its trajectories are saved again one by one,
so a bad trajectory fails alone and the others are stored.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from sharpen.core.trajectory import Trajectory
from sharpen.store import Store


class StoreWriter:
    """Saves trajectories to ``store`` on its own thread (see the module docstring).

    :meth:`submit` and :meth:`shutdown` are called from one thread (the runner's event loop).
    The hand-over is a ``queue.SimpleQueue``: putting an item takes no lock that the writer
    could be holding, so the event loop never waits for the writer (a shared lock made it
    wait for the writer's whole turn on the GIL, milliseconds)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._queue: queue.SimpleQueue[tuple[Trajectory, Future[bool]] | None] = \
            queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sharpen-store", daemon=True)
        self._thread.start()

    def submit(self, trajectory: Trajectory) -> Future[bool]:
        """Queue ``trajectory``; the future resolves to ``save_trajectory``'s result (or its
        exception) once it is written."""
        if self._closed:
            raise RuntimeError("the store writer is shut down")
        future: Future[bool] = Future()
        self._queue.put((trajectory, future))
        return future

    def shutdown(self) -> None:
        """Write everything queued, then stop the thread (returns when both are done)."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = []
            item = self._queue.get()
            while True:  # everything queued so far goes into this batch
                if item is None:
                    stop = True
                else:
                    batch.append(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                self._write(batch)

    def _write(self, batch: list[tuple[Trajectory, Future[bool]]]) -> None:
        # Running futures cannot be cancelled any more, so each gets its answer below; one
        # cancelled before this point is still saved (a finished episode is never dropped).
        live = [f.set_running_or_notify_cancel() for _, f in batch]
        if len(batch) > 1:
            try:
                written = self._store.save_trajectories([t for t, _ in batch])
            except Exception:  # noqa: BLE001 - find out which one fails, below
                pass
            else:
                for (_, future), ok, answer in zip(batch, written, live, strict=True):
                    if answer:
                        future.set_result(ok)
                return
        for (trajectory, future), answer in zip(batch, live, strict=True):
            try:
                ok = self._store.save_trajectory(trajectory)
            except BaseException as exc:  # noqa: BLE001 - delivered to the episode's await
                if answer:
                    future.set_exception(exc)
            else:
                if answer:
                    future.set_result(ok)
