"""sharpen's httpx OpenAI client against the ``openai`` SDK: overhead and error classification.

What is measured
----------------
Both clients call the same real loopback server: the tests' ``ScriptedServer``
(``tests/servers.py``), started in its **own process** so that its work is not counted as
the client's. It answers a fixed chat completion instantly, so what is left is the client:
building the request, HTTP on loopback, parsing the answer.

* **sharpen**: ``OpenAIModel.complete`` (``sharpen.models.openai_compat``: httpx, one
  ``AsyncClient`` per event loop), returning a sharpen ``Completion``.
* **openai SDK**: ``AsyncOpenAI(max_retries=0).chat.completions.create`` returning the SDK's
  ``ChatCompletion`` (the SDK's own retries are off: sharpen's runner owns retries so that each
  one is counted). ``sdk+convert`` also turns that object into a sharpen ``Completion``
  (``model_dump()`` then ``OpenAIModel.parse_response``), which a switched backend would do.

For each client and concurrency (1 and 16 calls in flight) one warm-up of 50 calls, then
``--calls`` timed calls, ``--repeats`` times in fresh clients (the clients take turns in each
repeat); the medians over repeats are reported: requests per second (wall) and client CPU per
call (``time.process_time`` of this process,
which runs only the client). Then every fault scenario of the tests' server (and a refused
connection, and a timeout) is played against both clients, recording what each raises; and
the time a fresh interpreter takes to import each client.

Run: ``.venv/bin/python benchmarks/openai_client.py`` (``--calls 2000 --repeats 5`` by
default); writes the tables to stdout (copied to ``benchmarks/results/openai_client.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai

from sharpen.core.errors import InfraError, UserError
from sharpen.core.messages import Message
from sharpen.models.openai_compat import OpenAIModel

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [Message(role="system", content="You are terse."),
            Message(role="user", content="Say hello.")]
PARAMS = {"temperature": 0.0, "max_tokens": 16}
# TCP_NODELAY on the server's sockets: its handler writes the headers and the body
# separately, and with Nagle's algorithm a keep-alive client then waits ~40 ms for a delayed
# ACK on every call, which would hide the clients' own cost.
SERVER = """
import socketserver, sys
socketserver.StreamRequestHandler.disable_nagle_algorithm = True
socketserver.TCPServer.request_queue_size = 128  # 16 clients connect at once (default 5)
sys.path.insert(0, {tests!r})
from servers import ScriptedServer
with ScriptedServer(slow_s=2.0) as s:
    print(s.url, flush=True)
    sys.stdin.read()
"""


def start_server() -> tuple[str, subprocess.Popen[str]]:
    """The scripted server in a child process; returns its URL and the process (stop it by
    closing its stdin). Start it outside any event loop: started from inside one, its first
    keep-alive connections were dropped (ReadError) on this machine."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(tests=str(ROOT / "tests"))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL)  # the timed-out call's broken pipe
    assert proc.stdout is not None
    return proc.stdout.readline().strip(), proc


Call = Callable[[], Awaitable[Any]]


def clients(url: str, scenario: str = "ok", timeout: float = 30.0
            ) -> dict[str, tuple[Call, Callable[[], Awaitable[None]]]]:
    """``{name: (one call, close)}`` for each client against ``scenario``."""
    base = f"{url}/{scenario}/v1"
    ours = OpenAIModel(base_url=base, model="scripted", timeout=timeout, api_key="sk-bench")
    sdk = openai.AsyncOpenAI(base_url=base, api_key="sk-bench", max_retries=0, timeout=timeout)
    sdk_messages = [m.to_openai() for m in MESSAGES]

    async def call_ours() -> Any:
        return await ours.complete(MESSAGES, None, PARAMS)

    async def call_sdk() -> Any:
        return await sdk.chat.completions.create(model="scripted", messages=sdk_messages,
                                                 **PARAMS)  # type: ignore[call-overload]

    async def call_sdk_convert() -> Any:
        start = time.perf_counter()
        resp = await call_sdk()
        return ours.parse_response(resp.model_dump(), time.perf_counter() - start)

    async def close_sdk() -> None:
        await sdk.close()

    return {"sharpen (httpx)": (call_ours, ours.aclose), "openai SDK": (call_sdk, close_sdk),
            "openai SDK + convert": (call_sdk_convert, close_sdk)}


