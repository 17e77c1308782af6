"""The Store: runs, trajectories and feedback in one SQL database (SQLite by default).

The store is synchronous and thread-safe: one Engine per Store, one short transaction per
call. Async callers wrap calls in ``asyncio.to_thread``. Several processes may share a
SQLite file (a killed run and its resume, a viewer adding feedback): every write is one
``BEGIN IMMEDIATE`` transaction, so a write is either wholly there or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Self

from sqlalchemy import Connection, and_, delete, func, insert, select, tuple_, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from sharpen.core.agent_spec import AgentSpec
from sharpen.core.errors import UserError
from sharpen.core.feedback import Feedback
from sharpen.core.judgement import Judgement
from sharpen.core.manifest import RunManifest
from sharpen.core.task import TaskSpec
from sharpen.core.trajectory import Trajectory
from sharpen.store import codec
from sharpen.store.engine import URL_FIX, build_engine, parse_url, read_begin, write_begin
from sharpen.store.migrate import upgrade
from sharpen.store.owner import RunOwner
from sharpen.store.queries import (
    TASK_COLUMNS,
    feedback_by_trajectory,
    insert_ignore,
    run_records,
    run_rows,
    steps_by_trajectory,
    task_of,
    unique_tasks,
)
from sharpen.store.records import RUN_STATUSES, RunRecord, RunStatus
from sharpen.store.schema import agent_specs, feedback, judge_calls, run_tasks, runs, steps
from sharpen.store.schema import tasks as task_table
from sharpen.store.schema import trajectories as _T

LATEST = ("latest", "last")
"""Run references that mean "the newest run that is not in flight" (the newest run of all
when every run is in flight)."""

RUNS_FIX = "`sharpen runs` lists the runs; use a full id, a unique prefix, or 'latest'"

_LIGHT_COLUMNS = [c for c in _T.c if c.name != "messages"]


class Store:
    """Persistent home of agent specs, runs, tasks, trajectories, steps and feedback.

    ``Store(url)`` opens (creating if needed) the database at ``url`` — any SQLAlchemy URL;
    ``None`` means ``sqlite:///<cwd>/.sharpen/sharpen.db`` — and migrates it to the newest
    schema. A malformed URL, a missing driver or an unreachable database raises
    :class:`UserError`. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, url: str | None = None) -> None:
        self._url = parse_url(url)
        self._engine = build_engine(self._url)
        try:
            upgrade(self._engine)
        except DBAPIError as exc:
            self._engine.dispose()
            raise UserError(f"cannot open the store {self.url}: {exc.orig}", URL_FIX) from None
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def url(self) -> str:
        """The database URL (absolute for SQLite files; any password masked)."""
        return self._url.render_as_string(hide_password=True)

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release every pooled connection. The Store must not be used afterwards."""
        self._engine.dispose()

    def read(self) -> AbstractContextManager[Connection]:
        """A connection inside one short read transaction (one consistent snapshot), for the
        store's own query modules (:mod:`~sharpen.store.browse`,
        :mod:`~sharpen.store.aggregate`) and for tools that inspect the database. Nothing may
        be written through it; writes go through the methods of this class."""
        return read_begin(self._engine)

    # -- agent specs and runs -------------------------------------------------------------

    def save_agent_spec(self, spec: AgentSpec) -> str:
        """Store ``spec`` under its content hash and return the hash. Idempotent: if the hash
        is already stored, nothing changes (the first name and parents saved are kept)."""
        with write_begin(self._engine) as conn:
            insert_ignore(conn, agent_specs, [codec.agent_spec_row(spec)])
        return spec.hash()

    def create_run(self, manifest: RunManifest, spec: AgentSpec, tasks: Sequence[TaskSpec]) -> None:
        """Record a new run (status ``running``) with its spec and task list, in order.

        Idempotent on ``manifest.run_id``: an existing run is left exactly as it is (a resume
        calls this again, then :meth:`set_run_status`). Raises ``ValueError`` if ``spec``
        does not hash to ``manifest.agent_hash``, or if the existing run has another
        ``config_hash``.
        """
        if spec.hash() != manifest.agent_hash:
            raise ValueError(
                f"manifest.agent_hash {manifest.agent_hash} is not the spec's hash {spec.hash()}"
            )
        with write_begin(self._engine) as conn:
            existing = conn.execute(
                select(runs.c.config_hash).where(runs.c.id == manifest.run_id)
            ).scalar_one_or_none()
            if existing is not None:
                if existing != manifest.config_hash:
                    raise ValueError(
                        f"run {manifest.run_id} exists with config hash {existing}, "
                        f"not {manifest.config_hash}"
                    )
                return
            insert_ignore(conn, agent_specs, [codec.agent_spec_row(spec)])
            insert_ignore(conn, task_table, [codec.task_row(t) for t in unique_tasks(tasks)])
            conn.execute(insert(runs), [codec.run_row(manifest, len(unique_tasks(tasks)))])
            links = [
                {"run_id": manifest.run_id, "task_hash": t.hash(), "position": i}
                for i, t in enumerate(unique_tasks(tasks))
            ]
            if links:
                conn.execute(insert(run_tasks), links)

    def set_run_status(
        self, run_id: str, status: RunStatus, summary: dict[str, Any] | None = None,
        *, owner: RunOwner | None = None,
    ) -> None:
        """Set a run's status; ``summary`` (when given) replaces the stored summary, ``None``
        keeps it; ``owner`` (when given) records the process now running it (the runner
        passes :meth:`RunOwner.current` with ``running``). Unknown run → UserError; invalid
        status → ValueError."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}, not {status!r}")
        values: dict[str, Any] = {"status": status}
        if summary is not None:
            values["summary"] = codec.dumps(summary)
        if owner is not None:
            values["owner"] = owner.model_dump_json()
        with write_begin(self._engine) as conn:
            result = conn.execute(update(runs).where(runs.c.id == run_id).values(**values))
            if result.rowcount == 0:
                raise UserError(f"no run {run_id!r} in {self.url}", RUNS_FIX)

    def settle_orphans(self) -> list[str]:
        """Mark ``interrupted`` every ``running`` run whose owner process is gone (it ran on
        this host and no longer exists: killed by SIGKILL, or a crash that skipped the
        runner's last write); returns their ids. Runs without a recorded owner (stored before
        owners were) and runs owned on another host are left as they are. The listing and
        resolving methods call this first, so a dead run is never reported as running."""
        with read_begin(self._engine) as conn:
            rows = list(conn.execute(
                select(runs.c.id, runs.c.owner)
                .where(runs.c.status == "running", runs.c.owner.is_not(None))
            ))
        dead = [(r.id, r.owner) for r in rows if RunOwner.model_validate_json(r.owner).gone()]
        if not dead:
            return []
        with write_begin(self._engine) as conn:
            for run_id, owner in dead:
                # Only if nobody resumed it since we looked (the owner would differ).
                conn.execute(update(runs).where(
                    runs.c.id == run_id, runs.c.status == "running", runs.c.owner == owner
                ).values(status="interrupted"))
        return [run_id for run_id, _ in dead]

    def find_resumable(self, config_hash: str) -> str | None:
        """Id of the newest run (any status) with ``config_hash``, or ``None``."""
        with read_begin(self._engine) as conn:
            return conn.execute(
                select(runs.c.id)
                .where(runs.c.config_hash == config_hash)
                .order_by(runs.c.created_at.desc(), runs.c.id.desc())
                .limit(1)
            ).scalar_one_or_none()

    def resolve_run(self, ref: str) -> str:
        """The full run id ``ref`` names: a full id, a unique prefix, or ``latest``/``last``
        (the newest run not in flight — finished, interrupted or failed — or, when every run
        is in flight, the newest run). Otherwise a UserError that names ``sharpen runs``."""
        ref = ref.strip()
        if ref.lower() in LATEST:
            self.settle_orphans()
        with read_begin(self._engine) as conn:
            if ref.lower() in LATEST:
                newest_first = (runs.c.created_at.desc(), runs.c.id.desc())
                newest: str | None = conn.execute(
                    select(runs.c.id).where(runs.c.status != "running")
                    .order_by(*newest_first).limit(1)
                ).scalar_one_or_none() or conn.execute(
                    select(runs.c.id).order_by(*newest_first).limit(1)
                ).scalar_one_or_none()
                if newest is None:
                    raise UserError(f"there are no runs in {self.url} yet", RUNS_FIX)
                return newest
            if not ref:
                raise UserError("empty run reference", RUNS_FIX)
            if conn.execute(select(runs.c.id).where(runs.c.id == ref)).first() is not None:
                return ref
            found: list[str] = list(
                conn.execute(
                    select(runs.c.id)
                    .where(runs.c.id.startswith(ref, autoescape=True))
                    .order_by(runs.c.created_at.desc())
                    .limit(11)
                ).scalars()
            )
        if len(found) == 1:
            return found[0]
        if not found:
            raise UserError(f"no run matches {ref!r} in {self.url}", RUNS_FIX)
        shown = ", ".join(found[:10]) + (", ..." if len(found) > 10 else "")
        raise UserError(f"run prefix {ref!r} is ambiguous: {shown}", RUNS_FIX)

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this full id, with trajectory counts (a ``running`` run whose process
        is gone is settled first: see :meth:`settle_orphans`). Unknown id → UserError."""
        self.settle_orphans()
        with read_begin(self._engine) as conn:
            rows = run_rows(conn, runs.c.id == run_id, limit=1)
            if not rows:
                raise UserError(f"no run {run_id!r} in {self.url}", RUNS_FIX)
            return run_records(conn, rows)[0]

    def list_runs(
        self, limit: int | None = 50, *, env: str | None = None, status: str | None = None
    ) -> list[RunRecord]:
        """The newest ``limit`` runs (``None``: all), newest first, with their counts, cost and
        time span; only those on environment ``env`` and with ``status`` (a
        :data:`RunStatus`; any other string matches no run) when given."""
        conds = [c for c in (runs.c.env == env if env else None,
                             runs.c.status == status if status else None) if c is not None]
        self.settle_orphans()
        with read_begin(self._engine) as conn:
            return run_records(conn, run_rows(conn, and_(*conds) if conds else None, limit=limit))

    def tasks_for(self, run_id: str) -> list[TaskSpec]:
        """The run's tasks in the order :meth:`create_run` received them (duplicates once)."""
        with read_begin(self._engine) as conn:
            rows = conn.execute(
                select(task_table)
                .join(run_tasks, run_tasks.c.task_hash == task_table.c.hash)
                .where(run_tasks.c.run_id == run_id)
                .order_by(run_tasks.c.position)
            ).mappings()
            return [codec.task_from_row(r) for r in rows]

    # -- trajectories ---------------------------------------------------------------------

    def save_trajectory(self, t: Trajectory) -> bool:
        """Save ``t`` with its steps and feedback in one transaction.

        Returns ``False`` — writing nothing — when the run already has a trajectory with the
        same key (``t.key``: task, agent hash, epoch). The run must exist
        (:meth:`create_run`); every feedback record in ``t.feedback`` must target ``t.id``
        (``target.trajectory_id == t.id``), and step indexes must be distinct; otherwise
        ``ValueError`` and nothing is written. The task is added to ``tasks`` if new (a task
        already stored under the same hash keeps its stored split and metadata).
        """
        return self.save_trajectories([t])[0]

    def save_trajectories(self, ts: Sequence[Trajectory]) -> list[bool]:
        """Save several trajectories in one transaction (what :meth:`save_trajectory` does
        for each, batched: one commit instead of one per trajectory). Returns, per
        trajectory, whether it was written (``False``: its key was already stored, or an
        earlier one in the batch has the same key). Invalid input raises ``ValueError``
        before anything is written."""
        for t in ts:
            bad = [fb.id for fb in t.feedback if fb.target.trajectory_id != t.id]
            if bad:
                raise ValueError(f"feedback {bad} of trajectory {t.id} targets another trajectory")
            if len({s.index for s in t.steps}) != len(t.steps):
                raise ValueError(f"trajectory {t.id} has repeated step indexes")
        if not ts:
            return []
        # Another writer may save one of these keys between our check and our insert
        # (backends without SQLite's whole-database write lock): retry, skipping what is
        # there now. Each such failure means one more of our keys is stored, so this ends
        # within len(ts) + 1 attempts (once was not enough: eight writers of the same keys
        # on PostgreSQL hit it twice).
        for attempt in range(len(ts) + 1):
            try:
                with write_begin(self._engine) as conn:
                    return self._insert_new(conn, ts)
            except IntegrityError:
                if attempt == len(ts):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _insert_new(self, conn: Connection, ts: Sequence[Trajectory]) -> list[bool]:
        run_ids = {t.run_id for t in ts}
        known = set(conn.execute(select(runs.c.id).where(runs.c.id.in_(run_ids))).scalars())
        if run_ids - known:
            missing = sorted(run_ids - known)
            raise ValueError(f"run {missing[0]!r} does not exist; call create_run first")
        stored = {
            (r.run_id, r.key)
            for r in conn.execute(
                select(_T.c.run_id, _T.c.key).where(
                    tuple_(_T.c.run_id, _T.c.key).in_([(t.run_id, t.key) for t in ts])
                )
            )
        }
        written: list[bool] = []
        new: list[Trajectory] = []
        for t in ts:
            ok = (t.run_id, t.key) not in stored
            stored.add((t.run_id, t.key))
            written.append(ok)
            if ok:
                new.append(t)
        if not new:
            return written
        # Rows in key order: writers inserting overlapping keys then wait for one another
        # instead of each holding a key the other needs (a deadlock on PostgreSQL).
        tasks = sorted(unique_tasks(x.task for x in new), key=lambda task: task.hash())
        insert_ignore(conn, task_table, [codec.task_row(t) for t in tasks])
        conn.execute(insert(_T), [codec.trajectory_row(t)
                                  for t in sorted(new, key=lambda t: (t.run_id, t.key))])
        step_rows = [codec.step_row(t.id, s) for t in new for s in t.steps]
        if step_rows:
            conn.execute(insert(steps), step_rows)
        fb_rows = [codec.feedback_row(fb, i) for t in new for i, fb in enumerate(t.feedback)]
        if fb_rows:
            conn.execute(insert(feedback), fb_rows)
        return written

    def finished_keys(self, run_id: str) -> set[str]:
        """Keys (``Trajectory.key``) of every trajectory saved in the run; resume skips them."""
        with read_begin(self._engine) as conn:
            return set(conn.execute(select(_T.c.key).where(_T.c.run_id == run_id)).scalars())

    def discard_trajectories(self, run_id: str, error_kinds: Sequence[str]) -> int:
        """Delete the run's trajectories whose outcome has one of ``error_kinds`` (with their
        steps and feedback) in one transaction; returns how many. Resume uses it so that an
        episode lost to an infra error is attempted again rather than kept as final."""
        if not error_kinds:
            return 0
        with write_begin(self._engine) as conn:
            ids = list(conn.execute(
                select(_T.c.id).where(_T.c.run_id == run_id, _T.c.error_kind.in_(error_kinds))
            ).scalars())
            if ids:
                conn.execute(delete(feedback).where(feedback.c.trajectory_id.in_(ids)))
                conn.execute(delete(judge_calls).where(judge_calls.c.trajectory_id.in_(ids)))
                conn.execute(delete(steps).where(steps.c.trajectory_id.in_(ids)))
                conn.execute(delete(_T).where(_T.c.id.in_(ids)))
        return len(ids)

    def iter_trajectories(
        self,
        run_id: str,
        *,
        with_steps: bool = True,
        with_messages: bool | None = None,
        batch_size: int = 200,
    ) -> Iterator[Trajectory]:
        """The run's trajectories, ordered by ``(started_at, id)``, each with its feedback
        (every record targeting it, including ones added later by :meth:`add_feedback`).

        With the defaults each trajectory equals (``model_dump``) what
        :meth:`save_trajectory` received, plus any later feedback. ``with_steps=False``
        leaves ``steps`` empty and, unless ``with_messages=True``, ``messages`` empty too: a
        light listing that never reads the message columns. ``with_messages=False`` with
        steps gives steps without their messages and logprobs (what a detector reads, at a fraction of
        the cost). Rows are read in batches of
        ``batch_size``, each in its own short read transaction, so memory stays flat and
        writers are never held up. An unknown run yields nothing.
        """
        if with_messages is None:
            with_messages = with_steps
        columns = [*(_T.c if with_messages else _LIGHT_COLUMNS), *TASK_COLUMNS]
        cursor: tuple[Any, str] | None = None
        while True:
            query = (
                select(*columns)
                .join(task_table, task_table.c.hash == _T.c.task_hash)
                .where(_T.c.run_id == run_id)
                .order_by(_T.c.started_at, _T.c.id)
                .limit(batch_size)
            )
            if cursor is not None:  # keyset pagination: rows after the last one yielded
                query = query.where(tuple_(_T.c.started_at, _T.c.id) > cursor)
            with read_begin(self._engine) as conn:
                rows = list(conn.execute(query).mappings())
                ids = [r["id"] for r in rows]
                step_map = (steps_by_trajectory(conn, ids, messages=with_messages)
                            if with_steps and ids else {})
                fb_map = feedback_by_trajectory(conn, ids) if ids else {}
            for r in rows:
                yield codec.trajectory_from_row(
                    r,
                    task_of(r),
                    steps=step_map.get(r["id"], []),
                    feedback=fb_map.get(r["id"], []),
                )
            if len(rows) < batch_size:
                return
            cursor = (rows[-1]["started_at"], rows[-1]["id"])

    # -- feedback -------------------------------------------------------------------------

    def add_feedback(self, fb: Feedback) -> None:
        """Append one feedback record. Records are immutable: adding an id that is already
        stored changes nothing (edits are new records with ``supersedes``)."""
        self.add_feedbacks([fb])

    def add_feedbacks(self, records: Sequence[Feedback]) -> int:
        """Append ``records`` in one transaction, as :meth:`add_feedback` would one by one,
        in order (an id already stored, or repeated, is skipped); the number that were new.
        Records on trajectories are written with three statements per batch rather than three
        per record; run-level records go one by one."""
        added = 0
        with write_begin(self._engine) as conn:
            on_run = [fb for fb in records if fb.target.trajectory_id is None]
            for fb in on_run:
                added += _append_feedback(conn, fb)
            rest = [fb for fb in records if fb.target.trajectory_id is not None]
            for i in range(0, len(rest), _IN_CHUNK):
                added += _append_trajectory_feedback(conn, rest[i:i + _IN_CHUNK])
        return added

    # -- judgements -----------------------------------------------------------------------

    def save_judgement(self, j: Judgement, records: Sequence[Feedback] = ()) -> bool:
        """Store a judgement and the feedback it produced, in one transaction, so that a
        judge killed mid-run leaves each trajectory either judged or not. A failed judgement
        already stored for the same (trajectory, pair, judge) is replaced; a successful one is
        kept and ``False`` returned (nothing is written)."""
        key = and_(judge_calls.c.trajectory_id == j.trajectory_id,
                   judge_calls.c.versus == j.versus, judge_calls.c.judge_hash == j.judge_hash)
        with write_begin(self._engine) as conn:
            status = conn.execute(select(judge_calls.c.status).where(key)).scalar()
            if status == "ok":
                return False
            if status is not None:
                conn.execute(delete(judge_calls).where(key))
            conn.execute(insert(judge_calls), [codec.judgement_row(j)])
            for fb in records:
                _append_feedback(conn, fb)
        return True

    def judgements(self, run_id: str, judge_hash: str | None = None, *,
                   calls: bool = False) -> list[Judgement]:
        """The run's judgements (of one judge, with ``judge_hash``), oldest first; ``calls``
        loads the model calls too (heavy)."""
        q = select(judge_calls).where(judge_calls.c.run_id == run_id)
        if judge_hash is not None:
            q = q.where(judge_calls.c.judge_hash == judge_hash)
        with read_begin(self._engine) as conn:
            rows = conn.execute(q.order_by(judge_calls.c.created_at, judge_calls.c.id)).mappings()
            return [codec.judgement_from_row(r, calls=calls) for r in rows]

    def get_judgement(self, judgement_id: str) -> Judgement | None:
        """One judgement with its model calls, or ``None``."""
        with read_begin(self._engine) as conn:
            row = conn.execute(
                select(judge_calls).where(judge_calls.c.id == judgement_id)).mappings().first()
        return None if row is None else codec.judgement_from_row(row)

    def has_feedback(self, run_id: str, source: str) -> bool:
        """Whether any feedback from ``source`` targets the run or its trajectories."""
        with read_begin(self._engine) as conn:
            return conn.execute(select(feedback.c.id).where(
                feedback.c.run_id == run_id, feedback.c.source == source).limit(1)).first() \
                is not None

    def feedback_for(self, trajectory_id: str) -> list[Feedback]:
        """Every feedback record targeting the trajectory (or its steps and spans), in the
        order written, superseded records included."""
        with read_begin(self._engine) as conn:
            return feedback_by_trajectory(conn, [trajectory_id]).get(trajectory_id, [])


