"""The archive members that ``sif compare``'s pass 1 scores: held in memory up to a
budget, the others copied to temporary files.

Pass 1 scores a ``changed`` member against the other side's file at its
path. It held the bytes of every such member at once (one read of each
archive), and scored them by their whole window sets, 9 bytes a byte: two
tarballs holding two versions of a 100 MB file took 3.6 GB and 27 s. Now a
member is held in memory while the members held total under
:data:`MEMBER_MEMORY` and its pair is small (under
:data:`sif.compare.large.EXACT_BYTES` of sets); the others are copied, a
megabyte at a time, into a private temporary directory (under ``TMPDIR``,
removed when the pass ends, :meth:`Members.close`), and scored as files on
disk are: a large pair a step at a time, on a sample
(:mod:`sif.compare.large`). A member that cannot be copied (a full disk) or
that reads other than its listed size is a warning, and its pair gets no
score.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sif.compare.large import Listed
from sif.events import ScanWarning, WarningSink

#: Bytes of members pass 1 holds in memory at once; beyond, they wait in temporary files.
MEMBER_MEMORY = 64 << 20
#: The temporary directory of a run's copied members begins so.
SPOOL_PREFIX = "sif-compare-"
#: Bytes copied at a time.
COPY_BYTES = 1 << 20


class Members:
    """The members read for pass 1, by their path (``ARCHIVE!/MEMBER``): bytes in memory,
    or a temporary file of this run as a :data:`sif.compare.large.Listed`."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.files: dict[str, Listed] = {}
        self.held = 0
        self.directory: str | None = None

    def get(self, path: str) -> bytes | Listed | None:
        """The member's bytes, its copy on disk, or ``None`` (not read: warned)."""
        found = self.data.get(path)
        return found if found is not None else self.files.get(path)

    def close(self) -> None:
        """Remove the temporary directory this run made, with the copies in it."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> Members:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def keep(self, e: Any, listed: int, to_disk: bool, on_warning: WarningSink) -> None:
        """The entry ``e`` of listed size ``listed``, in memory or (``to_disk``, or past
        :data:`MEMBER_MEMORY`) in a temporary file."""
        if not to_disk and self.held + listed <= MEMBER_MEMORY:
            data = e.read()
            if _same_size(e.path, listed, len(data), on_warning):
                self.data[e.path] = data
                self.held += len(data)
            return
        self._copy(e, listed, on_warning)

    def _copy(self, e: Any, listed: int, on_warning: WarningSink) -> None:
        try:
            if self.directory is None:
                self.directory = tempfile.mkdtemp(prefix=SPOOL_PREFIX)
            fd, path = tempfile.mkstemp(dir=self.directory)
        except OSError as exc:
            on_warning(ScanWarning(e.path, _no_room(exc, self.directory)))
            return
        written = 0
        try:
            with os.fdopen(fd, "wb") as out, e.open() as src:
                while True:
                    try:
                        chunk = src.read(COPY_BYTES)
                    except OSError as exc:  # the archive, not the copy
                        on_warning(ScanWarning(e.path, exc.strerror or str(exc)))
                        os.unlink(path)
                        return
                    if not chunk:
                        break
                    out.write(chunk)
                    written += len(chunk)
            st = os.stat(path)
        except OSError as exc:
            on_warning(ScanWarning(e.path, _no_room(exc, self.directory)))
            os.unlink(path)  # this run's copy, cut short
            return
        if not _same_size(e.path, listed, written, on_warning):
            os.unlink(path)
            return
        self.files[e.path] = (path, (st.st_dev, st.st_ino), written)


def _no_room(exc: OSError, directory: str | None) -> str:
    where = directory or exc.filename or tempfile.gettempdir()
    return f"cannot be copied for comparison into {where}: {exc.strerror or exc}"


def _same_size(path: str, listed: int, read: int, on_warning: WarningSink) -> bool:
    """Whether a member read ``read`` bytes where its listing said ``listed``; if not, a
    warning: the archive changed during the run, or its stream ended early."""
    if read == listed:
        return True
    on_warning(
        ScanWarning(path, f"changed during the run ({read:,} bytes read, {listed:,} listed)")
    )
    return False


def read_members(wanted: Iterable[tuple[str, str, int, bool]], on_warning: WarningSink) -> Members:
    """The members ``wanted`` (archive, member path, listed size, whether to copy it to
    disk whatever its size), one read of each archive. The caller closes the result."""
    from sif.content import ContentOptions, entries

    by_archive: dict[str, dict[str, tuple[int, bool]]] = defaultdict(dict)
    for archive, path, size, to_disk in wanted:
        by_archive[archive][path] = (size, to_disk)
    out = Members()
    try:
        for archive, members in by_archive.items():
            options = ContentOptions(normalize="unpack")
            for e in entries(archive, options=options, on_warning=on_warning):
                if e.path in members:
                    out.keep(e, *members[e.path], on_warning)
    except BaseException:
        out.close()
        raise
    return out
