"""Writing a file the user asked for (``-o REPORT``, an anchor set): whole or not at all.

The file is written beside its final name under a temporary one (opened with
``O_EXCL``: never an existing file), then renamed over it. An existing file
there must be writable, as for ``open()``, and keeps its permissions; a
symbolic link is written through to its target, as by the shell's ``>``; a
path that is not a regular file (``/dev/stdout``, a FIFO) is written directly. When anything
fails on the way (a full disk, Ctrl-C, an error while the report is made),
the temporary file, which sif created, is removed and a file already at
``path`` stays as it was: no empty or cut report is left to be mistaken for
a whole one. A write error is an :class:`OutputFileError` naming ``path``
("report.html: no space left on device"), which the CLI prints as one line
with exit 3.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
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


class _File(io.FileIO):
    """The temporary file: a failed write is an :class:`OutputFileError` naming the final path
    (and only a write: an ``OSError`` of the code making the report passes as it is)."""

    final = ""

    def write(self, data: Any, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise _failed(self.final, exc) from exc


def _failed(path: str, exc: OSError) -> OutputFileError:
    return OutputFileError(f"{display_path(path)}: {cause_of(exc)}")


@contextlib.contextmanager
def written(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file whose content becomes ``path`` when the block ends without error."""
    final = os.fspath(path)
    try:
        try:
            old = os.stat(final)
        except FileNotFoundError:
            old = None
        if old is not None and not stat.S_ISREG(old.st_mode):
            fd = os.open(final, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY)  # /dev/stdout, a FIFO
            tmp = None
        else:
            if old is not None and not os.access(final, os.W_OK):  # as open() would refuse it
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            target = os.path.realpath(final)  # a symbolic link is written through, as by `>`
            directory, name = os.path.split(target)
            tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise _failed(final, exc) from exc
    try:
        raw = _File(fd, "wb")
        raw.final = final
        if old is not None and tmp is not None:  # the file replaced keeps its permissions
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
        with io.BufferedWriter(raw) as f:
            yield f
        if tmp is not None:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise _failed(final, exc) from exc
    except BaseException:
        raw.close()
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise


@contextlib.contextmanager
def written_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """:func:`written` as UTF-8 text."""
    with written(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        try:
            yield text
            text.flush()
        finally:
            text.detach()  # the binary file is written()'s to close