_IN_CHUNK = 500
"""Records per batch of :func:`_append_trajectory_feedback` (its ``IN`` lists stay small)."""


def _append_trajectory_feedback(conn: Connection, records: Sequence[Feedback]) -> int:
    """Append ``records`` (each on a trajectory) after their trajectories' last records, in
    order; ids already stored or repeated are skipped. The number written."""
    ids = [fb.id for fb in records]
    held = set(conn.execute(select(feedback.c.id).where(feedback.c.id.in_(ids))).scalars())
    owners = sorted({fb.target.trajectory_id for fb in records if fb.target.trajectory_id})
    last = dict(conn.execute(select(feedback.c.trajectory_id, func.max(feedback.c.seq))
                             .where(feedback.c.trajectory_id.in_(owners))
                             .group_by(feedback.c.trajectory_id)).tuples().all())
    rows = []
    for fb in records:
        tid = fb.target.trajectory_id
        if fb.id in held or tid is None:
            continue
        held.add(fb.id)
        seq = last.get(tid, -1) + 1
        last[tid] = seq
        rows.append(codec.feedback_row(fb, seq))
    if rows:
        conn.execute(insert(feedback), rows)
    return len(rows)


def _append_feedback(conn: Connection, fb: Feedback) -> bool:
    """Append ``fb`` after its trajectory's (or run's) last record; an id already stored
    changes nothing (records are immutable) and gives ``False``."""
    if conn.execute(select(feedback.c.id).where(feedback.c.id == fb.id)).first():
        return False
    tg = fb.target
    same = (
        feedback.c.trajectory_id == tg.trajectory_id
        if tg.trajectory_id is not None
        else and_(feedback.c.trajectory_id.is_(None), feedback.c.run_id == tg.run_id)
    )
    last = conn.execute(select(func.max(feedback.c.seq)).where(same)).scalar()
    seq = 0 if last is None else last + 1
    conn.execute(insert(feedback), [codec.feedback_row(fb, seq)])
    return True
