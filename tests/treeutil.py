"""Shared helpers for tests: real files in temporary trees."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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


def segment_content(index: Path) -> tuple[list[tuple[int, int]], list[Any], list[Any]]:
    """What the segments of the index at ``index`` hold, whatever their cut: every row
    (value, file id), file record and path, each sorted."""
    from sif.index.segments import Segment

    rows: list[tuple[int, int]] = []
    recs: list[Any] = []
    paths: list[Any] = []
    for name in sorted(os.listdir(index / "segments")):
        seg = Segment(str(index / "segments" / name))
        values, ids = seg.all_rows()
        rows += zip(values.tolist(), ids.tolist(), strict=True)
        recs += seg.files.tolist()
        paths += [seg.path(i) for i in range(len(seg.files))]
        seg.close()
    return sorted(rows), sorted(recs), sorted(paths)


def fill(where: Path, name: str = "filler", leave: int = 0) -> Path:
    """Take every free block of the file system at ``where`` (a new file ``name``), then
    give ``leave`` bytes of it back; the file, whose truncation frees the rest."""
    import errno

    path = where / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    if leave:
        os.truncate(path, max(0, path.stat().st_size - leave))
    return path


#: A line of a child's ``python -c`` code printing its own peak RSS in MiB: VmHWM, not
#: ``ru_maxrss``, which keeps the parent's peak (pytest's) across fork and exec.
PRINT_PEAK_MIB = (
    "print([int(x.split()[1]) // 1024 for x in open('/proc/self/status')"
    " if x.startswith('VmHWM')][0])\n"
)
