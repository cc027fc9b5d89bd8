"""The candidates of the block rounds as columns, and the one careful read of a block.

Kept apart from :mod:`sif.exact.rounds` (which re-exports :class:`_Table`
and :data:`CHANGED`): this module says how a block is read and when a file
counts as changed; the rounds decide what to read and how to group it.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from stat import S_ISREG
from typing import Any

from sif.fileio import open_regular
from sif.records import RecordColumns

CHANGED = "changed while it was read; skipped"
"""The warning for a file whose size, mtime or ctime moved while sif read it."""


_NOATIME = getattr(os, "O_NOATIME", 0)
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
"""The open of a fast read: :func:`sif.fileio.open_regular`'s flags."""
_OPEN_FLAGS = (_FLAGS | _NOATIME | os.O_NOFOLLOW, _FLAGS | _NOATIME)
"""By the candidate's ``symlink`` column: a name that was no link is opened ``O_NOFOLLOW``;
``O_NOATIME`` (reading leaves the access time alone) where the kernel allows it."""
_OPEN_FLAGS_ATIME = (_FLAGS | os.O_NOFOLLOW, _FLAGS)
"""The same without ``O_NOATIME``, which only a file's owner (or root) may ask for."""


try:
    from sif.exact._firstc import take as _c_take  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # no compiler at install time: map over the columns
    _c_take = None


def _take(column: array[int], indices: Sequence[int]) -> array[int]:
    """``column[i]`` for each of ``indices``, as an array of the column's type.

    The C gather (``_firstc.take``) copies the items' bytes: ~6 ns a row against
    ~130-240 ns for ``map(column.__getitem__, indices)``, which makes and reads
    back an int a row (a worker's shares of /usr's 101 k candidates: 7 columns).
    """
    out = array(column.typecode)
    if _c_take is None:
        out.extend(map(column.__getitem__, indices))
    else:
        out.frombytes(_c_take(column, indices))
    return out


def _take_list(column: list[str], indices: Sequence[int]) -> list[str]:
    """``column[i]`` for each of ``indices``, as a list."""
    if _c_take is None:
        return list(map(column.__getitem__, indices))
    return _c_take(column, indices)


