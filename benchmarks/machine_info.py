"""What every benchmark writes about the machine it ran on (imported by the scripts in this
folder, which run as ``python benchmarks/NAME.py`` and so find it on ``sys.path``)."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bf16_flags() -> str:
    """The CPU's native bfloat16 flags (``avx512_bf16``, ``amx_bf16``) from /proc/cpuinfo, comma
    separated; ``none`` without them, ``unknown`` where the file cannot be read."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return "unknown"
    return ", ".join(f for f in ("avx512_bf16", "amx_bf16") if f in flags) or "none"


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 0


def version(pkg: str) -> str:
    """Installed version of ``pkg``, or ``"not installed"``."""
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"
