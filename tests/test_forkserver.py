"""The sandbox fork server against real processes: a forked Python script behaves as a fresh
``python -I -B script`` in a fresh sandbox would, concurrent commands stay apart, and a dead
server costs no command. (The hostile-code suite runs under it too: ``test_code_harness``.)"""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import time
import uuid
import zipfile

import pytest
from conftest import procs_with

from sharpen.envs.code.bundle import harness_bundle
from sharpen.envs.code.verifier import HARNESS, harness_sandbox
from sharpen.sandbox.forkserver import (
    FORKSERVER_LABEL,
    ForkServerError,
    get_forkserver,
    shutdown_forkservers,
)
from sharpen.sandbox.isolation import choose
from sharpen.sandbox.local import LocalSandbox, bwrap_usable

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not bwrap_usable(),
    reason="a fork server needs privileged bubblewrap (root, bubblewrap installed)")


def forked(**kwargs: object) -> LocalSandbox:
    sandbox = LocalSandbox(fork_server=True, **kwargs)  # type: ignore[arg-type]
    assert sandbox.isolation == FORKSERVER_LABEL
    return sandbox


async def run_script(sb: LocalSandbox, source: str, *args: str, stdin: bytes | None = None,
                     timeout: float = 20.0):
    await sb.write_file("main.py", source)
    return await sb.exec([sb.python, "-I", "-B", "main.py", *args], stdin=stdin,
                         timeout=timeout)


