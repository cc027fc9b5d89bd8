"""Shared helpers for tests: real files in temporary trees."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path


class Hangs(Exception):
    """The block ran out of time (not an OSError: sif must not take it for a file's error)."""


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the test run) if the block takes longer than ``seconds``."""

    def expired(signum: int, frame: object) -> None:
        raise Hangs(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def threads_switched_often() -> Iterator[None]:
    """Threads switched as often as the interpreter can (a race between two threads of
    this process shows up in most runs instead of few)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def write(path: Path | bytes, data: bytes) -> None:
    """Create ``path`` (a ``Path``, or raw bytes for names that are not UTF-8) with ``data``."""
    raw = os.fsencode(path)
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    with open(raw, "wb") as f:
        f.write(data)
