"""Exact replica groups, as the seed ``003`` describes, in fclones-style stages.

The chain, each stage a list of candidate groups in and a list out, singletons
dropped and survivors logged after every stage:

1. **size**: files are grouped by size (the seed's free auxiliary information);
2. **inode**: names of one inode (hardlinks) become one candidate, so a file is
   never read twice nor counted as wasted space; groups of one inode drop out;
3. **block rounds**: every group still tied reads its next block, all groups in
   lock step; the block grows geometrically (4 KiB first, then x4 up to
   :data:`MAX_BLOCK`) and shrinks for very large groups so that the blocks
   held at once stay within ``memory_budget``. Each byte of a file is read at
   most once; a file leaves as soon as one of its blocks differs.

**Exactness.** A block is grouped by comparing its bytes with the block of a
representative of each subgroup (``bytes ==``, a ``memcmp``). An xxh3-128 of
the block only serves to find the candidate subgroup when the block differs
from the first one; equal hashes with unequal bytes make separate subgroups.
So a hash collision can never make two different files replicas, and no third
pass (re-reading to confirm) is needed. When all files of a group agree, which
is the common case when most files are replicas (the seed's last line), no
hash is computed at all, only one ``memcmp`` per block.

**Digest.** Each final group carries the BLAKE3 digest of its content,
computed once per distinct block, not once per file.

**Changes during the scan.** Every read re-checks the file with ``fstat``; a
file whose inode, size or mtime no longer matches what the walker saw is
dropped with a warning, and so is one that vanished or cannot be read.

**Memory.** At most (distinct blocks in a round) x (block size) plus one block
per reader thread; block sizes are cut so that this stays within
``memory_budget`` whatever the file sizes. Files are opened for one read and
closed at once, so groups larger than the open-file limit work.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import xxhash
from blake3 import blake3

from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.walk import FileRecord, Walker, WalkOptions

FIRST_BLOCK = 4 * 1024
"""The first block: one page, enough to tell most different small files apart."""
GROWTH = 4
"""Each block is GROWTH times the one before: a file of n bytes takes O(log n) rounds."""
MAX_BLOCK = 4 * 1024 * 1024
"""The largest block: big enough to make a read's fixed cost negligible."""
MIN_BLOCK = 64 * 1024
"""Large groups never shrink the block below this."""
DEFAULT_MEMORY_BUDGET = 32 * 1024 * 1024
"""Bytes of block data held at once, at most (plus one block per reader)."""


@dataclass(frozen=True, slots=True)
class Replica:
    """One file of a group: one inode, with all the names it has under the roots."""

    paths: tuple[str, ...]
    dev: int
    ino: int
    mtime_ns: int

    @property
    def path(self) -> str:
        """The first name, in sorted order."""
        return self.paths[0]

    @property
    def hardlinks(self) -> tuple[str, ...]:
        """The other names of the same inode."""
        return self.paths[1:]


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
    seconds: float = 0.0
    survivors: list[tuple[str, int]] = field(default_factory=list)


@dataclass(slots=True)
class _Candidate:
    record: FileRecord
    paths: list[str]