async def test_a_forked_script_runs_as_python_would(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    async with forked() as sb:
        await sb.write_file("data.txt", "from the host")
        r = await run_script(sb, (
            "import os, sys\n"
            "print(sys.argv, os.getcwd() == os.environ['HOME'], os.getuid(), os.getgid())\n"
            "print(open('data.txt').read(), sys.stdin.read(), __name__)\n"
            "print(sorted(os.environ), file=sys.stderr)\n"
            "sys.exit(3)\n"), "a", "b", stdin=b"piped")
        assert r.returncode == 3 and not r.timed_out
        assert r.stdout.splitlines() == [
            f"['main.py', 'a', 'b'] True {sb.uid} {sb.uid}", "from the host piped __main__"]
        assert secret not in r.stderr and "OPENAI_API_KEY" not in r.stderr
        assert "'PATH'" in r.stderr
        # How the script ends decides the status, as for a fresh interpreter.
        assert (await run_script(sb, "raise ValueError('boom')\n")).returncode == 1
        crashed = await run_script(sb, "raise ValueError('boom')\n")
        assert "ValueError: boom" in crashed.stderr and "Traceback" in crashed.stderr
        assert (await run_script(sb, "import os\nos._exit(5)\n")).returncode == 5
        assert (await run_script(sb, "import os\nos.kill(os.getpid(), 9)\n")).returncode == -9
        assert (await run_script(sb, "pass\n")).returncode == 0
        # Anything but a script is run in a fresh sandbox, still confined.
        fresh = await sb.exec([sb.python, "-I", "-c", "import os; print(os.getuid())"])
        assert fresh.returncode == 0 and fresh.stdout.strip() == str(sb.uid)


async def test_rlimits_and_timeout_hold_in_a_forked_child() -> None:
    async with forked(memory_bytes=256 << 20, open_files=32) as sb:
        r = await run_script(sb, (
            "import resource\n"
            "print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20,"
            " resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
            "try:\n    bytearray(512 << 20)\nexcept MemoryError:\n    print('MemoryError')\n"))
        assert r.stdout.split() == ["256", "32", "MemoryError"]
        start = time.monotonic()
        r = await run_script(sb, "while True:\n    pass\n", timeout=1.0)
        assert r.timed_out and r.returncode is None and time.monotonic() - start < 5


def app_zip(tag: str, package: str = "app") -> bytes:
    """A zip application whose module records the pid that imported it."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("__main__.py", f"import os\nfrom {package} import mod\n"
                                   "print(mod.TAG, mod.IMPORTED_BY != os.getpid())\n")
        zf.writestr(f"{package}/__init__.py", "")
        zf.writestr(f"{package}/mod.py", f"import os\nTAG = {tag!r}\nIMPORTED_BY = os.getpid()\n")
    return buf.getvalue()


async def test_a_preload_runs_on_modules_imported_once_in_the_server() -> None:
    preload = app_zip("preloaded")
    async with forked(preload={"app.pyz": preload}) as sb:
        await sb.write_file("app.pyz", preload)
        r = await sb.exec([sb.python, "-I", "-B", "app.pyz"])
        assert r.returncode == 0 and r.stdout.split() == ["preloaded", "True"]
        # Other bytes under the same name: imported afresh from the file, in the child.
        await sb.write_file("app.pyz", app_zip("changed"))
        r = await sb.exec([sb.python, "-I", "-B", "app.pyz"])
        assert r.returncode == 0 and r.stdout.split() == ["changed", "False"]
        # The preload was linked, not copied, into the workdir; the server's copy is intact.
        assert sb._server is not None
        with open(os.path.join(sb._server.root, "app.pyz"), "rb") as fh:
            assert fh.read() == preload


async def test_a_script_runs_as_the_preload_it_is_whatever_its_name() -> None:
    one, two = app_zip("one", "app1"), app_zip("two", "app2")
    async with forked(preload={"one.pyz": one, "two.pyz": two}) as sb:
        await sb.write_file("one.pyz", two)  # the name of one preload, the bytes of the other
        r = await sb.exec([sb.python, "-I", "-B", "one.pyz"])
        assert r.returncode == 0 and r.stdout.split() == ["two", "True"]


async def test_preloads_that_share_a_module_get_no_server() -> None:
    """One module object serves every child, so two preloads may not both hold ``app.mod``:
    the server refuses to start and the sandbox is a fresh one, which still runs the script."""
    clash = {"one.pyz": app_zip("one"), "two.pyz": app_zip("two")}
    async with LocalSandbox(fork_server=True, preload=clash) as sb:
        assert sb.isolation != FORKSERVER_LABEL and sb._server is None
        await sb.write_file("two.pyz", clash["two.pyz"])
        r = await sb.exec([sb.python, "-I", "-B", "two.pyz"])
        assert r.returncode == 0 and r.stdout.split() == ["two", "False"]


async def test_a_changed_preload_runs_its_own_code() -> None:
    """A script whose bytes differ from the preload never runs on the preloaded modules."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("__main__.py", "from harness.checker import main\nmain()\n")
        zf.writestr("harness/__init__.py", "")
        zf.writestr("harness/checker.py", "def main():\n    print('impostor')\n")
    async with harness_sandbox() as sb:
        assert sb.isolation == FORKSERVER_LABEL
        await sb.write_file(HARNESS, buf.getvalue())
        r = await sb.exec([sb.python, "-I", "-B", HARNESS])
        assert r.returncode == 0 and r.stdout.strip() == "impostor"
        # ... and the real harness, byte for byte, runs on them (a report on an empty stdin).
        await sb.write_file(HARNESS, harness_bundle())
        r = await sb.exec([sb.python, "-I", "-B", HARNESS], stdin=b"{}")
        assert r.returncode == 0 and '"harness failure: KeyError' in r.stdout


async def test_concurrent_commands_cannot_reach_each_other() -> None:
    async with forked() as a, forked() as b:
        assert a.uid != b.uid
        marker = f"sharpen-victim-{uuid.uuid4().hex}"
        await a.write_file("secret.txt", marker)
        victim = asyncio.ensure_future(run_script(
            a, "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(3)\n", marker))
        await asyncio.sleep(1.0)
        r = await run_script(b, (
            "import os, signal, sys\n"
            "out = []\n"
            "try:\n    out.append(open(sys.argv[1] + '/secret.txt').read())\n"
            "except OSError as e:\n    out.append(type(e).__name__)\n"
            "for pid in os.listdir('/proc'):\n"
            "    try:\n"
            "        if sys.argv[2].encode() in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
            "            os.kill(int(pid), signal.SIGKILL)\n"
            "            out.append('killed')\n"
            "    except OSError as e:\n"
            "        out.append(type(e).__name__)\n"
            "print(out)\n"), a.workdir, marker)
        assert "PermissionError" in r.stdout and "killed" not in r.stdout
        assert "sharpen-victim" not in r.stdout
        done = await victim
        assert done.returncode == 0 and not done.timed_out


async def test_processes_a_script_leaves_behind_are_killed() -> None:
    marker = f"sharpen-daemon-{uuid.uuid4().hex}"
    async with forked() as sb:
        r = await run_script(sb, (
            "import os, sys\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        os.execv(sys.executable, [sys.executable, '-c',"
            " 'import time; time.sleep(30)', sys.argv[1]])\n"
            "    os._exit(0)\n"
            "os.wait()\n"), marker)
        assert r.returncode == 0
        assert procs_with(marker) == []


async def test_a_dead_server_costs_no_command() -> None:
    async with forked() as sb:
        server = sb._server
        assert server is not None and server._proc is not None
        server._proc.kill()
        for _ in range(100):
            if not server.alive:
                break
            await asyncio.sleep(0.05)
        assert not server.alive
        # This sandbox's next command runs in a fresh sandbox instead ...
        r = await run_script(sb, "import os\nprint('still here', os.getuid())\n")
        assert r.returncode == 0 and r.stdout.strip() == f"still here {sb.uid}"
    # ... and the next sandbox gets a new server.
    async with forked() as again:
        assert again._server is not None and again._server is not server
        r = await run_script(again, "print('new server')\n")
        assert r.stdout.strip() == "new server"


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from ``/proc/PID/task/TID/children``)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for tid in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{tid}/children") as fh:
                kids = [int(x) for x in fh.read().split()]
            found += kids
            todo += kids
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def test_shutdown_stops_the_servers_and_removes_their_roots() -> None:
    _mode, python, prefix = choose(None, None)
    server = get_forkserver(python, prefix, {})
    assert server is not None and server.alive and server._proc is not None
    root = server.root
    tree: list[int] = []
    end = time.monotonic() + 5.0  # the spare is forked after a command's end is reported
    while len(tree) < 3 and time.monotonic() < end:
        tree = descendants(server._proc.pid)  # bubblewrap, the server, its waiting spare
        await asyncio.sleep(0.02)
    assert len(tree) == 3
    shutdown_forkservers()
    assert not server.alive and not os.path.exists(root)
    assert server._proc.poll() is not None
    end = time.monotonic() + 5.0  # killed with the sandbox's pid namespace: dying, if not dead
    while [pid for pid in tree if alive(pid)] and time.monotonic() < end:
        await asyncio.sleep(0.02)
    assert not [pid for pid in tree if alive(pid)]
    async with forked() as sb:  # a later sandbox starts a new one
        assert (await run_script(sb, "print(1)\n")).stdout.strip() == "1"



