"""Exact replica groups, as the seed ``003`` describes, in fclones-style stages.

The chain, each stage a list of candidate groups in and a list out, singletons
dropped and survivors logged after every stage:

1. **size**: files are grouped by size (the seed's free auxiliary information);
   a file whose size no other file has is never opened;
2. **inode**: names of one inode (hardlinks) become one candidate, so a file is
   never read twice nor counted as wasted space; groups of one inode drop out;
3. **block rounds** (:mod:`sif.exact.rounds`): every group still tied reads its
   next block, all groups in lock step; the block grows geometrically (4 KiB
   first, then x4 up to :data:`MAX_BLOCK`). Each byte of a file is read at
   most once; a file leaves as soon as one of its blocks differs. The
   grouping is byte-exact (no hash decides), and a file changed while it was
   read is dropped with a warning (see that module).

Stage 1 is one sort in C over the walk's columns (``_firstc.size_groups``;
without the extension, a ``Counter``, a ``compress`` and keyed sorts); in
stage 2 only groups holding a name with more than one link, or a symbolic
link, are looked at file by file. The other names of a file in a group
(hardlinks, symlinks) are checked at the end to still name it.

**Jobs.** Where the walk and the first blocks run in C, this process does
all the work, with up to ``jobs - 1`` helper threads for their system calls
(:func:`sif.treewalk.walk_helpers`: no more than the cores but one, nor 7; the
walk's read-ahead, and the first blocks' opens and reads: the hot loop of a
tree of mostly unique files). Otherwise a pool of ``jobs - 1`` forked
workers shares the walk and the block rounds, a share of the groups each.

**Digest.** Each final group carries the XXH3-128 digest of its content,
computed once per distinct block, not once per file. It names the content;
it decides nothing (the grouping is byte-exact), so a fast hash suffices:
BLAKE3 would cost a sixth of the time on large files.
"""

from __future__ import annotations

import errno
import gc
import operator
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from typing import Any

from sif.errors import ConfigError
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.exact.first import threaded as _threaded_reads
from sif.exact.rounds import (
    CHANGED,
    DEFAULT_MEMORY_BUDGET,
    FIRST_BLOCK,
    GROWTH,
    MAX_BLOCK,
    _Outcome,
    _refine_share,
    _refine_task,
    _Share,
    _Table,
    block_schedule,
)
from sif.treewalk import walk_helpers
from sif.walk import RecordColumns, WalkOptions, c_walk, parallel_walk

try:
    from sif.exact._firstc import size_groups as _c_size_groups  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # no compiler at install time: the same groups made in Python
    _c_size_groups = None

__all__ = [
    "CHANGED",
    "DEFAULT_MEMORY_BUDGET",
    "FIRST_BLOCK",
    "GROWTH",
    "MAX_BLOCK",
    "DupesStats",
    "Group",
    "Replica",
    "ReplicaFinder",
    "block_schedule",
    "find_duplicates",
]


@dataclass(frozen=True, slots=True)
class Replica:
    """One file of a group: one inode, with all the names it has under the roots.

    With ``sif dupes --archives`` a replica may be an archive member
    (``a.zip!/x``): then ``archive`` names the archive file that holds it,
    and it can be neither removed nor linked.
    """

    paths: tuple[str, ...]
    """Every name of the file: its own names (hardlinks) sorted, then the symlinks to it."""
    dev: int
    ino: int
    mtime_ns: int
    archive: str | None = None
    symlinks: tuple[str, ...] = ()
    """The names among ``paths`` that are symbolic links to the file (met with
    ``follow_symlinks``, or given as roots), sorted; they are not hardlinks:
    removing the file leaves them dangling."""
    ctime_ns: int = 0

    @property
    def path(self) -> str:
        """The first name, in sorted order (a hardlink before any symlink)."""
        return self.paths[0]

    @property
    def hardlinks(self) -> tuple[str, ...]:
        """The other names of the same inode (symlinks left out)."""
        if not self.symlinks:
            return self.paths[1:]
        links = set(self.symlinks)
        return tuple(p for p in self.paths[1:] if p not in links)


