"""The file-system walker: roots in, a stream of :class:`FileRecord` out.

Defaults (the same in every command):

- directories are walked recursively; a root may be a file or a directory;
- hidden files and directories (a name starting with ``.``) are included,
  as fdupes and jdupes do; ``hidden=False`` skips them;
- symbolic links are not followed, except a root given on the command line
  that is a link (``find -H``); ``follow_symlinks=True`` follows them all,
  and a directory reached twice (a loop, or two links to one place) is
  walked once;
- a directory reached under two names (nested roots, a bind mount, links) is
  walked once, under the first name the walk meets; the parallel walk gives
  exactly the serial walk's records;
- ``skip_dirs`` (by device and inode) are never entered;
- FIFOs, sockets and devices are never opened, only counted;
- empty files are left out unless ``empty=True``;
- every problem (permission denied, a file that vanished, a symlink loop, a
  name that is not valid UTF-8) is a :class:`ScanWarning` handed to
  ``on_warning``; the walk goes on.

Paths are ``str``; bytes that are not valid UTF-8 are carried as surrogate
escapes (:func:`os.fsdecode`), so :func:`os.fsencode` gives the exact name
back.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from sif.dirread import DirReader, _cause, _Dir, _valid_utf8
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.records import FileRecord, RecordColumns
from sif.treewalk import usable, walk_helpers, walk_tree
from sif.walkoptions import WalkOptions, WalkStats, parse_size, read_path_list

__all__ = [
    "FileRecord",
    "RecordColumns",
    "WalkOptions",
    "WalkStats",
    "Walker",
    "c_walk",
    "parallel_walk",
    "parse_size",
    "read_path_list",
    "walk",
]


_Unit = tuple[str, tuple[int, int], int, frozenset[tuple[int, int]]]
"""A directory to walk: its path, its (device, inode), the device of its root,
and the (device, inode) of itself and its ancestors (to tell a loop)."""

_Root = tuple[str, os.stat_result | None, list[ScanWarning], bool]
"""A root as stat'ed: its normalised path, its ``stat`` (``None`` if that failed),
the warnings it gave, and whether the name is a symbolic link."""


@dataclass
class Walker:
    """Walks roots and yields :class:`FileRecord` values; counts into :attr:`stats`.

    Cost: one ``readdir`` per directory, through a descriptor, and one
    ``lstat`` per file, an ``fstatat`` of its bare name (``DirEntry`` caches the
    type, so directories are told apart without a ``stat``) and one per
    directory (to detect loops and mount points). Memory: the stack of
    pending directories and the set of visited directory inodes.

    Which name of a directory reached twice is walked (nested roots, bind
    mounts, links with ``follow_symlinks``) is decided in one place,
    :meth:`_resolve`, in the serial walk's order; the parallel walk only
    reads directories ahead for it, so both give the same records.
    """

    options: WalkOptions = field(default_factory=WalkOptions)
    on_warning: WarningSink = ignore_warning
    stats: WalkStats = field(default_factory=WalkStats)

    def __post_init__(self) -> None:
        self._visited: set[tuple[int, int]] = set()
        self._reader = DirReader(self.options)  # its filters serve the file roots too
        self._read_dir = self._reader.read

    def _warn(self, path: str, cause: str, skipped: bool = True) -> None:
        self.stats.warnings += skipped
        self.on_warning(ScanWarning(path, cause, skipped))

    def _keep(self, name: str, path: str, st: os.stat_result) -> bool:
        reader = self._reader
        if not reader.lo <= st.st_size <= reader.hi or (
            reader.include is not None and not reader.include.match(name, path)
        ):
            self.stats.filtered += 1
            return False
        return True

    def _record(self, path: str, st: os.stat_result, link: bool) -> FileRecord:
        self.stats.files += 1
        self.stats.bytes += st.st_size
        return FileRecord(
            path,
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_nlink,
            st.st_ctime_ns,
            link,
        )

    def walk(self, roots: Iterable[str | os.PathLike[str]]) -> Iterator[FileRecord]:
        """Yield every regular file under ``roots`` that passes the filters, once per file.

        Directory roots are walked first, in the order given; then file roots,
        each skipped if a directory already walked holds it.
        """
        cols = RecordColumns()

        def read(unit: _Unit) -> _Dir:
            nonlocal cols
            cols = RecordColumns()
            return self._read_dir(unit[0], unit[1], cols)

        for item in self._resolve(self._stat_roots(roots), read):
            if isinstance(item, FileRecord):
                yield item
            else:
                yield from cols

    def _stat_roots(self, roots: Iterable[str | os.PathLike[str]]) -> list[_Root]:
        """Each distinct root (by normalised path) with its ``stat``; warnings held."""
        out: list[_Root] = []
        seen: set[str] = set()
        for root in roots:
            path = os.path.normpath(os.fspath(root))
            if path in seen:
                continue
            seen.add(path)
            warnings: list[ScanWarning] = []
            if not _valid_utf8(path):
                warnings.append(ScanWarning(path, "name is not valid UTF-8 (shown escaped)", False))
            st: os.stat_result | None = None
            link = False
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    link = True
                    st = os.stat(path)  # a root that is a symlink is followed (find -H)
            except OSError as exc:
                st = None
                if exc.errno == errno.ENOENT and link:
                    warnings.append(ScanWarning(path, "broken symlink"))
                else:
                    warnings.append(ScanWarning(path, _cause(exc)))
            out.append((path, st, warnings, link))
        return out

    def _under(self, path: str, keys: AbstractSet[tuple[int, int]]) -> bool:
        """Whether a directory above ``path`` is one of ``keys`` (compared by inode)."""
        if not keys:
            return False  # nothing to check (a --from-file list of files, say)
        parent = os.path.dirname(os.path.abspath(path))
        while True:
            try:
                st = os.stat(parent)
            except OSError:
                return False
            if (st.st_dev, st.st_ino) in keys:
                return True
            up = os.path.dirname(parent)
            if up == parent:
                return False
            parent = up

    def _resolve(
        self, roots: list[_Root], read: Callable[[_Unit], _Dir]
    ) -> Iterator[_Dir | FileRecord]:
        """The walk itself: which directories, under which names, in which order.

        Depth first from each directory root in turn; a directory is taken by
        the first directory read that lists it (or as a root, if not taken
        before), and left wherever else it is met; then the file roots not
        under a directory walked. ``read`` gives a directory's :class:`_Dir`
        (read now, or earlier by any process). Counts into :attr:`stats`,
        emits the warnings of what it takes, and yields each directory taken
        (its ``_Dir``, right after ``read`` gave it) and each file root kept.
        """
        visited = self._visited
        skip = self.options.skip_dirs
        one_fs = self.options.one_file_system
        stats = self.stats
        file_roots: list[tuple[str, os.stat_result, bool]] = []
        for path, st, warnings, link in roots:
            for w in warnings:
                self._warn(w.path, w.cause, w.skipped)
            if st is None:
                continue
            if stat.S_ISREG(st.st_mode):
                file_roots.append((path, st, link))
                continue
            if not stat.S_ISDIR(st.st_mode):
                stats.special += 1
                continue
            key = (st.st_dev, st.st_ino)
            if key in visited or key in skip or self._under(path, skip):
                continue
            visited.add(key)
            stack: list[_Unit] = [(path, key, st.st_dev, frozenset((key,)))]
            while stack:
                dirpath, _, top_dev, ancestors = stack.pop()
                d = read((dirpath, _, top_dev, ancestors))
                stats.directories += 1
                stats.files += d.stop - d.start
                n_bytes, n_filtered, n_links, n_special = d.counts
                stats.bytes += n_bytes
                stats.filtered += n_filtered
                stats.symlinks_skipped += n_links
                stats.special += n_special
                for w in d.warnings:
                    self._warn(w.path, w.cause, w.skipped)
                yield d
                keys = d.keys
                prefix = dirpath if dirpath.endswith("/") else dirpath + "/"  # as os.path.join
                subdirs: list[_Unit] = []
                for j, name in enumerate(d.subdirs):
                    k = (keys[2 * j], keys[2 * j + 1])
                    if k in ancestors:
                        self._warn(prefix + name, "loop (leads back to a parent directory)")
                    elif k in visited:
                        pass  # reached before through another name
                    elif one_fs and k[0] != top_dev:
                        pass
                    else:
                        visited.add(k)
                        subdirs.append((prefix + name, k, top_dev, ancestors | {k}))
                # Reversed so that the walk visits subdirectories in readdir order.
                stack.extend(reversed(subdirs))
        yield from self._file_records(file_roots, visited | skip if skip else visited)

    def _file_records(
        self, file_roots: list[tuple[str, os.stat_result, bool]], held: AbstractSet[tuple[int, int]]
    ) -> list[FileRecord]:
        """The records of the file roots not under a directory of ``held``, each directory
        entry once: ``d/f`` and ``/abs/d/f`` (or ``link/f``, a bind mount's ``f``) name one
        entry, which two records made into two replicas of one file, and an action given
        the report deleted the only copy. Names that are hard links of one file are
        other entries, and stay (one file, listed together); so does a root that is a
        symbolic link (a name of its own, which protects its target in the actions)."""
        first: dict[tuple[int, int], tuple[str, os.stat_result]] = {}
        entries: dict[tuple[int, int], set[tuple[int, int, str] | None]] = {}
        out = []
        for path, st, link in file_roots:
            if self._under(path, held) or not self._keep(os.path.basename(path), path, st):
                continue
            key = (st.st_dev, st.st_ino)
            if not link:
                if key in first:  # rare: the inode named before, by this entry or another
                    seen = entries.get(key)
                    if seen is None:
                        seen = entries[key] = {_entry(*first[key])}
                    entry = _entry(path, st)
                    if entry is None or entry in seen:
                        continue
                    seen.add(entry)
                else:
                    first[key] = (path, st)
            out.append(self._record(path, st, link))
        return out

    def _children(
        self,
        unit: _Unit,
        d: _Dir,
        seen: set[tuple[int, int]],
        stop: AbstractSet[tuple[int, int]],
    ) -> list[_Unit]:
        """The subdirectories of ``d`` worth reading ahead: not in ``seen`` nor ``stop``.

        Only a guess at what :meth:`_resolve` will take (it decides; what it
        takes and nobody read ahead, it reads then).
        """
        dirpath, _, top_dev, ancestors = unit
        one_fs = self.options.one_file_system
        keys = d.keys
        prefix = dirpath if dirpath.endswith("/") else dirpath + "/"
        out: list[_Unit] = []
        for j, name in enumerate(d.subdirs):
            k = (keys[2 * j], keys[2 * j + 1])
            if k in ancestors or k in seen or k in stop or (one_fs and k[0] != top_dev):
                continue
            seen.add(k)
            out.append((prefix + name, k, top_dev, ancestors | {k}))
        return out

    def read_ahead(
        self,
        cols: RecordColumns,
        units: list[_Unit],
        max_dirs: int,
        seen: set[tuple[int, int]],
        stop: AbstractSet[tuple[int, int]],
    ) -> tuple[list[_Dir], list[_Unit]]:
        """Read ``units`` and below, depth first, into ``cols``, for at most ``max_dirs``.

        Returns the directories read and those left to read. Nothing is
        counted or warned: :meth:`_resolve` does that for what it takes.
        """
        stack = list(reversed(units))
        out: list[_Dir] = []
        while stack and len(out) < max_dirs:
            unit = stack.pop()
            d = self._read_dir(unit[0], unit[1], cols)
            out.append(d)
            # Reversed so that the walk visits subdirectories in readdir order.
            stack.extend(reversed(self._children(unit, d, seen, stop)))
        return out, stack


def _read_some(
    options: WalkOptions, units: list[_Unit], stop: frozenset[tuple[int, int]], max_dirs: int
) -> tuple[RecordColumns, list[_Dir], list[_Unit]]:
    """Read ``units`` ahead, depth first, for at most ``max_dirs`` directories; in a worker.

    Returns the files found, the directories read and those left to read,
    which go back to the queue: so a worker never sits on a huge subtree
    while another idles.
    """
    cols = RecordColumns()
    dirs, left = Walker(options).read_ahead(cols, units, max_dirs, set(), stop)
    return cols, dirs, left


BATCH_DIRS = 256
"""Directories one batch of a parallel walk reads before it hands the rest back."""
SPLIT_LEVELS = 4
"""Levels a parallel walk reads here, breadth first, before workers share the rest."""


def c_walk(options: WalkOptions) -> bool:
    """Whether :func:`parallel_walk` walks in C for ``options`` (with threads, not a
    pool's workers)."""
    return usable(Walker(options))


def parallel_walk(
    roots: Iterable[str | os.PathLike[str]],
    options: WalkOptions,
    on_warning: WarningSink = ignore_warning,
    pool: Any = None,
    jobs: int = 1,
    progress: Progress | None = None,
) -> tuple[RecordColumns, WalkStats]:
    """The walk of :func:`walk` as columns, shared by this process and a pool's workers.

    ``pool`` is a :class:`sif.executors.WorkerPool` of ``jobs - 1`` workers,
    or ``None`` to walk here alone. Where the C walk serves (:func:`c_walk`),
    it walks here with helper threads reading ahead
    (:func:`sif.treewalk.walk_helpers`: ``jobs - 1`` on enough cores) and no
    pool is needed: on ``/usr`` (117 k files) 0.17 s against 0.27 s for the
    workers' read-ahead below, and 0.19-0.21 s with no helper. Otherwise
    (patterns, links followed, no compiler), the records are exactly those of the
    serial walk: the processes only read directories ahead, in small batches
    (what a batch leaves unread returns to the queue, so no process sits on a
    huge subtree while another idles); then this process decides, in the
    serial walk's order, which directory is walked under which name
    (:meth:`Walker._resolve`), reads what nobody read ahead, and drops the
    files of directories read twice or under a name the walk did not take.
    With ``follow_symlinks``, links could make much of the tree read twice,
    so that walk stays in this process.
    """
    walker = Walker(options, on_warning)
    advance = (progress or NullProgress()).advance
    root_list = walker._stat_roots(roots)
    cols = RecordColumns()
    file_roots: list[FileRecord] = []
    if usable(walker):  # the same walk, in C; its helper threads read ahead for the jobs
        file_roots = walk_tree(walker, root_list, cols, advance, walk_helpers(jobs))
        advance(len(file_roots))
        cols.extend(file_roots)
        return cols, walker.stats
    if pool is None or options.follow_symlinks or jobs < 2:
        reported = n = 0
        for item in walker._resolve(root_list, lambda u: walker._read_dir(u[0], u[1], cols)):
            if isinstance(item, FileRecord):
                file_roots.append(item)
                continue
            n += 1
            if n % BATCH_DIRS == 0:
                advance(len(cols) - reported)
                reported = len(cols)
        advance(len(cols) - reported + len(file_roots))
        cols.extend(file_roots)
        return cols, walker.stats
    ahead, twice = _read_ahead(walker, root_list, cols, pool, jobs, advance)

    def read(unit: _Unit) -> _Dir:
        hit = ahead.pop(unit[0], None)
        return hit[0] if hit is not None else walker._read_dir(unit[0], unit[1], cols)

    for item in walker._resolve(root_list, read):
        if isinstance(item, FileRecord):
            file_roots.append(item)
    # What is left ahead was read under a name the walk did not take.
    twice.extend((base + d.start, base + d.stop) for d, base in ahead.values())
    if any(a < b for a, b in twice):
        cols = cols.without(twice)
    advance(len(file_roots))
    cols.extend(file_roots)
    return cols, walker.stats


def _read_ahead(
    walker: Walker,
    roots: list[_Root],
    cols: RecordColumns,
    pool: Any,
    jobs: int,
    advance: Callable[[int], None],
) -> tuple[dict[str, tuple[_Dir, int]], list[tuple[int, int]]]:
    """Read the directories under ``roots`` into ``cols``, here and in ``pool``'s workers.

    Returns each directory read, by path, with the offset of its rows in
    ``cols``, and the rows of directories read twice under one path.
    A directory is read once as far as the processes can tell (by inode, as
    their results come back); a directory root is never entered from
    another root (the walk takes it under whichever name comes first).
    """
    seen: set[tuple[int, int]] = set()
    pending: list[_Unit] = []
    for path, st, _, _ in roots:
        if st is not None and stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key not in seen and key not in walker.options.skip_dirs:
                seen.add(key)
                pending.append((path, key, st.st_dev, frozenset((key,))))
    stop = frozenset(seen)
    ahead: dict[str, tuple[_Dir, int]] = {}
    twice: list[tuple[int, int]] = []

    done: set[tuple[int, int]] = set()  # read already, here or by a worker

    def keep(dirs: list[_Dir], base: int) -> None:
        for d in dirs:
            seen.add(d.key)
            done.add(d.key)
            if d.path in ahead:
                twice.append((base + d.start, base + d.stop))
            else:
                ahead[d.path] = (d, base)

    for _ in range(SPLIT_LEVELS):  # breadth first, until there is work for every worker
        if not pending or len(pending) >= 4 * jobs:
            break
        nxt: list[_Unit] = []
        for unit in pending:
            dirs, left = walker.read_ahead(cols, [unit], 1, seen, stop)
            keep(dirs, 0)
            nxt.extend(left)
        pending = nxt
    advance(len(cols))
    inflight: deque[Any] = deque()

    def take() -> list[_Unit]:
        nonlocal pending
        share = max(1, len(pending) // (2 * jobs))
        batch, pending = pending[:share], pending[share:]
        return batch

    def merge(result: tuple[RecordColumns, list[_Dir], list[_Unit]]) -> None:
        part, dirs, left = result
        base = len(cols)
        cols.absorb(part)
        advance(len(part))
        keep(dirs, base)
        for unit in left:  # units of the batch left unread, and new ones
            if unit[1] not in done:
                seen.add(unit[1])
                pending.append(unit)

    while pending or inflight:
        while pending and len(inflight) < 2 * (jobs - 1):
            inflight.append(pool.submit(_read_some, walker.options, take(), stop, BATCH_DIRS))
        while inflight and inflight[0].done():
            merge(inflight.popleft().result())
        if pending:
            batch = take()  # before naming `pending`: take() rebinds it
            before = len(cols)
            dirs, left = walker.read_ahead(
                cols, batch, BATCH_DIRS, seen, stop
            )  # this one works too
            keep(dirs, 0)
            pending.extend(left)
            advance(len(cols) - before)
        elif inflight:
            merge(inflight.popleft().result())
    return ahead, twice


def walk(
    roots: Iterable[str | os.PathLike[str]],
    options: WalkOptions | None = None,
    on_warning: WarningSink = ignore_warning,
) -> Iterator[FileRecord]:
    """Yield every regular file under ``roots`` that passes ``options``."""
    return Walker(options or WalkOptions(), on_warning).walk(roots)


def _entry(path: str, st: os.stat_result) -> tuple[int, int, str] | None:
    """The directory entry ``path`` (not a symbolic link itself) names, through any links
    to its directories: its directory's device and inode and its own name; ``None`` for a
    file with one link (its only entry), or one whose directory cannot be looked at (then
    one of its names is kept)."""
    if st.st_nlink <= 1:
        return None
    try:
        up = os.stat(os.path.dirname(os.path.abspath(path)) or "/")
    except OSError:
        return None
    return (up.st_dev, up.st_ino, os.path.basename(path))