FORKING_HOST = """
import asyncio, os, sys
from sharpen.sandbox.local import LocalSandbox

async def once(label):
    async with LocalSandbox(fork_server=True) as sb:
        await sb.write_file("main.py", f"print({label!r})")
        r = await sb.exec([sb.python, "-I", "-B", "main.py"], timeout=20)
        return f"{r.stdout.strip()} {sb._server.root}"

print(asyncio.run(once("parent")), flush=True)  # the parent's server is up
pid = os.fork()
if pid == 0:
    code = 1
    try:
        print(asyncio.run(once("child")), flush=True)
        code = 0
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
print(asyncio.run(once("parent-again")), os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_forked_host_process_starts_its_own_server(tmp_path) -> None:
    """After ``os.fork`` of the host (multiprocessing's default on Linux) the child must not
    share the parent's server (its replies would go to the parent's reader thread): it starts
    its own, and the parent's keeps working."""
    script = tmp_path / "forking_host.py"
    script.write_text(FORKING_HOST)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    (parent, root), (child, child_root), (again, again_root, status) = (
        line.split() for line in r.stdout.splitlines())
    assert (parent, child, again, status) == ("parent", "child", "parent-again", "0")
    assert child_root != root and again_root == root


def zip_app(main: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("__main__.py", main)
    return buf.getvalue()


ECHO = zip_app(
    "import os, sys\n"
    "if 'daemon' in sys.argv:\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)',"
    " sys.argv[-1]])\n"
    "    os.kill = lambda *args: None  # nothing the command does to itself stops the sweep\n"
    "for line in sys.stdin:\n"
    "    print(line.strip().upper(), flush=True)\n")


async def started(marker: str, within: float = 10.0) -> bool:
    """Whether a process with ``marker`` in its command line shows up within ``within`` s (the
    daemon's exec may come after the preload's first reply)."""
    end = time.monotonic() + within
    while not procs_with(marker):
        if time.monotonic() > end:
            return False
        await asyncio.sleep(0.02)
    return True


def pipes_to(sb: LocalSandbox, args: list[str]):
    """Start ``echo.pyz`` with ``args``: (process, write end of its stdin, read end of its
    stdout)."""
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    proc = sb.start_preload("echo.pyz", args, stdin=to_r, stdout=from_w, stderr=from_w)
    os.close(to_r)
    os.close(from_w)
    return proc, to_w, from_r


async def test_a_started_preload_talks_through_the_callers_pipes() -> None:
    marker = f"sharpen-daemon-{uuid.uuid4().hex}"
    async with forked(preload={"echo.pyz": ECHO}) as sb:
        proc, to_w, from_r = pipes_to(sb, ["daemon", marker])
        os.write(to_w, b"hello\n")
        assert os.read(from_r, 100) == b"HELLO\n"
        assert proc.poll() is None and await started(marker)  # still serving
        os.close(to_w)
        # It ends when its input does; the server reaps it, then kills what it left behind.
        assert await asyncio.to_thread(proc.wait, 10.0) == 0
        assert proc.swept and procs_with(marker) == []
        os.close(from_r)
        # A kill from the host: the process and what it started, at once.
        proc, to_w, from_r = pipes_to(sb, ["daemon", marker])
        os.write(to_w, b"again\n")
        assert os.read(from_r, 100) == b"AGAIN\n" and await started(marker)
        start = time.monotonic()
        await asyncio.to_thread(proc.kill)
        assert proc.returncode is not None and proc.returncode < 0 and proc.swept
        assert procs_with(marker) == [] and time.monotonic() - start < 2.0
        os.close(to_w)
        os.close(from_r)
        with pytest.raises(KeyError):
            sb.start_preload("nope.pyz", stdin=0, stdout=1, stderr=2)
    async with LocalSandbox(fork_server=False) as plain:
        assert not plain.forks_preloads
        with pytest.raises(ForkServerError):
            plain.start_preload("echo.pyz", stdin=0, stdout=1, stderr=2)
