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
import io
import os
import re
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


_DESCRIPTOR = re.compile(r"/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)")
_NAMED = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def descriptor_of(path: str) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/3``), or ``None``."""
    norm = os.path.normpath(path)
    if norm in _NAMED:
        return _NAMED[norm]
    m = _DESCRIPTOR.fullmatch(norm)
    if m is None or (m.group(1) is not None and int(m.group(1)) != os.getpid()):
        return None
    return int(m.group(2))


class _File(io.FileIO):
    """The file written: a failed write or close is an :class:`OutputFileError` naming the
    path given (and only those: an ``OSError`` of the code making the report passes as it
    is)."""

    shown = ""

    def write(self, data: Any, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise _failed(self.shown, exc) from exc

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:
            raise _failed(self.shown, exc) from exc


def _open(path: str) -> tuple[int, bool, bool]:
    """``path`` opened for writing as ``>`` would: (descriptor, created, truncated)."""
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY
    fd = descriptor_of(path)
    if fd is not None:  # bash's rule: the descriptor itself, not the file reopened
        return os.dup(fd), False, False
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is None:
        try:
            return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666), True, False
        except FileExistsError:  # a dangling symbolic link: its target is created, as by `>`
            return os.open(path, flags | os.O_CREAT | os.O_TRUNC, 0o666), False, True
    if stat.S_ISREG(st.st_mode):
        return os.open(path, flags | os.O_TRUNC), False, True
    return os.open(path, flags), False, False  # a FIFO, a device: written into


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
    std = descriptor_of(path)
    if std in (1, 2):  # sif's own stream: what it does on a failure or a closed pipe
        stream = sys.stdout if std == 1 else sys.stderr
        if stream is not None:
            stream.flush()
            yield stream if text else stream.buffer
            stream.flush()
            return
    fd, created, truncated = -1, False, False
    raw: _File | None = None
    out: Any = None
    mine: os.stat_result | None = None
    try:
        try:
            fd, created, truncated = _open(path)
        except OSError as exc:
            raise _failed(path, exc) from exc
        mine = os.fstat(fd)
        raw = _File(fd, "wb")
        raw.shown = path
        out = io.BufferedWriter(raw)
        if text:
            out = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape")
        yield out
        out.close()  # flushes: a failure here is a write error, named
    except BaseException:
        # Nothing more is written: what is buffered is dropped (a flush could block on a
        # stalled FIFO, or fail and hide the error on its way up).
        if truncated:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        if raw is not None:
            with contextlib.suppress(Exception):
                io.FileIO.close(raw)
            with contextlib.suppress(Exception):
                out.close()  # its file closed: nothing to flush, now or when collected
        elif fd >= 0:
            os.close(fd)
        if created and mine is not None:
            with contextlib.suppress(OSError):
                if os.path.samestat(os.lstat(path), mine):  # still the file this run made
                    os.unlink(path)
        raise
