"""Standard output and standard error of a ``sif`` process, with write errors of their own.

Python's own streams raise a bare ``OSError`` when a write fails: ``sif dupes
> /dev/full`` ended with "no space left on device" and no word of where, and
``sif --help > /dev/full`` (click writes the help before any command's
handlers run) with a traceback. :func:`install` replaces both streams, in
sif's own process only, by text streams over :class:`Stream`:

- on standard output, a failed write raises :class:`OutputError`, which names
  it ("standard output: no space left on device") and ends the run with exit
  3 like any other fatal error; what follows is dropped, so the interpreter's
  last flush does not fail a second time. A closed reader is still a
  ``BrokenPipeError``, which stops quietly (``sif dupes | head``);
- on standard error, a failed write is dropped: there is nowhere left to say
  it, and the exit status still tells what happened (coreutils do the same).

Both wait on a descriptor the parent left non-blocking (``EAGAIN``) instead of
failing. A process started with standard input, output or error closed gets
``/dev/null`` on that descriptor, so that no file sif opens (the index's
database) takes its number and receives what is meant for the stream. Reading
that standard input (``fuzzysum -``) or writing a report to that standard
output then fails with "standard input is closed" / "standard output is
closed"; standard error is dropped.
"""

from __future__ import annotations

import errno
import io
import os
import select
import sys
import time
from typing import Any

from sif import outfile
from sif.errors import SifError

BUFFER = 1 << 16
"""Bytes buffered on standard output (a report of 4,129 groups was 21,455 writes
unbuffered, as under ``python -u``)."""


class OutputError(SifError):
    """Standard output cannot be written (a full disk, an I/O error), or a standard
    stream the process was started without is used."""


class Stream(io.RawIOBase):
    """Descriptor ``fd`` as a raw binary stream, which never closes it."""

    def __init__(self, fd: int, name: str, *, strict: bool) -> None:
        super().__init__()
        self._fd = fd
        self.name = name
        self._strict = strict
        self.failed = False  # from now on every write is dropped
        self.broken = False  # the reader went away (EPIPE)
        self.deadline: float | None = None  # a write not begun by then: BlockingIOError

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def writable(self) -> bool:
        return True

    def close(self) -> None:  # the descriptor is the process's, not this object's
        if not self.closed:
            self.flush()
        super().close()

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        size = len(memoryview(data))
        if self.failed:
            return size
        if self.deadline is not None:
            # Written only as the reader takes it: at most PIPE_BUF bytes a write (a pipe
            # that select calls writable holds that many), none once the time is up.
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([], [self._fd], [], left)[1]:
                raise BlockingIOError(errno.EAGAIN, "standard output is not being read")
            data = memoryview(data)[: select.PIPE_BUF]
        while True:
            try:
                return os.write(self._fd, data)
            except BlockingIOError:
                if self.deadline is not None:
                    raise
                select.select([], [self._fd], [])
            except BrokenPipeError:
                self.broken = True
                if self._strict:
                    raise
                self.failed = True
                return size
            except OSError as exc:
                self.failed = True
                if not self._strict:
                    return size
                raise OutputError(f"{self.name}: {outfile.cause_of(exc)}") from exc


class Closed(io.RawIOBase):
    """A standard stream of a process started without it: reading or writing fails once."""

    failed = False

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OutputError(f"{self.name} is closed")

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.failed:  # said once; the interpreter's last flush drops the rest
            return len(memoryview(data))
        self.failed = True
        raise OutputError(f"{self.name} is closed")


def flush_within(seconds: float) -> None:
    """Flush standard output if its reader takes it within ``seconds``; else leave the rest
    in the buffer (the interpreter's last flush writes it, waiting as long as it must).
    Dropped if it cannot be written (the reader went away, a full disk)."""
    raw = _raw(sys.stdout)
    if raw is not None:
        raw.deadline = time.monotonic() + seconds
    try:
        sys.stdout.flush()
    except BlockingIOError:
        pass  # a reader that stalled: what is left goes out at the exit, as before
    except Exception:
        abandon_output()
    finally:
        if raw is not None:
            raw.deadline = None


def abandon_output() -> None:
    """Drop what standard output still buffers, and whatever is written to it from now on:
    the run is being interrupted, and a reader that stalled must not hold it up."""
    raw = _raw(sys.stdout)
    if raw is not None:
        raw.failed = True


def output_broken() -> bool:
    """Whether standard output's reader went away (a closed pipe) during this run."""
    raw = _raw(sys.stdout)
    return raw is not None and raw.broken


def _raw(stream: Any) -> Stream | None:
    raw = getattr(getattr(stream, "buffer", None), "raw", None)
    return raw if isinstance(raw, Stream) else None


def install() -> None:
    """The standard streams of this process as the module says; once, at its start."""
    closed = _reserve_standard_descriptors()
    outfile.CLOSED_AT_START.update(closed)
    if 0 in closed and sys.stdin is None:
        sys.stdin = io.TextIOWrapper(
            io.BufferedReader(Closed("standard input")), "utf-8", "surrogateescape"
        )
    if 1 in closed:
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(Closed("standard output")), "utf-8", "surrogateescape"
        )
    else:
        # UTF-8 whatever Python's encoding of it (PYTHONIOENCODING=ascii, a Latin-1
        # locale), as the reports write to its buffer: explain's `│` failed there; a name
        # that is not UTF-8 goes as its bytes.
        sys.stdout = _wrap(
            sys.stdout,
            "standard output",
            strict=True,
            buffer=BUFFER,
            encoding=("utf-8", "surrogateescape"),
        )
    if 2 in closed and sys.stderr is None:  # now /dev/null: warnings go nowhere, quietly
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
        )
    sys.stderr = _wrap(sys.stderr, "standard error", strict=False, buffer=io.DEFAULT_BUFFER_SIZE)


def _reserve_standard_descriptors() -> list[int]:
    """``/dev/null`` on each of descriptors 0-2 that is closed; those descriptors."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
            try:
                got = os.open(os.devnull, os.O_RDWR)
            except OSError:
                break
            if got != fd:  # a lower one is open after all: leave the numbers alone
                os.close(got)
                break
    return closed


def _wrap(
    stream: Any,
    name: str,
    *,
    strict: bool,
    buffer: int,
    encoding: tuple[str, str] | None = None,
) -> Any:
    """``stream`` written through a :class:`Stream`; ``encoding``: its (encoding, errors)
    instead of the stream's own."""
    if stream is None or not isinstance(stream, io.TextIOWrapper):
        return stream
    try:
        stream.flush()
        fd = stream.fileno()
    except (OSError, ValueError):
        return stream
    raw = Stream(fd, name, strict=strict)
    return io.TextIOWrapper(
        io.BufferedWriter(raw, buffer),
        encoding=encoding[0] if encoding else stream.encoding,
        errors=encoding[1] if encoding else stream.errors,
        # Flushed at each line on a terminal (under `python -u` too, which made Python's
        # own unbuffered) and on standard error (as Python has it since 3.9).
        line_buffering=stream.line_buffering or not strict or os.isatty(fd),
    )
