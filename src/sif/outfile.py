"""Writing a file the user asked for (``-o REPORT``, an anchor set), as the shell's ``>`` would,
and no cut report left behind.

The path is opened as ``>`` opens it: an existing file is truncated and
written in place (its owner, mode and other hard links stay; a symbolic link
is written through), a new one is created, a FIFO or a device
(``/dev/null``, a terminal) is written into. ``/dev/stdout``,
``/dev/stderr`` and ``/dev/fd/N`` (``/proc/self/fd/N``) are sif's own
standard output, standard error and descriptor ``N``, as in bash: written
where they point, appended to a ``>>`` log, never reopened or truncated.

When the run fails before the report is whole (a full disk, Ctrl-C, an error
while the report is made), what is still buffered is dropped, not written,
and the error on its way up is the one raised: a file this run created is
removed (sif made it), and an existing file it was writing is left empty,
so that no cut report can be taken for a whole one. A write error is an
:class:`OutputFileError` naming the path ("report.html: no space left on
device"), which the CLI prints as one line with exit 3.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import re
import select
import stat
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO, TextIO

from sif.errors import SifError
from sif.events import display_path


class OutputFileError(SifError):
    """A file sif was asked to write could not be written."""


def cause_of(exc: OSError) -> str:
    """The cause of ``exc`` for an error line."""
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    return exc.strerror or str(exc)


def _failed(path: str, exc: OSError) -> OutputFileError:
    return OutputFileError(f"{display_path(path)}: {cause_of(exc)}")


_DESCRIPTOR = re.compile(r"/(?:dev/fd|proc/self/fd|proc/thread-self/fd|proc/(\d+)/fd)/(\d+)")
_NAMED = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_STREAMS = {0: "standard input", 1: "standard output", 2: "standard error"}

CLOSED_AT_START: set[int] = set()
"""Standard descriptors the process was started without (``/dev/null`` holds their numbers:
:mod:`sif.cli.streams`); ``-o /dev/stderr`` there is an error, not a silent ``/dev/null``."""


def descriptor_of(path: str) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/3``, however spelt: ``//dev/stdout``, ``../dev/stdout``), or ``None``."""
    norm = os.path.abspath(path)
    if norm.startswith("//"):  # POSIX keeps a leading "//"; Linux reads it as "/"
        norm = "/" + norm.lstrip("/")
    if norm in _NAMED:
        return _NAMED[norm]
    m = _DESCRIPTOR.fullmatch(norm)
    if m is None or (m.group(1) is not None and int(m.group(1)) != os.getpid()):
        return None
    return int(m.group(2))


def check_descriptor(path: str, fd: int) -> str | None:
    """Why ``path`` (descriptor ``fd``) cannot take a report, or ``None``: closed, or not
    open for writing."""
    if fd in CLOSED_AT_START:
        return f"{_STREAMS[fd]} is closed"
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OverflowError:  # /dev/fd/2147483648
        return "not an open descriptor"
    except OSError as exc:
        return "not an open descriptor" if exc.errno == errno.EBADF else cause_of(exc)
    if flags & os.O_ACCMODE == os.O_RDONLY:
        return "not open for writing"
    return None


class _File(io.FileIO):
    """The file written: a failed write or close is an :class:`OutputFileError` naming the
    path given (and only those: an ``OSError`` of the code making the report passes as it
    is). A closed pipe stays a ``BrokenPipeError`` (a reader that went away: sif stops
    quietly, as on standard output); a descriptor left non-blocking is waited on."""

    shown = ""

    def write(self, data: Any, /) -> int:
        while True:
            try:
                done = super().write(data)
            except BrokenPipeError:
                raise
            except OSError as exc:
                raise _failed(self.shown, exc) from exc
            if done is not None:
                return done
            select.select([], [self.fileno()], [])  # EAGAIN

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:
            raise _failed(self.shown, exc) from exc


class _Opened:
    """``path`` opened for writing as ``>`` would open it (see :func:`_open`)."""

    def __init__(self, fd: int, made: str | None = None, truncated: bool = False) -> None:
        self.fd = fd
        self.made = made  # the path of the file this run created (removed on a failure)
        self.truncated = truncated  # an existing regular file (left empty on a failure)


def _open(path: str) -> _Opened:
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY
    fd = descriptor_of(path)
    if fd is not None:  # bash's rule: the descriptor itself, not the file reopened
        why = check_descriptor(path, fd)
        if why is not None:
            raise OutputFileError(f"{display_path(path)}: {why}")
        return _Opened(os.dup(fd))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        # A new file; through a dangling symbolic link, its target (as `>` makes it).
        made = os.path.realpath(path) if os.path.islink(path) else path
        return _Opened(os.open(made, flags | os.O_CREAT | os.O_EXCL, 0o666), made=made)
    if stat.S_ISREG(st.st_mode):
        return _Opened(os.open(path, flags | os.O_TRUNC), truncated=True)
    return _Opened(os.open(path, flags))  # a FIFO, a device: written into


@contextlib.contextmanager
def written(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """``path`` as a buffered binary file, opened as the module says, closed at the end."""
    with _output(os.fspath(path), text=False) as out:
        yield out


@contextlib.contextmanager
def written_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """:func:`written` as UTF-8 text (names that are not UTF-8 as their bytes, as on stdout)."""
    with _output(os.fspath(path), text=True) as out:
        yield out


@contextlib.contextmanager
def _output(path: str, text: bool) -> Iterator[Any]:
    if descriptor_of(path) == 1 and 1 not in CLOSED_AT_START and sys.stdout is not None:
        # sif's own standard output: its order with what else it printed, and its rules
        # for a full disk and a closed pipe.
        sys.stdout.flush()
        yield sys.stdout if text else sys.stdout.buffer
        sys.stdout.flush()
        return
    if descriptor_of(path) == 2 and sys.stderr is not None:
        sys.stderr.flush()  # what it printed first comes first
    opened: _Opened | None = None
    keep = -1  # a second descriptor of a regular file: to empty it after any close
    mine: os.stat_result | None = None
    raw: _File | None = None
    out: Any = None
    try:
        try:
            opened = _open(path)
        except OSError as exc:
            raise _failed(path, exc) from exc
        try:
            mine = os.fstat(opened.fd)
            if opened.made is not None or opened.truncated:
                keep = os.dup(opened.fd)
        except OSError as exc:  # out of descriptors: the file it made still goes
            raise _failed(path, exc) from exc
        raw = _File(opened.fd, "wb")
        raw.shown = path
        out = io.BufferedWriter(raw)
        if text:
            out = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape")
        yield out
        out.flush()  # a failure here is a write error, named, with the file still open
        out.close()
    except BaseException:
        # Nothing more is written: what is buffered is dropped (a flush could block on a
        # stalled FIFO, or fail and hide the error on its way up).
        if raw is not None:
            with contextlib.suppress(Exception):
                io.FileIO.close(raw)
            with contextlib.suppress(Exception):
                out.close()  # its file closed: nothing to flush, now or when collected
        elif opened is not None:
            os.close(opened.fd)
        if keep >= 0 and opened is not None and opened.truncated:
            with contextlib.suppress(OSError):
                os.ftruncate(keep, 0)
        if opened is not None and opened.made is not None and mine is not None:
            with contextlib.suppress(OSError):
                if os.path.samestat(os.lstat(opened.made), mine):  # still the file it made
                    os.unlink(opened.made)
        raise
    finally:
        if keep >= 0:
            os.close(keep)