@dataclass(frozen=True, slots=True)
class Group:
    """A set of at least two distinct files (inodes) with identical content."""

    size: int
    digest: str
    replicas: tuple[Replica, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        """One name per file (hardlinked names left out)."""
        return tuple(r.path for r in self.replicas)

    @property
    def all_paths(self) -> tuple[str, ...]:
        """Every name of every file, hardlinks included."""
        return tuple(p for r in self.replicas for p in r.paths)

    @property
    def redundant_files(self) -> int:
        """Files that could go: all but one. Hardlinks take no space and never count."""
        return len(self.replicas) - 1

    @property
    def redundant_bytes(self) -> int:
        return self.size * self.redundant_files


@dataclass
class DupesStats:
    """Figures of one run, for the summary."""

    files: int = 0
    bytes_scanned: int = 0
    candidates: int = 0
    bytes_read: int = 0
    groups: int = 0
    redundant_files: int = 0
    redundant_bytes: int = 0
    warnings: int = 0
    members: int = 0
    seconds: float = 0.0
    survivors: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class _Groups:
    """Candidate groups, flat: the members of group k are ``flat[start_k : start_k + n_k]``."""

    flat: list[int]
    """Indices into the walk's columns, group after group."""
    sizes: list[int]
    """Each group's file size."""
    lengths: list[int]
    """Each group's number of members."""
    links: dict[int, list[int]] = field(default_factory=dict)
    """For a candidate with more names (hardlinks, symlinks to it): those names."""

    def shares(self, jobs: int) -> list[_Groups]:
        """The groups dealt into about 4 shares per process, round robin, so that each
        share holds small and large files alike; one share if too few to pay."""
        if jobs < 2 or len(self.flat) < PARALLEL_MIN_FILES:
            return [self] if self.flat else []
        out = [_Groups([], [], []) for _ in range(min(4 * jobs, len(self.sizes)))]
        pos = 0
        for k, (size, n) in enumerate(zip(self.sizes, self.lengths, strict=True)):
            share = out[k % len(out)]
            share.flat.extend(self.flat[pos : pos + n])
            share.sizes.append(size)
            share.lengths.append(n)
            pos += n
        return out


class ReplicaFinder:
    """Runs the stages; :meth:`run` is the whole chain after the walk.

    Given a pool, ``jobs`` processes (this one and ``jobs - 1`` workers)
    share the block rounds; groups are independent, so each goes whole to one
    process. Without one, the rounds run here, and ``helpers`` threads share
    the first blocks' system calls where they run in C. Warnings go to
    ``on_warning``, progress to ``progress``.
    """

    def __init__(
        self,
        *,
        jobs: int | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        on_warning: WarningSink = ignore_warning,
        progress: Progress | None = None,
        stats: DupesStats | None = None,
        helpers: int | None = None,
    ) -> None:
        self.jobs = jobs or os.cpu_count() or 1
        self.helpers = walk_helpers(self.jobs) if helpers is None else helpers
        """Threads that share the first blocks' system calls with this one, where the
        rounds run here (no pool) and in C; by default one a job but this one, no more
        than the cores but one."""
        self.memory_budget = memory_budget
        self.on_warning = on_warning
        self.progress: Progress = progress or NullProgress()
        self.stats = stats if stats is not None else DupesStats()

    def _log(self, stage: str, n: int) -> None:
        self.stats.survivors.append((stage, n))
        self.progress.log(f"{n} candidates after {stage}")

    def group_by_size(self, cols: RecordColumns) -> _Groups:
        """Stage 1: files of a size that another file has, as groups of two or more.

        The groups come by increasing size, the files of one size by inode
        (a cheap proxy for their order on disk), then in the walk's order. No
        Python runs per file: one sort in C (``_firstc.size_groups``) or,
        without the extension, a ``Counter`` of the sizes, a ``compress`` of
        the files whose size recurs and two ``sort`` calls keyed by the columns.
        """
        sizes = cols.size
        self.stats.files += len(cols)
        self.stats.bytes_scanned += sum(sizes)
        if _c_size_groups is not None:  # one sort in C: ~23 ms against ~56 ms on /usr
            groups = _Groups(*_c_size_groups(sizes, cols.ino))
        else:
            counts = Counter(sizes)
            shared = sorted(s for s, c in counts.items() if c > 1)
            recurs = set(shared)
            flat = list(compress(range(len(sizes)), map(recurs.__contains__, sizes)))
            flat.sort(key=cols.ino.__getitem__)
            flat.sort(key=sizes.__getitem__)  # stable: by inode within a size
            groups = _Groups(flat, shared, [counts[s] for s in shared])
        self._log("grouping by size", len(groups.flat))
        return groups

    def collapse_inodes(self, cols: RecordColumns, groups: _Groups) -> _Groups:
        """Stage 2: one candidate per inode; groups of one inode drop out.

        Returns the groups and, in ``links``, for candidates with more names,
        the indices of those other names. The candidate (the name read) is the
        file's own name rather than a symlink to it, when it has one. Only a
        group holding a name whose file had more than one link when the walk
        saw it, or a symlink, can hold two names of one inode (the second
        name the walk met showed ``st_nlink > 1``): only those are looked at.
        """
        flat, symlink = groups.flat, cols.symlink
        many = compress(flat, map((1).__lt__, map(cols.nlink.__getitem__, flat)))
        suspects = set(map(cols.size.__getitem__, many))
        if any(symlink):
            suspects.update(cols.size[i] for i in flat if symlink[i])
        if not suspects:
            self._log("collapsing hardlinks", len(flat))
            return groups
        dev, ino = cols.dev, cols.ino
        out = _Groups([], [], [])
        links = out.links
        pos = 0
        for size, n in zip(groups.sizes, groups.lengths, strict=True):
            group = flat[pos : pos + n]
            pos += n
            if size in suspects:
                first: dict[tuple[int, int], int] = {}
                for i in group:
                    key = (dev[i], ino[i])
                    j = first.setdefault(key, i)
                    if j == i:
                        continue
                    if symlink[j] and not symlink[i]:  # read the file's own name
                        first[key] = i
                        links[i] = [*links.pop(j, ()), j]
                    else:
                        links.setdefault(j, []).append(i)
                if len(first) < 2:
                    continue
                if len(first) < len(group):
                    group = sorted(first.values(), key=ino.__getitem__)
            out.flat.extend(group)
            out.sizes.append(size)
            out.lengths.append(len(group))
        self._log("collapsing hardlinks", len(out.flat))
        return out

    def run(self, cols: RecordColumns, pool: Any = None) -> Iterator[Group]:
        """Stages 1 to 3; the groups sorted by size (largest first), then by first path.

        All the work is done, and :attr:`stats` filled, before this returns;
        the :class:`Group` values are made one by one as they are read.

        ``pool`` (from :func:`sif.executors.fork_pool`) shares the block rounds
        with this process.
        """
        start = time.monotonic()
        self.progress.stage("grouping", unit="files")
        groups = self.collapse_inodes(cols, self.group_by_size(cols))
        links = groups.links
        self.stats.candidates = len(groups.flat)
        total = sum(map(operator.mul, groups.sizes, groups.lengths))
        self.progress.stage("comparing", total=total, unit="bytes")
        shares = groups.shares(self.jobs if pool is not None else 1)
        budget = self.memory_budget
        parallel = pool is not None and len(shares) > 1
        # Alone, this process reports progress as it reads; shared, as results come in.
        outcomes: Iterable[tuple[int, _Outcome]]
        if parallel:  # a worker's share gets a compact table as it is sent (_Share)
            from sif.executors import shared_map

            items = (_Share(cols, s.flat, s.sizes, s.lengths, budget) for s in shares)
            outcomes = shared_map(_refine_share, items, pool)
        else:  # here alone: the walk's columns are the table, its indices the rows
            local = partial(_refine_task, progress=self.progress, helpers=self.helpers)
            tasks = [(_Table.over(cols), s.flat, s.sizes, s.lengths, budget) for s in shares]
            outcomes = ((k, local(task)) for k, task in enumerate(tasks))
        # Groups stay compact (size, digest, member indices) until they are read out.
        found: list[tuple[int, str, str, list[int]]] = []
        rounds: dict[str, int] = {}
        path = cols.path
        for k, outcome in outcomes:
            flat = shares[k].flat
            for size, digest, members in outcome.groups:
                ids = members if outcome.walk_rows else [flat[m] for m in members]
                if links:
                    self._check_names(cols, links, ids)
                    first = min(path(j) for i in ids for j in (i, *links.get(i, ())))
                else:  # no file has another name: one C loop
                    first = min(map(path, ids))
                found.append((size, first, digest, ids))
            for w in outcome.warnings:
                self.stats.warnings += 1
                self.on_warning(w)
            self.stats.bytes_read += outcome.bytes_read
            if parallel:
                self.progress.advance(outcome.bytes_read)
            for stage, n in outcome.survivors:
                rounds[stage] = rounds.get(stage, 0) + n
        for stage, n in sorted(rounds.items(), key=lambda kv: int(kv[0].split()[-1])):
            self._log(stage, n)
        found.sort(key=lambda f: (-f[0], f[1]))
        self.stats.groups = len(found)
        self.stats.redundant_files = sum(len(f[3]) - 1 for f in found)
        self.stats.redundant_bytes = sum(f[0] * (len(f[3]) - 1) for f in found)
        self.stats.seconds += time.monotonic() - start
        return (self._group(cols, links, size, d, ids) for size, _, d, ids in found)

    def _check_names(
        self, cols: RecordColumns, links: dict[int, list[int]], ids: list[int]
    ) -> None:
        """Drop (with a warning) the other names of ``ids`` that no longer name the same file.

        The file itself was read and checked; a hardlink or a symlink to it
        may have been removed or renamed over since the walk. One ``lstat``
        (``stat`` for a symlink) per extra name of a file in a group.
        """
        for i in ids:
            names = links.get(i)
            if not names:
                continue
            kept = []
            for j in names:
                path = cols.path(j)
                try:
                    st = os.stat(path) if cols.symlink[j] else os.lstat(path)
                except OSError as exc:
                    cause = "vanished during the scan" if exc.errno == errno.ENOENT else None
                    self._warn(path, cause or exc.strerror or str(exc))
                    continue
                if (st.st_dev, st.st_ino) != (cols.dev[j], cols.ino[j]):
                    self._warn(path, "replaced by another file since the walk; skipped")
                    continue
                kept.append(j)
            links[i] = kept

    def _warn(self, path: str, cause: str) -> None:
        self.stats.warnings += 1
        self.on_warning(ScanWarning(path, cause))

    @staticmethod
    def _group(
        cols: RecordColumns, links: dict[int, list[int]], size: int, digest: str, members: list[int]
    ) -> Group:
        """The :class:`Group` of ``members``, its replicas by path. A member with no other
        name (the usual case) costs a path and a :class:`Replica`."""
        dirs, dir_of, names, symlink = cols.dirs, cols.dir_of, cols.names, cols.symlink
        dev, ino, mtime_ns, ctime_ns = cols.dev, cols.ino, cols.mtime_ns, cols.ctime_ns
        replicas: list[tuple[str, Replica]] = []
        add = replicas.append
        for i in members:
            other = links.get(i) if links else None
            if not other:
                p = dirs[dir_of[i]] + names[i]
                add((p, Replica((p,), dev[i], ino[i], mtime_ns[i], None, (), ctime_ns[i])))
                continue
            every = (i, *other)
            own = sorted(cols.path(j) for j in every if not symlink[j])
            symlinks = tuple(sorted(cols.path(j) for j in every if symlink[j]))
            paths = (*own, *symlinks)
            add(
                (paths[0], Replica(paths, dev[i], ino[i], mtime_ns[i], None, symlinks, ctime_ns[i]))
            )
        replicas.sort(key=_first)
        return Group(size, "xxh3-128:" + digest, tuple(r for _, r in replicas))


_first = operator.itemgetter(0)


PARALLEL_MIN_FILES = 2000
"""Fewer candidates than this are compared in-process: workers would not pay."""


def _paths(paths: object) -> list[str]:
    """``paths`` as a list of names: one path (str, bytes, path-like) or an iterable of them."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [os.fsdecode(paths)]
    if not isinstance(paths, Iterable):
        raise TypeError(f"paths must be a path or an iterable of paths, not {type(paths).__name__}")
    out = []
    for p in paths:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(f"paths must hold str, bytes or os.PathLike, not {type(p).__name__}")
        out.append(os.fsdecode(p))
    return out


def _globs(name: str, globs: object) -> tuple[str, ...]:
    """``include``/``exclude``: one glob (a string) or an iterable of them."""
    if isinstance(globs, str):
        return (globs,)
    if isinstance(globs, bytes) or not isinstance(globs, Iterable):
        raise TypeError(
            f"{name} must be a glob or an iterable of globs, not {type(globs).__name__}"
        )
    out = tuple(globs)
    for g in out:
        if not isinstance(g, str):
            raise TypeError(f"{name} must hold str globs, not {type(g).__name__}")
    return out


def find_duplicates(
    paths: str | bytes | os.PathLike[str] | Iterable[str | bytes | os.PathLike[str]],
    *,
    min_size: int = 0,
    max_size: int | None = None,
    include: str | Iterable[str] = (),
    exclude: str | Iterable[str] = (),
    hidden: bool = True,
    follow_symlinks: bool = False,
    one_file_system: bool = False,
    empty: bool = False,
    archives: bool = False,
    jobs: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    on_warning: WarningSink = ignore_warning,
    progress: Progress | None = None,
    stats: DupesStats | None = None,
) -> Iterator[Group]:
    """Groups of exact replicas among the files under ``paths``.

    ``paths`` is one path (``str``, ``bytes``, path-like) or an iterable of
    them; ``include`` and ``exclude`` are one glob or an iterable of globs
    (anything else is a ``TypeError``). Filters are those of
    :class:`sif.walk.WalkOptions` (empty files are left out unless ``empty``).
    Each group holds two or more distinct files whose bytes are equal,
    compared byte for byte; the names of one file (hardlinks, and symlinks
    to it) are listed together in one :class:`Replica`. A file changed while
    it was read is left out with a warning. Per-file problems go to
    ``on_warning`` and never stop the run; figures go into ``stats``.

    With ``archives``, the members of zip and tar archives join the groups
    as entries named ``archive!/member`` (see :mod:`sif.exact.members`).

    ``jobs`` (default: one per core) share the work. Where the walk and the
    first blocks run in C (the extensions are built; no patterns, links not
    followed), this process does it all with ``jobs - 1`` helper threads for
    their system calls (no more than the cores but one). Otherwise ``jobs``
    processes share the walk (see :func:`sif.walk.parallel_walk`) and the
    comparison; the workers are forked at the start, while this process is
    small.
    All the work is done, and ``stats`` filled, when this returns; the groups
    (sorted, largest first) are then made one by one as they are read.

    Raises :class:`sif.errors.ConfigError` for bad filters or ``jobs < 1``,
    before any work.
    """
    roots = _paths(paths)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ConfigError(f"jobs must be a whole number >= 1, got {jobs!r}")
    options = WalkOptions(
        min_size=min_size,
        max_size=max_size,
        include=_globs("include", include),
        exclude=_globs("exclude", exclude),
        hidden=hidden,
        follow_symlinks=follow_symlinks,
        one_file_system=one_file_system,
        empty=empty,
    )
    stats = stats if stats is not None else DupesStats()
    progress = progress or NullProgress()
    finder = ReplicaFinder(
        jobs=jobs,
        memory_budget=memory_budget,
        on_warning=on_warning,
        progress=progress,
        stats=stats,
    )
    start = time.monotonic()
    pool = None
    try:
        # Where both the walk and the first blocks run in C, helper threads share them
        # and no worker pays: on the Linux sources (79 k files, mostly unique) a
        # forked pool cost 0.06-0.17 s more CPU than one process; threads, 0.03 s.
        # One job never imports multiprocessing (~25 ms of start-up).
        if finder.jobs > 1 and not (_threaded_reads() and c_walk(options)):
            from sif.executors import fork_pool

            pool = fork_pool(finder.jobs)
        with _collector_paused():
            progress.stage("scanning", unit="files")
            cols, wstats = parallel_walk(roots, options, on_warning, pool, finder.jobs, progress)
            stats.warnings += wstats.warnings
            groups = finder.run(cols, pool)
    finally:
        if pool is not None:
            pool.shutdown()
    if archives:
        groups = iter(_with_members(groups, cols, options, on_warning, stats))
    stats.seconds = time.monotonic() - start
    return groups


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the scan, as it was before after.

    The scan makes hundreds of thousands of short-lived objects (a ``stat``
    result, a block, a path a file) and no cycles; the collector would only
    walk them again and again (about 5% of the CPU time on ``/usr``).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _with_members(
    groups: Iterator[Group],
    cols: RecordColumns,
    options: WalkOptions,
    on_warning: WarningSink,
    stats: DupesStats,
) -> list[Group]:
    """The groups with the archives' members merged in, and the figures redone."""
    from sif.exact.members import archive_members, merge_members

    def warn(w: ScanWarning) -> None:
        stats.warnings += 1
        on_warning(w)

    members = archive_members(cols, warn, max(options.min_size, 0 if options.empty else 1))
    stats.members = len(members)
    result = merge_members(groups, members, cols, warn)
    stats.groups = len(result)
    stats.redundant_files = sum(g.redundant_files for g in result)
    stats.redundant_bytes = sum(g.redundant_bytes for g in result)
    return result
