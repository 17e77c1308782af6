"""A minimal HTTP/1.1 server on loopback for the external agent's OpenAI-compatible bridge.

Why not uvicorn: one server per episode, many episodes in one event loop, and uvicorn's
``serve`` installs its own SIGINT/SIGTERM handlers, which would take Ctrl-C away from the
runner. This server needs no extra package and touches no signal: it reads requests with a
``Content-Length`` or chunked body, hands each to an async handler and writes its
:class:`Response` (always with a ``Content-Length``, streams included — an SSE body is
complete before it is sent), keeping connections alive until the client closes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway"}
MAX_BODY = 64 * 1024 * 1024
"""Largest request body accepted (a long conversation is a few MB at most)."""


@dataclass
class Request:
    """One HTTP request."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (``ValueError`` when it is not)."""
        return json.loads(self.body or b"null")


@dataclass
class Response:
    """One HTTP response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(cls, value: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(value).encode())


Handler = Callable[[Request], Awaitable[Response]]


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readline()
    length = int(headers.get("content-length", "0"))
    if length > MAX_BODY:
        raise ValueError(f"request body of {length} bytes is over {MAX_BODY}")
    return await reader.readexactly(length) if length else b""


async def _connection(handler: Handler, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            line = await reader.readline()
            if not line.strip():
                break
            method, target, _version = line.decode("latin-1").split(" ", 2)
            headers: dict[str, str] = {}
            while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                key, _, value = h.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            body = await _read_body(reader, headers)
            response = await handler(Request(method, target.split("?", 1)[0], headers, body))
            head = [f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Status')}",
                    f"Content-Type: {response.content_type}",
                    f"Content-Length: {len(response.body)}",
                    *(f"{k}: {v}" for k, v in response.headers.items())]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                break
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass  # a client that hung up or spoke garbage: drop the connection
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    """Serve ``handler`` on ``127.0.0.1`` at a free port while the context is open; yields
    the base URL (``http://127.0.0.1:PORT``)."""
    server = await asyncio.start_server(
        lambda r, w: _connection(handler, r, w), host="127.0.0.1", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        # Python 3.12+ waits for open connections in wait_closed; a client that keeps one
        # alive (the agent is already gone) must not hold the episode.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2.0)
