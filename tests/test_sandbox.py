"""LocalSandbox against real subprocesses, under bubblewrap and under the fallback."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from conftest import procs_with

from sharpen.sandbox.local import LABELS, LocalSandbox, bwrap_usable, detect_isolation

MODES = ["bwrap", "fallback"]


def make_sandbox(mode: str, **kwargs: object) -> LocalSandbox:
    if mode == "bwrap":
        if not bwrap_usable():
            pytest.skip("bubblewrap is not installed or cannot create namespaces here")
        return LocalSandbox(use_bwrap=True, **kwargs)  # type: ignore[arg-type]
    return LocalSandbox(use_bwrap=False, **kwargs)  # type: ignore[arg-type]



@pytest.mark.parametrize("mode", MODES)
async def test_exec_basics(mode: str) -> None:
    async with make_sandbox(mode) as sb:
        assert sb.isolation in LABELS.values()
        await sb.write_file("data/in.txt", "hello from the host")
        code = (
            "import sys; data = sys.stdin.read(); print(open('data/in.txt').read(), data);"
            "open('out.txt', 'w').write('written inside'); print('err', file=sys.stderr);"
            "sys.exit(3)"
        )
        r = await sb.exec([sb.python, "-I", "-c", code], stdin=b"piped", timeout=20)
        assert r.returncode == 3 and not r.timed_out and not r.truncated
        assert r.stdout.strip() == "hello from the host piped"
        assert r.stderr.strip() == "err"
        assert await sb.read_file("out.txt") == "written inside"
        assert r.seconds > 0
        workdir = sb.workdir
    assert not os.path.exists(workdir)


@pytest.mark.parametrize("mode", MODES)
async def test_timeout_kills_the_whole_process_group(mode: str) -> None:
    marker = f"sharpen-sleeper-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys, time;"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{marker}']);"
        "time.sleep(60)"
    )
    async with make_sandbox(mode) as sb:
        start = time.monotonic()
        r = await sb.exec([sb.python, "-I", "-c", code], timeout=1.0)
        assert r.timed_out and r.returncode is None
        assert time.monotonic() - start < 5
        assert procs_with(marker) == []


@pytest.mark.parametrize("mode", MODES)
async def test_output_is_capped_and_drained(mode: str) -> None:
    code = (
        "import sys\nfor _ in range(200):\n    sys.stdout.write('x' * 100_000)\n"
        "print('done', file=sys.stderr)"
    )
    async with make_sandbox(mode, output_limit=10_000) as sb:
        r = await sb.exec([sb.python, "-I", "-c", code], timeout=30)
    assert r.returncode == 0 and r.truncated and not r.timed_out
    assert len(r.stdout) == 10_000
    assert r.stderr.strip() == "done"  # the child was never blocked on a full pipe


@pytest.mark.parametrize("mode", MODES)
async def test_environment_is_scrubbed(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("SHARPEN_SOMETHING", "x")
    async with make_sandbox(mode, extra_env={"EXTRA_VAR": "given"}) as sb:
        r = await sb.exec([sb.python, "-I", "-c", "import os; print(dict(os.environ))"])
    env = eval(r.stdout)  # our own child's repr of a dict of str
    assert secret not in r.stdout and "OPENAI_API_KEY" not in env and "SHARPEN_SOMETHING" not in env
    assert env["EXTRA_VAR"] == "given" and env["PYTHONHASHSEED"] == "0"
    assert set(env) <= {
        "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
        "PYTHONIOENCODING", "PYTHONUNBUFFERED", "EXTRA_VAR", "PWD",
    }


@contextlib.contextmanager
def no_hang(seconds: int) -> Iterator[None]:
    """Fail, rather than hang the suite, if the body blocks for ``seconds``."""
    def expired(*_: object) -> None:
        raise RuntimeError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("mode", MODES)
async def test_paths_outside_the_workdir_are_rejected(mode: str) -> None:
    async with make_sandbox(mode) as sb:
        for bad in ("../escape.txt", "/etc/passwd", "a/../../escape.txt", "", "x\0y"):
            with pytest.raises(ValueError):
                await sb.write_file(bad, "nope")
            with pytest.raises(ValueError):
                await sb.read_file(bad)
        # A symlink planted by sandboxed code must not lead the host outside the workdir.
        r = await sb.exec(["/bin/ln", "-s", "/etc/hostname", "leak"])
        assert r.returncode == 0
        with pytest.raises(ValueError):
            await sb.read_file("leak")
        with pytest.raises(ValueError):
            await sb.write_file("leak", "overwrite through the link")
        # Nor may a FIFO it leaves behind make the host wait forever for a reader or writer.
        r = await sb.exec(["/usr/bin/mkfifo", "pipe"])
        assert r.returncode == 0
        with no_hang(5):
            with pytest.raises(OSError):
                await sb.read_file("pipe")
            with pytest.raises(OSError):
                await sb.write_file("pipe", "blocked?")
    assert not os.path.exists(os.path.join(os.path.dirname(sb.workdir), "escape.txt"))


async def test_isolation_strings() -> None:
    assert detect_isolation() in LABELS.values()
    async with LocalSandbox(use_bwrap=False) as sb:
        assert not sb.isolation.startswith("bwrap")
        if os.geteuid() == 0:
            assert sb.isolation.startswith("uid+") and sb.uid is not None
    async with LocalSandbox(use_bwrap=False, drop_uid=False) as sb:
        assert sb.isolation == "rlimits" and sb.uid is None
    if bwrap_usable():
        assert detect_isolation().startswith("bwrap")
        async with LocalSandbox() as sb:
            assert sb.isolation == detect_isolation()
            r = await sb.exec([sb.python, "-I", "-c", "import os; print(sorted(os.listdir('/')))"])
            visible = set(eval(r.stdout))
            assert not visible & {"home", "work", "var", "opt", "srv", "mnt"}


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_sandboxes_use_distinct_uids(mode: str) -> None:
    boxes = [make_sandbox(mode) for _ in range(4)]
    try:
        uids = [b.uid for b in boxes]
        if os.geteuid() == 0:
            assert None not in uids and len(set(uids)) == 4
        dirs = {b.workdir for b in boxes}
        assert len(dirs) == 4
    finally:
        for b in boxes:
            await b.close()


@pytest.mark.parametrize("mode", MODES)
async def test_rlimits_are_in_force_inside(mode: str) -> None:
    """The limits reach the sandboxed command, however they are set (``prlimit`` in front of
    bubblewrap, or between fork and exec in the fallback)."""
    async with make_sandbox(mode, cpu_seconds=7, memory_bytes=700 << 20,
                            file_size_bytes=3 << 20, open_files=40, processes=30) as sb:
        code = ("import resource as r; print([r.getrlimit(getattr(r, 'RLIMIT_' + n)) for n in "
                "('CPU', 'AS', 'FSIZE', 'NOFILE', 'NPROC', 'CORE')])")
        r = await sb.exec([sb.python, "-I", "-c", code])
    got = dict(zip(("cpu", "as", "fsize", "nofile", "nproc", "core"), eval(r.stdout), strict=True))
    assert got["cpu"] == (7, 7) and got["as"] == (700 << 20, 700 << 20)
    assert got["fsize"] == (3 << 20, 3 << 20) and got["nofile"] == (40, 40)
    assert got["core"] == (0, 0)
    if os.geteuid() == 0:  # otherwise the running processes of the user are added
        assert got["nproc"] == (30, 30)


# -- closing in the background ---------------------------------------------------------------------


async def test_a_closing_is_in_force_for_its_tasks_only_and_waits_for_its_work() -> None:
    import asyncio
    import threading

    from sharpen.sandbox.closing import THREAD_PREFIX, Closing, in_force

    release = threading.Event()
    ran: list[str] = []

    def job(name: str) -> None:
        release.wait(10)
        ran.append(f"{name}:{threading.current_thread().name.startswith(THREAD_PREFIX)}")

    async def episode(name: str) -> Closing | None:
        closing = in_force()
        assert closing is not None
        closing.submit(lambda: job(name))
        return closing

    a, b = Closing(), Closing()
    assert in_force() is None
    with a.scope():
        task_a = asyncio.ensure_future(episode("a"))
    with b.scope():
        task_b = asyncio.ensure_future(episode("b"))
    assert in_force() is None  # the scopes are over; the tasks keep their own
    assert await task_a is a and await task_b is b
    assert a.pending == 1 and b.pending == 1
    waiting = asyncio.ensure_future(a.close())
    await asyncio.sleep(0.05)
    assert not waiting.done()  # close waits for the job still running
    release.set()
    await waiting
    await b.close()
    assert sorted(ran) == ["a:True", "b:True"] and a.pending == b.pending == 0
    with pytest.raises(RuntimeError):
        a.submit(lambda: None)