async def timed(call: Call, n: int, concurrency: int) -> tuple[float, float, int]:
    """(requests/s, client CPU ms per call, failed calls) for ``n`` calls, ``concurrency``
    in flight. A failed call (the loaded server dropped a connection) is counted, not fatal."""
    queue = iter(range(n))
    failed = 0

    async def worker() -> None:
        nonlocal failed
        for _ in queue:
            try:
                await call()
            except (InfraError, openai.APIError):
                failed += 1

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, cpu / n * 1000, failed


async def throughput(url: str, calls: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    for concurrency in (1, 16):
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in clients(url)}
        for _ in range(repeats):
            # Clients take turns within a repeat, so that other load on the machine falls
            # on all of them alike.
            for name, got in results.items():
                call, close = clients(url)[name]
                await timed(call, 50, concurrency)  # warm-up: connections open, code paths hot
                got.append(await timed(call, calls, concurrency))
                await close()
        for name, got in results.items():
            rps = statistics.median(r for r, _, _ in got)
            cpu = statistics.median(c for _, c, _ in got)
            rows.append({"client": name, "concurrency": concurrency, "requests_per_s": rps,
                         "cpu_ms_per_call": cpu, "failed": sum(f for _, _, f in got),
                         "all_rps": [round(r) for r, _, _ in got],
                         "all_cpu_ms": [round(c, 3) for _, c, _ in got]})
    return rows


def import_seconds(module: str, runs: int = 3) -> float:
    """Fastest of ``runs`` fresh interpreters' wall time to ``import module`` (start-up
    included; the same for both)."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        best = min(best, time.perf_counter() - start)
    return best


FAULTS = ["429", "500", "503", "badjson", "cut", "nochoices", "reset", "slow", "refused",
          "401", "404", "400"]


async def faults(url: str) -> list[dict[str, str]]:
    """What each client raises for each fault (``slow`` with a 0.5 s timeout; ``refused`` at
    a port nothing listens on)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from servers import free_port

    rows = []
    for fault in FAULTS:
        where = f"http://127.0.0.1:{free_port()}" if fault == "refused" else url
        scenario = {"refused": "ok", "404": "nowhere"}.get(fault, fault)
        row = {"fault": fault}
        for name, (call, close) in clients(where, scenario, timeout=0.5).items():
            if name.endswith("convert"):
                continue
            try:
                got = await call()
                row[name] = f"no error ({type(got).__name__}, choices="
                row[name] += f"{getattr(got, 'choices', '?')!r})"[:80]
            except InfraError as exc:
                row[name] = f"InfraError(retryable={exc.retryable})"
            except UserError:
                row[name] = "UserError"
            except Exception as exc:  # noqa: BLE001 - the point is to see what the SDK raises
                row[name] = type(exc).__module__.split(".")[0] + "." + type(exc).__name__
            await close()
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    url, proc = start_server()
    try:
        rows = asyncio.run(throughput(url, args.calls, args.repeats))
        fault_rows = asyncio.run(faults(url))
        imports = {m: import_seconds(m) for m in ("sharpen.models.openai_compat", "openai")}
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    import httpx

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs (load {os.getloadavg()[0]:.1f}), "
          f"Python "
          f"{platform.python_version()}, httpx {httpx.__version__}, openai {openai.__version__}; "
          f"{args.calls} calls x {args.repeats} repeats (median)\n")
    print("| client | in flight | requests/s | client CPU ms/call | failed | CPU ms/call, each "
          "repeat |\n|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['client']} | {r['concurrency']} | {r['requests_per_s']:.0f} | "
              f"{r['cpu_ms_per_call']:.3f} | {r['failed']} | "
              f"{', '.join(map(str, r['all_cpu_ms']))} |")
    names = [n for n in fault_rows[0] if n != "fault"]
    print("\n| fault | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for f in fault_rows:
        print(f"| {f['fault']} | " + " | ".join(f[n] for n in names) + " |")
    print("\n| import (fresh interpreter, best of 3) | seconds |\n|---|---:|")
    for module, seconds in imports.items():
        print(f"| `import {module}` | {seconds:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"throughput": rows, "faults": fault_rows,
                                         "import_s": imports}, indent=1))


if __name__ == "__main__":
    main()
