"""A fault-injecting HTTP proxy on loopback, for tests of infra-error handling.

It forwards requests to an upstream OpenAI-compatible server and, on a deterministic
schedule, answers ``POST .../chat/completions`` with a fault instead: a dropped connection,
429, 500, a response slower than the client's timeout, or a truncated body. Every injected
fault is logged so a test can account for each one.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass, field

import httpx

FAULTS = ("drop", "429", "500", "slow", "truncated")


@dataclass
class FaultProxy:
    upstream: str  # e.g. http://127.0.0.1:8001
    schedule: list[str]  # cycled: "ok" or one of FAULTS
    slow_seconds: float = 6.0
    port: int = 0
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._cycle = itertools.cycle(self.schedule)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FaultProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def set_schedule(self, schedule: list[str]) -> None:
        with self._lock:
            self._cycle = itertools.cycle(schedule)

    def injected(self) -> list[str]:
        with self._lock:
            return [f for f in self.log if f != "ok"]

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._client = httpx.AsyncClient(base_url=self.upstream, timeout=300)
        self._ready.set()
        self._loop.run_forever()

    def _next_fault(self) -> str:
        with self._lock:
            fault = next(self._cycle)
            self.log.append(fault)
            return fault

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
            )
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            fault = "ok"
            if method == "POST" and path.endswith("/chat/completions"):
                fault = self._next_fault()
            if fault == "drop":
                return
            if fault in ("429", "500"):
                payload = b'{"error": {"message": "injected fault"}}'
                reason = "Too Many Requests" if fault == "429" else "Internal Server Error"
                writer.write(
                    f"HTTP/1.1 {fault} {reason}\r\nContent-Type: application/json\r\n"
                    f"Retry-After: 0\r\nContent-Length: {len(payload)}\r\n"
                    "Connection: close\r\n\r\n".encode() + payload
                )
                await writer.drain()
                return
            if fault == "slow":  # answer nothing until the client has given up
                await asyncio.sleep(self.slow_seconds)
                return
            upstream = await self._client.request(
                method, path, content=body,
                headers={"content-type": headers.get("content-type", "application/json")},
            )
            data = upstream.content
            sent = data[: len(data) // 2] if fault == "truncated" else data
            writer.write(
                f"HTTP/1.1 {upstream.status_code} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + sent
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
