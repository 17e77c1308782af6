"""Real servers on loopback for tests (helpers only, no tests here).

``start_llama_server()`` runs llama-cpp-python's OpenAI-compatible server on the embedded
SmolLM2 GGUF in a subprocess; ``llama_server_fixture()`` wraps it as a pytest fixture::

    from servers import llama_server_fixture
    llama_server = llama_server_fixture()          # module-scoped; yields the base URL

    def test_x(llama_server): ...                  # llama_server == "http://127.0.0.1:PORT/v1"
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import httpx
import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (it may be taken again later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_llama_server(
    model_path: str | Path | None = None,
    n_ctx: int = 2048,
    ready_timeout: float = 180.0,
    n_threads: int | None = None,
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start ``python -m llama_cpp.server`` on a free loopback port and wait until
    ``/v1/models`` answers. Returns ``(base_url, process)``; ``base_url`` ends in ``/v1``.
    ``n_threads`` defaults to every core this process may use. Stop it with
    :func:`stop_server`. Skips the calling test if llama-cpp-python (with its
    server extra) or the GGUF is not installed; fails with the server log if it dies."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install 'sharpen[local]')")
    pytest.importorskip("uvicorn", reason="needs llama-cpp-python[server]")
    if model_path is None:
        from sharpen.core.errors import UserError
        from sharpen.models.local import gguf_path

        try:
            model_path = gguf_path()
        except UserError as exc:
            pytest.skip(str(exc))
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path),
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(n_threads or len(os.sched_getaffinity(0))),
    ]
    return _launch(cmd, port, log, ready_timeout)


def start_llamacpp_server(
    binary: str | Path,
    slots: int,
    model_path: str | Path | None = None,
    n_ctx: int = 2048,
    n_threads: int | None = None,
    ready_timeout: float = 180.0,
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start llama.cpp's own ``llama-server`` (``binary``) with ``--parallel slots`` and
    ``n_ctx`` tokens of context per slot, as :func:`start_llama_server` starts
    llama-cpp-python's. Benchmarks only: the tests do not build llama.cpp
    (``benchmarks/build_llama_server.sh`` does)."""
    if model_path is None:
        from sharpen.models.local import gguf_path

        model_path = gguf_path()
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="llama-cpp-server-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [str(binary), "-m", str(model_path), "--host", "127.0.0.1", "--port", str(port),
           "--parallel", str(slots), "-c", str(n_ctx * slots),
           "--threads", str(n_threads or len(os.sched_getaffinity(0))), "--no-webui"]
    return _launch(cmd, port, log, ready_timeout)


def _launch(cmd: list[str], port: int, log: Any, ready_timeout: float,
            ) -> tuple[str, subprocess.Popen[bytes]]:
    """Start a model server and wait until ``/v1/models`` answers (see the callers)."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proc.log_path = log.name  # type: ignore[attr-defined]
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = Path(log.name).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"llama server exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0, trust_env=False).status_code == 200:
                return base_url, proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop_server(proc)
    raise RuntimeError(f"llama server not ready after {ready_timeout}s; log: {log.name}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server (SIGTERM, then SIGKILL after 10 s) and remove its log."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    log_path = getattr(proc, "log_path", None)
    if log_path:
        Path(log_path).unlink(missing_ok=True)


def llama_server_fixture(scope: str = "module", **kwargs: object) -> Callable[..., Iterator[str]]:
    """A pytest fixture (default module-scoped) yielding the base URL of a running llama
    server; ``kwargs`` go to :func:`start_llama_server`. Assign it to a module-level name."""

    @pytest.fixture(scope=scope)  # type: ignore[call-overload, untyped-decorator]
    def _llama_server() -> Iterator[str]:
        base_url, proc = start_llama_server(**kwargs)  # type: ignore[arg-type]
        try:
            yield base_url
        finally:
            stop_server(proc)

    return _llama_server  # type: ignore[no-any-return]


# --- A scripted OpenAI-shaped server for error paths ------------------------------------


def chat_body(
    content: str | None = "hello",
    tool_calls: list[dict[str, object]] | None = None,
    finish_reason: str = "stop",
) -> dict[str, object]:
    """A minimal OpenAI chat-completion response body."""
    message: dict[str, object] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


class ScriptedServer:
    """A real HTTP server on loopback whose answer depends on the first path segment:
    ``{url}/<scenario>/v1/chat/completions``. Scenarios:

    ``ok`` (:func:`chat_body`), ``tools`` (one valid and one malformed tool call), ``429``
    (with Retry-After), ``500``, ``503``, ``401``, ``403``, ``400`` (OpenAI error JSON),
    ``badjson`` (complete body, invalid JSON), ``cut`` (connection closed mid-body),
    ``nochoices``, ``slow`` (answers after ``slow_s``), ``reset`` (closes without answering).
    Anything else is a 404. ``requests`` records ``(path, headers, json body)`` of each POST.

    Use as a context manager; ``url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, slow_s: float = 2.0) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[tuple[str, dict[str, str], Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None,
                      length: int | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload) if length is None else length))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                outer.requests.append((self.path, dict(self.headers), body))
                scenario = self.path.strip("/").split("/")[0]

                def dump(obj: object) -> bytes:
                    return json.dumps(obj).encode()

                def err(msg: str) -> bytes:
                    return dump({"error": {"message": msg, "type": "test"}})

                if scenario == "ok":
                    self._send(200, dump(chat_body()))
                elif scenario == "tools":
                    calls: list[dict[str, object]] = [
                        {"id": "c1", "type": "function",
                         "function": {"name": "submit", "arguments": '{"code": "x = 1"}'}},
                        {"id": "c2", "type": "function",
                         "function": {"name": "submit", "arguments": '{"code": "unterminated'}},
                    ]
                    self._send(200, dump(chat_body(None, calls, "tool_calls")))
                elif scenario in ("429", "500", "503", "401", "403", "400"):
                    extra = {"Retry-After": "1"} if scenario == "429" else None
                    self._send(int(scenario), err(f"scripted {scenario}"), extra)
                elif scenario == "badjson":
                    self._send(200, b'{"choices": [{"message": {"content": "hel')
                elif scenario == "cut":
                    self._send(200, b'{"choices": [{"message"', length=5000)
                    self.close_connection = True
                elif scenario == "nochoices":
                    self._send(200, dump({"object": "chat.completion", "usage": {}}))
                elif scenario == "slow":
                    time.sleep(outer.slow_s)
                    self._send(200, dump(chat_body()))
                elif scenario == "reset":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:
                    self._send(404, err(f"no route {self.path}"))

        self.slow_s = slow_s
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def base_url(self, scenario: str) -> str:
        """The ``/v1`` base URL that plays ``scenario``."""
        return f"{self.url}/{scenario}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