@dataclass(slots=True)
class _Tied:
    """Candidates of one size whose content agrees up to ``offset``; ``block`` is read next."""

    size: int
    members: list[_Candidate]
    hasher: blake3
    offset: int = 0
    block: int = FIRST_BLOCK

    def next_length(self, budget: int) -> int:
        """The length of the next read: the block, cut by the end of file and the budget."""
        cap = max(MIN_BLOCK, budget // len(self.members))
        return min(self.block, self.size - self.offset, cap)


def block_schedule(size: int, group_len: int = 2, budget: int = DEFAULT_MEMORY_BUDGET) -> list[int]:
    """The block lengths read from a file of ``size`` bytes in a group of ``group_len``.

    The lengths sum to ``size``. Pure; used by the pipeline and by benchmarks to
    compute the minimum number of bytes that must be read.
    """
    out: list[int] = []
    offset, block = 0, FIRST_BLOCK
    cap = max(MIN_BLOCK, budget // max(group_len, 1))
    while offset < size:
        n = min(block, size - offset, cap)
        out.append(n)
        offset += n
        block = min(block * GROWTH, MAX_BLOCK)
    return out


def _read_block(cand: _Candidate, offset: int, length: int) -> bytes | str:
    """``length`` bytes at ``offset``, or the reason the file must be dropped."""
    rec = cand.record
    try:
        fd = os.open(rec.path, os.O_RDONLY | getattr(os, "O_NOATIME", 0) | os.O_CLOEXEC)
    except PermissionError:
        try:  # O_NOATIME needs ownership; retry without it
            fd = os.open(rec.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            return _os_cause(exc)
    except OSError as exc:
        return _os_cause(exc)
    try:
        st = os.fstat(fd)
        if st.st_ino != rec.ino or st.st_dev != rec.dev:
            return "replaced by another file during the scan"
        data = os.pread(fd, length, offset)
        st = os.fstat(fd)
    except OSError as exc:
        return _os_cause(exc)
    finally:
        os.close(fd)
    if st.st_size != rec.size or st.st_mtime_ns != rec.mtime_ns or len(data) != length:
        return "changed while being read (size or mtime differs); skipped"
    return data


def _os_cause(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "vanished during the scan"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or str(exc)


class _Subgroups:
    """Splits a tied group by the content of one block, exactly (see module docstring)."""

    __slots__ = ("by_hash", "first", "first_block", "parent")

    def __init__(self, parent: _Tied) -> None:
        self.parent = parent
        self.first: list[_Candidate] | None = None
        self.first_block = b""
        self.by_hash: dict[int, list[tuple[bytes, list[_Candidate]]]] = {}

    def add(self, cand: _Candidate, block: bytes) -> None:
        if self.first is None:
            self.first, self.first_block = [cand], block
            return
        if block == self.first_block:
            self.first.append(cand)
            return
        h = xxhash.xxh3_128_intdigest(block)
        bucket = self.by_hash.setdefault(h, [])
        for rep, members in bucket:
            if rep == block:
                members.append(cand)
                return
        bucket.append((block, [cand]))

    def groups(self, length: int) -> Iterator[_Tied]:
        """The subgroups of two or more, advanced past a block of ``length`` bytes."""
        parts: list[tuple[bytes, list[_Candidate]]] = []
        if self.first is not None:
            parts.append((self.first_block, self.first))
        for bucket in self.by_hash.values():
            parts.extend(bucket)
        alive = [(rep, m) for rep, m in parts if len(m) > 1]
        for i, (rep, members) in enumerate(alive):
            # The last survivor takes the parent's hasher; the others copy it.
            hasher = self.parent.hasher if i == len(alive) - 1 else self.parent.hasher.copy()
            hasher.update(rep)
            p = self.parent
            yield _Tied(
                p.size, members, hasher, p.offset + length, min(p.block * GROWTH, MAX_BLOCK)
            )


def _batches(
    work: list[tuple[int, _Candidate]], length_of: Callable[[int], int], max_bytes: int
) -> Iterator[list[tuple[int, _Candidate]]]:
    """Cut a round's reads into batches of about ``max_bytes`` (and at most 256 reads)."""
    batch: list[tuple[int, _Candidate]] = []
    nbytes = 0
    for item in work:
        batch.append(item)
        nbytes += length_of(item[0])
        if nbytes >= max_bytes or len(batch) >= 256:
            yield batch
            batch, nbytes = [], 0
    if batch:
        yield batch


class ReplicaFinder:
    """Runs the stages over a stream of :class:`FileRecord` values.

    ``threads`` readers work in parallel (``os.pread`` and hashing release the
    GIL). Warnings go to ``on_warning``, progress to ``progress``.
    """

    def __init__(
        self,
        *,
        threads: int | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        on_warning: WarningSink = ignore_warning,
        progress: Progress | None = None,
        stats: DupesStats | None = None,
    ) -> None:
        self.threads = threads or min(4, (os.cpu_count() or 1) * 2)
        self.memory_budget = memory_budget
        self.on_warning = on_warning
        self.progress: Progress = progress or NullProgress()
        self.stats = stats if stats is not None else DupesStats()

    def _log(self, stage: str, groups: Sequence[_Tied]) -> None:
        n = sum(len(g.members) for g in groups)
        self.stats.survivors.append((stage, n))
        self.progress.log(f"{n} candidates in {len(groups)} groups after {stage}")

    def _warn(self, path: str, cause: str) -> None:
        self.stats.warnings += 1
        self.on_warning(ScanWarning(path, cause))

    def group_by_size(self, records: Iterable[FileRecord]) -> list[list[FileRecord]]:
        """Stage 1: files of equal size, groups of two or more."""
        by_size: dict[int, list[FileRecord]] = {}
        for rec in records:
            self.stats.files += 1
            self.stats.bytes_scanned += rec.size
            by_size.setdefault(rec.size, []).append(rec)
            self.progress.advance()
        return [g for g in by_size.values() if len(g) > 1]

    def collapse_inodes(self, size_groups: list[list[FileRecord]]) -> list[_Tied]:
        """Stage 2: one candidate per inode; groups of one inode drop out."""
        out: list[_Tied] = []
        for group in size_groups:
            by_inode: dict[tuple[int, int], _Candidate] = {}
            for rec in group:
                cand = by_inode.get((rec.dev, rec.ino))
                if cand is None:
                    by_inode[(rec.dev, rec.ino)] = _Candidate(rec, [rec.path])
                elif rec.path not in cand.paths:
                    cand.paths.append(rec.path)
            if len(by_inode) > 1:
                # Read in inode order: a cheap proxy for the order on disk.
                members = sorted(by_inode.values(), key=lambda c: (c.record.dev, c.record.ino))
                out.append(_Tied(group[0].size, members, blake3()))
        return out

    def refine(self, tied: list[_Tied]) -> Iterator[Group]:
        """Stage 3: block rounds until every group is read to its end; yields final groups."""
        round_no = 0
        pending = tied
        with ThreadPoolExecutor(self.threads, thread_name_prefix="sif-read") as pool:
            while pending:
                round_no += 1
                still: list[_Tied] = []
                for g in self._round(pool, pending):
                    if g.offset >= g.size:
                        yield self._finish(g)
                    else:
                        still.append(g)
                self._log(f"block round {round_no}", still)
                pending = still

    def _round(self, pool: ThreadPoolExecutor, groups: list[_Tied]) -> Iterator[_Tied]:
        """Read the next block of every member of ``groups``; yield the subgroups."""
        # Big groups read less at once, so that memory stays within the budget.
        lengths = [g.next_length(self.memory_budget) for g in groups]
        offsets = [g.offset for g in groups]
        work = [(gi, c) for gi, g in enumerate(groups) for c in g.members]
        splitters = [_Subgroups(g) for g in groups]
        remaining = [len(g.members) for g in groups]
        max_inflight = self.threads + 2
        batch_bytes = 1 << 20

        def run(batch: list[tuple[int, _Candidate]]) -> list[bytes | str]:
            return [_read_block(c, offsets[gi], lengths[gi]) for gi, c in batch]

        inflight: list[tuple[list[tuple[int, _Candidate]], Future[list[bytes | str]]]] = []
        batches = _batches(work, lambda gi: lengths[gi], batch_bytes)

        def fill() -> None:
            while len(inflight) < max_inflight:
                b = next(batches, None)
                if b is None:
                    return
                inflight.append((b, pool.submit(run, b)))

        fill()
        while inflight:
            batch, fut = inflight.pop(0)
            results = fut.result()
            fill()
            for (gi, cand), res in zip(batch, results, strict=True):
                if isinstance(res, str):
                    self._warn(cand.record.path, res)
                else:
                    self.stats.bytes_read += len(res)
                    self.progress.advance(len(res))
                    splitters[gi].add(cand, res)
                remaining[gi] -= 1
                if remaining[gi] == 0:
                    # A whole group is in: split it and free its blocks.
                    yield from splitters[gi].groups(lengths[gi])
                    splitters[gi] = _Subgroups(groups[gi])  # drop references to blocks

    def _finish(self, g: _Tied) -> Group:
        replicas = []
        for c in g.members:
            paths = tuple(sorted(c.paths))
            rec = c.record
            replicas.append(Replica(paths, rec.dev, rec.ino, rec.mtime_ns))
        replicas.sort(key=lambda r: r.path)
        return Group(g.size, "blake3:" + g.hasher.hexdigest(), tuple(replicas))

    def run(self, records: Iterable[FileRecord]) -> list[Group]:
        """All stages; the groups sorted by size (largest first), then by first path."""
        start = time.monotonic()
        self.progress.stage("scan", unit="files")
        size_groups = self.group_by_size(records)
        n = sum(len(g) for g in size_groups)
        self.stats.survivors.append(("grouping by size", n))
        self.progress.log(f"{n} candidates in {len(size_groups)} groups after grouping by size")
        tied = self.collapse_inodes(size_groups)
        self._log("collapsing hardlinks", tied)
        self.stats.candidates = sum(len(g.members) for g in tied)
        self.progress.stage("compare", total=sum(g.size * len(g.members) for g in tied), unit="B")
        groups = list(self.refine(tied))
        groups.sort(key=lambda g: (-g.size, g.replicas[0].path))
        self.stats.groups = len(groups)
        self.stats.redundant_files = sum(g.redundant_files for g in groups)
        self.stats.redundant_bytes = sum(g.redundant_bytes for g in groups)
        self.stats.seconds = time.monotonic() - start
        self.progress.close()
        return groups


def find_duplicates(
    paths: Iterable[str | os.PathLike[str]],
    *,
    min_size: int = 0,
    max_size: int | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    hidden: bool = True,
    follow_symlinks: bool = False,
    one_file_system: bool = False,
    empty: bool = False,
    threads: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    on_warning: WarningSink = ignore_warning,
    progress: Progress | None = None,
    stats: DupesStats | None = None,
) -> Iterator[Group]:
    """Groups of exact replicas among the files under ``paths``.

    Filters are those of :class:`sif.walk.WalkOptions` (empty files are left
    out unless ``empty``). Each group holds two or more distinct files whose
    bytes are equal, compared byte for byte; hardlinked names of one file are
    listed together in one :class:`Replica`. Per-file problems go to
    ``on_warning`` and never stop the run; figures go into ``stats``.

    Raises :class:`sif.errors.ConfigError` for bad filters, before any work.
    """
    options = WalkOptions(
        min_size=min_size,
        max_size=max_size,
        include=tuple(include),
        exclude=tuple(exclude),
        hidden=hidden,
        follow_symlinks=follow_symlinks,
        one_file_system=one_file_system,
        empty=empty,
    )
    stats = stats if stats is not None else DupesStats()
    walker = Walker(options, on_warning)
    finder = ReplicaFinder(
        threads=threads,
        memory_budget=memory_budget,
        on_warning=on_warning,
        progress=progress,
        stats=stats,
    )
    groups = finder.run(walker.walk(paths))
    stats.warnings += walker.stats.warnings
    return iter(groups)
