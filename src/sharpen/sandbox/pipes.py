"""A command's pipes: its output drained up to a cap (the rest read and dropped, so the command
never blocks on a full pipe), its input fed and closed; for asyncio streams (a freshly spawned
command) and for raw pipe descriptors (a command forked by the fork server)."""

from __future__ import annotations

import asyncio
import contextlib
import os


def _keep(kept: bytearray, chunk: bytes, limit: int) -> bool:
    """Append what fits of ``chunk`` under ``limit``; True if some of it did not fit."""
    room = limit - len(kept)
    if room > 0:
        kept += chunk[:room]
    return len(chunk) > room


async def drain(stream: asyncio.StreamReader | None, limit: int) -> tuple[bytes, bool]:
    """Read until EOF, keeping the first ``limit`` bytes and discarding the rest."""
    if stream is None:
        return b"", False
    kept = bytearray()
    truncated = False
    while chunk := await stream.read(65536):
        truncated = _keep(kept, chunk, limit) or truncated
    return bytes(kept), truncated


async def _ready(fd: int, writing: bool) -> None:
    """Wait until the non-blocking ``fd`` is readable (or writable)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    add, remove = ((loop.add_writer, loop.remove_writer) if writing
                   else (loop.add_reader, loop.remove_reader))

    def wake() -> None:
        if not fut.done():
            fut.set_result(None)
    add(fd, wake)
    try:
        await fut
    finally:
        remove(fd)


async def drain_fd(fd: int, limit: int) -> tuple[bytes, bool]:
    """:func:`drain` for a raw pipe descriptor (closed at the end)."""
    os.set_blocking(fd, False)
    kept = bytearray()
    truncated = False
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                await _ready(fd, writing=False)
                continue
            if not chunk:
                return bytes(kept), truncated
            truncated = _keep(kept, chunk, limit) or truncated
    finally:
        os.close(fd)


async def feed_fd(fd: int, data: bytes) -> None:
    """:func:`feed` for a raw pipe descriptor (closed at the end)."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                await _ready(fd, writing=True)
    except OSError:  # the command exited without reading it all
        pass
    finally:
        os.close(fd)


async def feed(pipe: asyncio.StreamWriter | None, data: bytes | None) -> None:
    """Write ``data`` to ``pipe`` and close it; a command that exits without reading it all
    is no error."""
    if pipe is None:
        return
    try:
        if data:
            pipe.write(data)
            await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            pipe.close()