class _Table:
    """The candidates a refiner works on, column by column; a candidate is an index.

    Paths are kept as (directory, name) like :class:`RecordColumns` and joined
    only for a read: a table of 10^5 candidates stays a few MB, to keep and
    to send to a worker. The table shares the walk's list of directories
    (no copy); a pickled table (a worker's share) carries only the
    directories it uses.
    """

    __slots__ = (
        "ctime_ns",
        "dev",
        "dir_of",
        "dirs",
        "flags",
        "ino",
        "mtime_ns",
        "names",
        "size",
        "symlink",
    )

    def __init__(self, cols: RecordColumns, indices: Sequence[int]) -> None:
        self.flags = _OPEN_FLAGS
        # One C loop a column (a gather, or map over the walk's arrays): no Python per candidate.
        self.dirs: list[str] = cols.dirs
        self.dir_of = _take(cols.dir_of, indices)
        self.names = _take_list(cols.names, indices)
        self.dev = _take(cols.dev, indices)
        self.ino = _take(cols.ino, indices)
        self.size = _take(cols.size, indices)
        self.mtime_ns = _take(cols.mtime_ns, indices)
        self.ctime_ns = _take(cols.ctime_ns, indices)
        self.symlink = _take(cols.symlink, indices)

    @classmethod
    def over(cls, cols: RecordColumns) -> _Table:
        """A table that is the walk's columns themselves (no copy): its rows are the
        walk's indices. For the refiner of this process; a worker gets a copy."""
        table = cls.__new__(cls)
        table.flags = _OPEN_FLAGS
        table.dirs, table.dir_of, table.names = cols.dirs, cols.dir_of, cols.names
        table.dev, table.ino, table.size = cols.dev, cols.ino, cols.size
        table.mtime_ns, table.ctime_ns = cols.mtime_ns, cols.ctime_ns
        table.symlink = cols.symlink
        return table

    def __getstate__(self) -> tuple[Any, ...]:
        used = sorted(set(self.dir_of))
        renumber = dict(zip(used, range(len(used)), strict=True))
        dirs = [self.dirs[d] for d in used]
        dir_of = array("I", map(renumber.__getitem__, self.dir_of))
        cols = (self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns, self.symlink)
        return (dirs, dir_of, self.names, *cols)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        (self.dirs, self.dir_of, self.names, self.dev, self.ino, self.size) = state[:6]
        self.mtime_ns, self.ctime_ns, self.symlink = state[6:]
        self.flags = _OPEN_FLAGS

    def __len__(self) -> int:
        return len(self.names)

    def path(self, i: int) -> str:
        return self.dirs[self.dir_of[i]] + self.names[i]

    def read(
        self, i: int, offset: int, length: int, into: bytearray | None = None, verify: bool = True
    ) -> bytes | bytearray | str:
        """``length`` bytes at ``offset`` of candidate ``i``, or why it must be dropped.

        One ``open``, ``fstat``, ``pread``, ``fstat`` and ``close``. The open
        takes only the regular file the walker saw (same device and inode,
        checked before the read; no FIFO, which would block; no symlink where
        the walk met none), and the ``fstat`` after the read proves it
        unchanged (size, mtime and ctime), so a file changed or replaced
        meanwhile is never grouped. With ``into`` (a buffer of ``length``
        bytes, reused from read to read), the bytes land there: no allocation
        and no fresh pages to fault in, which makes large blocks a third
        cheaper in system time.

        With ``verify`` false, the ``fstat`` after the read is left out (the
        one before it is still compared with the walk): for a read that will
        be checked later, by a later read of the file or by :meth:`unchanged`,
        if the file stays in a group at all. A file whose first block has no
        equal is never grouped, so it needs no proof.

        The common case is inlined here (this runs once per candidate); a
        failed open or an unexpected file goes the careful way,
        :meth:`_read_checked`, which names the cause.
        """
        try:
            fd = os.open(self.dirs[self.dir_of[i]] + self.names[i], self.flags[self.symlink[i]])
        except PermissionError:
            if self.flags is _OPEN_FLAGS_ATIME or not _NOATIME:
                return self._read_checked(i, offset, length, into)
            # O_NOATIME refused (not the file's owner): the rest of the table opens without it.
            self.flags = _OPEN_FLAGS_ATIME
            return self.read(i, offset, length, into, verify)
        except OSError:
            return self._read_checked(i, offset, length, into)
        try:
            st = os.fstat(fd)
            if st.st_ino != self.ino[i] or st.st_dev != self.dev[i] or not S_ISREG(st.st_mode):
                data: bytes | bytearray | None = None
            elif into is None:
                data = os.pread(fd, length, offset)
                n = len(data)
                if verify:
                    st = os.fstat(fd)
            else:
                data = into
                n = os.preadv(fd, [into], offset)
                if verify:
                    st = os.fstat(fd)
        except OSError as exc:
            return _cause(exc)
        finally:
            os.close(fd)
        if data is None:  # not the regular file the walk saw: say what it is now
            return self._read_checked(i, offset, length, into)
        if (
            n != length
            or st.st_size != self.size[i]
            or st.st_mtime_ns != self.mtime_ns[i]
            or st.st_ctime_ns != self.ctime_ns[i]
        ):
            return CHANGED
        return data

    def open_checked(self, i: int) -> int | None:
        """A descriptor of candidate ``i`` for :meth:`read_open`, if it is still the regular
        file the walk saw (device, inode, size, mtime, ctime); else ``None`` (the caller
        reads it by :meth:`read`, which says why)."""
        try:
            fd = os.open(self.dirs[self.dir_of[i]] + self.names[i], self.flags[self.symlink[i]])
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (
                st.st_ino == self.ino[i]
                and st.st_dev == self.dev[i]
                and S_ISREG(st.st_mode)
                and not self._changed(i, st)
            ):
                return fd
        except OSError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return None

    def read_open(
        self, i: int, fd: int, offset: int, length: int, into: bytearray
    ) -> bytearray | str:
        """:meth:`read` through ``fd``, a descriptor of candidate ``i`` opened (and
        checked) by an earlier read: ``preadv`` into ``into``, then ``fstat``.

        The ``fstat`` proves the file unchanged since the walk (size, mtime,
        ctime: a rename or an unlink of it moves the ctime too); if it does
        not, the name says why (:meth:`unchanged`: vanished, replaced, or
        changed).
        """
        try:
            n = os.preadv(fd, [into], offset)
            st = os.fstat(fd)
        except OSError as exc:
            return _cause(exc)
        if (
            n != length
            or st.st_size != self.size[i]
            or st.st_mtime_ns != self.mtime_ns[i]
            or st.st_ctime_ns != self.ctime_ns[i]
            or not st.st_nlink
        ):
            return self.unchanged(i) or CHANGED
        return into

    def unchanged_open(self, i: int, fd: int) -> str | None:
        """:meth:`unchanged` through ``fd``, a descriptor of candidate ``i`` opened (and
        checked) by an earlier read: one ``fstat``; the name says why, if it is not."""
        try:
            st = os.fstat(fd)
        except OSError as exc:
            return _cause(exc)
        if not st.st_nlink or self._changed(i, st):
            return self.unchanged(i) or CHANGED
        return None

    def unchanged(self, i: int) -> str | None:
        """Why candidate ``i`` cannot be vouched for now, or ``None`` if it is unchanged.

        The check a read made with ``verify`` false left out, made later: one
        ``stat`` of the name (``lstat`` unless it is a symlink the walk
        followed). The same device and inode with the walk's size, mtime and
        ctime mean that the file read is the one the walk saw, unchanged since
        (a write moves the ctime, which ``utime`` cannot set back).
        """
        try:
            st = os.stat(self.path(i), follow_symlinks=bool(self.symlink[i]))
        except OSError as exc:
            return _cause(exc)
        if st.st_ino != self.ino[i] or st.st_dev != self.dev[i]:
            return "replaced by another file since the walk; skipped"
        return CHANGED if self._changed(i, st) else None

    def _changed(self, i: int, st: os.stat_result) -> bool:
        """Whether ``st`` differs from the walk's size, mtime or ctime of candidate ``i``.

        (:meth:`read` makes the same test inline: it runs once per candidate.)
        """
        return (
            st.st_size != self.size[i]
            or st.st_mtime_ns != self.mtime_ns[i]
            or st.st_ctime_ns != self.ctime_ns[i]
        )

    def _read_checked(
        self, i: int, offset: int, length: int, into: bytearray | None = None
    ) -> bytes | bytearray | str:
        """:meth:`read` through :func:`sif.fileio.open_regular`: the cause of a refusal."""
        try:
            fd, _ = open_regular(
                self.path(i),
                expect=(self.dev[i], self.ino[i]),
                follow_symlinks=bool(self.symlink[i]),
                noatime=self.flags is _OPEN_FLAGS,
            )
            try:
                if into is None:
                    data: bytes | bytearray = os.pread(fd, length, offset)
                    n = len(data)
                else:
                    data = into
                    n = os.preadv(fd, [into], offset)
                st = os.fstat(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            return _cause(exc)
        return CHANGED if n != length or self._changed(i, st) else data


def _cause(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "vanished during the scan"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or str(exc)
