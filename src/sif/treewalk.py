"""The walk of :class:`sif.walk.Walker` in C, a chunk of files a call (:mod:`sif._treec`).

:meth:`Walker._resolve` decides the walk in Python and reads a directory a
call (:mod:`sif.dirread`): at a million files in 111k directories that is
about 12 us of Python a directory beside the system calls. :func:`walk_tree`
hands each directory root to :mod:`sif._treec`, which makes the same
decisions in the same order (depth first, subdirectories in readdir order, a
directory taken once under the first name met, loops warned of, ``skip_dirs``
never entered, ``one_file_system``) and returns the files as columns,
:data:`CHUNK_FILES` at a time; helper threads may read ahead the directories
the walk has taken, which changes nothing in what it gives. Roots are stat'ed,
warned of and counted here exactly as :meth:`Walker._resolve` does, file roots
last. It serves where :mod:`sif._dirc` does (links not followed, no patterns,
a UTF-8 file-system encoding; :func:`usable`); the tests hold it to the
Python walk on hostile trees.

With ``keys`` and a ``secret``, each file's :func:`sif.pathkeys.path_key` is
computed in C as the walk meets it (:func:`sif.keyedwalk.keyed_walk`, for
``sif index``'s plan).
Neither numpy nor :mod:`sif.walk` is imported here (``sif dupes`` starts without
numpy, and :mod:`sif.walk` imports this module).
"""

from __future__ import annotations

import os
import stat
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING

from sif.dirread import _BAD_NAME, _errno_cause
from sif.records import FileRecord, RecordColumns

if TYPE_CHECKING:
    from sif.walk import Walker, _Root

try:
    from sif import _treec  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # not built (no compiler at install): the Python walk
    _treec = None

__all__ = ["CHUNK_FILES", "usable", "walk_helpers", "walk_tree"]

CHUNK_FILES = 1 << 16
"""Files a call of the C walk returns (at least: it ends with a directory)."""

_LOOP = "loop (leads back to a parent directory)"


def walk_helpers(jobs: int) -> int:
    """Helper threads for a walk of ``jobs`` jobs: one a job but this thread, no more
    than the cores but one, nor 7 (a walk of ``/usr``, 117 k files, on 2 cores: 0.17 s
    with one, 0.36 s with 31, 0.22 s with none)."""
    return max(0, min(jobs, usable_cores(), 8) - 1)


def usable_cores() -> int:
    """The cores this process may run on (its affinity: ``taskset``, a cgroup's cpuset),
    else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def usable(walker: Walker) -> bool:
    """Whether :func:`walk_tree` can walk for ``walker`` (else its Python walk does)."""
    return _treec is not None and walker._reader.read == walker._reader.read_c


def walk_tree(
    walker: Walker,
    roots: list[_Root],
    cols: RecordColumns,
    advance: Callable[[int], None],
    threads: int = 0,
    keys: array[int] | None = None,
    secret: bytes = b"",
) -> list[FileRecord]:
    """The files under ``roots`` into ``cols``, as :meth:`Walker._resolve` walks them
    (the same files, order, counts into ``walker.stats`` and warnings); returns the
    file roots kept, which the caller appends (they are not in ``cols``).

    ``threads``: helper threads that read ahead; ``keys``: where the files' keys under
    ``secret`` go (two numbers a file), or ``None``. Needs :func:`usable`.
    """
    if keys is not None and not secret:
        raise ValueError("keys need a secret")
    assert _treec is not None
    reader, stats = walker._reader, walker.stats
    skip = walker.options.skip_dirs
    skip_bytes = array("Q", [k for pair in sorted(skip) for k in pair]).tobytes()
    tree = _treec.Walker(
        reader.skip_hidden,
        reader.lo,
        reader.hi,
        reader.trust_type,
        walker.options.one_file_system,
        skip_bytes,
        max(0, threads),
        secret if keys is not None else b"",
    )
    file_roots: list[tuple[str, os.stat_result, bool]] = []
    try:
        for path, st, warnings, link in roots:
            for w in warnings:
                walker._warn(w.path, w.cause, w.skipped)
            if st is None:
                continue
            if stat.S_ISREG(st.st_mode):
                file_roots.append((path, st, link))
                continue
            if not stat.S_ISDIR(st.st_mode):
                stats.special += 1
                continue
            key = (st.st_dev, st.st_ino)
            if key in skip or walker._under(path, skip):
                continue
            if tree.add_root(os.fsencode(path), st.st_dev, st.st_ino):
                _drain(walker, tree, cols, advance, keys)
        if not file_roots:
            return []
        got = array("Q")
        got.frombytes(tree.visited())
    finally:
        tree.close()
    pairs = iter(got)
    return walker._file_records(file_roots, set(zip(pairs, pairs, strict=True)) | skip)


def _drain(
    walker: Walker,
    tree: object,
    cols: RecordColumns,
    advance: Callable[[int], None],
    keys: array[int] | None,
) -> None:
    """Every chunk of ``tree`` into ``cols`` (and ``keys``), counted and warned of."""
    stats = walker.stats
    warn = walker._warn
    while (chunk := tree.read(CHUNK_FILES, len(cols.dirs))) is not None:  # type: ignore[attr-defined]
        dirs, dir_of, (blob, offset_bytes), numbers, key_bytes, problems, counts = chunk
        n = len(dir_of) // 4
        if n:
            cols.dirs.extend(dirs)
            offsets = array("q")
            offsets.frombytes(offset_bytes)
            cols.add_raw_names(blob, offsets)  # before the columns: rows counted by names
            cols.dir_of.frombytes(dir_of)  # numbered after the directories before
            step = 8 * n
            view = memoryview(numbers)
            cols.dev.frombytes(view[:step])
            cols.ino.frombytes(view[step : 2 * step])
            cols.size.frombytes(view[2 * step : 3 * step])
            cols.mtime_ns.frombytes(view[3 * step : 4 * step])
            cols.nlink.frombytes(view[4 * step : 5 * step])
            cols.ctime_ns.frombytes(view[5 * step :])
            cols.symlink.frombytes(bytes(n))
            if keys is not None:
                keys.frombytes(key_bytes)
        n_dirs, n_bytes, n_filtered, n_links, n_special = counts
        stats.directories += n_dirs
        stats.files += n
        stats.bytes += n_bytes
        stats.filtered += n_filtered
        stats.symlinks_skipped += n_links
        stats.special += n_special
        for kind, path, err in problems:
            if kind == 0:
                warn(path, _BAD_NAME, False)
            elif kind == 4:
                warn(path, _LOOP)
            else:
                warn(path, _errno_cause(err, os.strerror(err)))
        advance(n)
