"""The first block of every file of a batch: the hot loop of a tree of mostly unique files.

:func:`read_first` reads, for every row of a batch (in the order given, the
batch's inode order), the first ``min(size, block)`` bytes, and keeps the
file open for its later blocks while ``hold`` allows. Per file: ``open``,
``fstat`` (before any read: only the regular file the walk saw, same
device, inode, size, mtime and ctime, is read), ``pread``, and ``close``
unless kept. Anything else (a failed open, a file replaced or changed, a
short read) goes through :meth:`_Table.read`, which reads it the careful
way or names the cause.

Where the optional extension ``sif.exact._firstc`` is built, the common case
runs there (C, one call a batch); in Python the loop cost ~0.7 s of
interpreter time on ``/usr`` (102k files) besides its system calls. The C
loop stops at the first row that is not the common case and returns its
position; that row goes through the Python loop (:func:`_read_py`, one row),
which may drop ``O_NOATIME`` for the rest of the table
(:meth:`_Table.read`), and the C loop goes on from the next row with the
table's flags as they are then. So the files read, the bytes and every
warning are the same either way.

The C loop goes in chunks of up to :data:`CHUNK` rows: the system calls of a
chunk run without the GIL, shared with ``helpers`` threads (rows taken one
by one from a counter); the rows are then filed in order, as one thread
would. A chunk begins no row after :data:`CHUNK_NS` (a slow disk); a call's
first chunk is :data:`MIN_SHARE` rows (no helper) and each next one twice the
last. A file read where ``fds`` has no room left is closed at once, so at
most ``hold`` plus one a thread are open at a time.

Every descriptor kept goes into ``fds``, which the caller closes (in a
``finally``). The C loop puts it there, or closes it, before anything can
raise (a Ctrl-C included: it runs the signal handlers after each chunk, so
within about 20 ms, or one file's read on a disk slower than that). The
Python loop has a few bytecodes between an ``open`` and its ``try``, and
between a ``pread`` and ``fds[i] = fd``, where a Ctrl-C leaves that one
descriptor open (as it did in :mod:`sif.exact.rounds`).
"""

from __future__ import annotations

import os
from array import array
from stat import S_ISREG
from typing import cast

import xxhash

from sif.exact.table import _Table

try:
    from sif.exact import _firstc  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # no compiler at install time: the same loop in Python
    _firstc = None

CHUNK = 256
"""Rows the C loop prepares, reads without the GIL, and files, between two runs of the
signal handlers (at most 256)."""
MIN_SHARE = 16
"""Rows a helper thread of the C loop reads at least: a chunk of fewer rows starts fewer
helpers (a thread costs ~20 us to start)."""
CHUNK_NS = 20_000_000
"""Nanoseconds after which a chunk begins no row: the rest waits for the next chunk, after
the signal handlers have run (a Ctrl-C on a slow disk acts within about this)."""


def threaded() -> bool:
    """Whether :func:`read_first` can share its system calls with helper threads (in C)."""
    return _firstc is not None


Blocks = dict[int, "bytes | bytearray | str"]
"""Each row's first block, or why it cannot be read (the warning's cause)."""


def read_first(
    table: _Table,
    rows: list[int],
    block: int,
    hold: int,
    fds: dict[int, int],
    helpers: int = 0,
) -> tuple[Blocks, dict[int, int]]:
    """The first block of each of ``rows`` (or why not), and the xxh3-64 of each block read.

    A file read stays open in ``fds`` while it holds fewer than ``hold``
    descriptors (the caller closes them); the others are closed. ``helpers``:
    threads that share the C loop's system calls with this one (none in Python).
    """
    if _firstc is None or not _compiled_fits(table):
        got: Blocks = {}
        keys: dict[int, int] = {}
        _read_py(table, rows, 0, len(rows), block, hold, fds, got, keys)
        return got, keys
    blocks: dict[int, bytes] = {}  # the rows the C loop read
    careful: Blocks = {}  # the rows the Python loop read (blocks, or causes)
    careful_keys: dict[int, int] = {}
    cols = (
        table.dirs,
        table.dir_of,
        table.names,
        table.symlink,
        table.dev,
        table.ino,
        table.size,
        table.mtime_ns,
        table.ctime_ns,
    )
    read, k, end = _firstc.read_first, 0, len(rows)
    threads = (helpers, CHUNK, MIN_SHARE, CHUNK_NS)
    while k < end:
        k = read(rows, k, end, *cols, table.flags, block, hold, fds, blocks, *threads)
        if k < end:  # not the common case: the Python loop decides, as without C
            _read_py(table, rows, k, k + 1, block, hold, fds, careful, careful_keys)
            k += 1
    keys = dict(zip(blocks, map(xxhash.xxh3_64_intdigest, blocks.values()), strict=True))
    got = cast(Blocks, blocks)
    if careful:
        got.update(careful)
        keys.update(careful_keys)
    return got, keys


def _compiled_fits(table: _Table) -> bool:
    """Whether the table's columns are of the types the C loop reads (the walk's are)."""
    return (
        type(table.dirs) is list
        and type(table.names) is list
        and all(
            isinstance(col, array) and col.typecode == code and col.itemsize == itemsize
            for col, code, itemsize in (
                (table.dir_of, "I", 4),
                (table.symlink, "B", 1),
                (table.dev, "Q", 8),
                (table.ino, "Q", 8),
                (table.size, "q", 8),
                (table.mtime_ns, "q", 8),
                (table.ctime_ns, "q", 8),
            )
        )
    )


def _read_py(
    table: _Table,
    rows: list[int],
    start: int,
    end: int,
    block: int,
    hold: int,
    fds: dict[int, int],
    got: Blocks,
    keys: dict[int, int],
) -> None:
    """:func:`read_first` of ``rows[start:end]`` in Python, into ``got`` and ``keys``.

    Kept lean (it is the hot loop where the extension is not built):
    ``open``, ``fstat``, ``pread`` and a few comparisons a file, inline.
    """
    dirs, dir_of, names, symlink = table.dirs, table.dir_of, table.names, table.symlink
    dev, ino, size = table.dev, table.ino, table.size
    mtime_ns, ctime_ns = table.mtime_ns, table.ctime_ns
    h64 = xxhash.xxh3_64_intdigest
    flags = table.flags
    open_, fstat, pread, close = os.open, os.fstat, os.pread, os.close
    for k in range(start, end):
        i = rows[k]
        n = size[i]
        if n > block:
            n = block
        try:
            fd = open_(dirs[dir_of[i]] + names[i], flags[symlink[i]])
        except OSError:
            res = got[i] = table.read(i, 0, n, None, False)  # says why (or drops O_NOATIME)
            if not isinstance(res, str):
                keys[i] = h64(res)
            flags = table.flags
            continue
        data: bytes | None = None
        try:
            st = fstat(fd)
            if (
                st.st_ino == ino[i]
                and st.st_dev == dev[i]
                and S_ISREG(st.st_mode)
                and st.st_size == size[i]
                and st.st_mtime_ns == mtime_ns[i]
                and st.st_ctime_ns == ctime_ns[i]
            ):
                data = pread(fd, n, 0)
        except OSError:
            pass
        except BaseException:
            close(fd)
            raise
        if data is not None and len(data) == n:
            got[i] = data
            keys[i] = h64(data)
            if len(fds) < hold:
                fds[i] = fd
                continue
            close(fd)
        else:
            close(fd)
            res = got[i] = table.read(i, 0, n)
            if not isinstance(res, str):
                keys[i] = h64(res)
