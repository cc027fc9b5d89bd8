"""Exact replica groups, as the seed ``003`` describes, in fclones-style stages.

The chain, each stage a list of candidate groups in and a list out, singletons
dropped and survivors logged after every stage:

1. **size**: files are grouped by size (the seed's free auxiliary information);
2. **inode**: names of one inode (hardlinks) become one candidate, so a file is
   never read twice nor counted as wasted space; groups of one inode drop out;
3. **block rounds**: every group still tied reads its next block, all groups in
   lock step; the block grows geometrically (4 KiB first, then x4 up to
   :data:`MAX_BLOCK`). Each byte of a file is read at most once (but see
   *Memory*); a file leaves as soon as one of its blocks differs.

**Exactness.** A block is grouped by comparing its bytes with the block of a
representative of each subgroup (``bytes ==``, a ``memcmp``). An xxh3-128 of
the block only serves to find the candidate subgroup when the block differs
from the first one; equal hashes with unequal bytes make separate subgroups.
So a hash collision can never make two different files replicas, and no third
pass (re-reading to confirm) is needed. When all files of a group agree, which
is the common case when most files are replicas (the seed's last line), no
hash is computed at all, only one ``memcmp`` per block.

**Digest.** Each final group carries the XXH3-128 digest of its content,
computed once per distinct block, not once per file. It names the content;
it decides nothing (the grouping is byte-exact), so a fast hash suffices:
BLAKE3 would cost a sixth of the time on large files.

**Changes during the scan.** A file is opened only if it is still the regular
file the walk saw (same device and inode: :func:`sif.fileio.open_regular`,
never blocking on a FIFO swapped in, and not through a symbolic link that
was not one during the walk); after every read, ``fstat`` of the open
descriptor must give the walk's size, mtime and ctime (which ``utime``
cannot restore), and the read its full length. Otherwise the file is
dropped with a warning naming it ("changed while it was read"), and so is
one that vanished or cannot be read. The other names of a file in a group
(hardlinks, symlinks) are checked at the end to still name it.

**Memory.** Per process: two reusable buffers per block size (under 3 MiB
in all), plus the representatives of the subgroups that a round starts, up
to ``memory_budget`` bytes; past that a subgroup keeps only its hash and a
match is confirmed by reading its representative's block again, which
happens only when very many files of one size differ in one block. So
memory is bounded whatever the file sizes and group sizes. Files are opened
for one read and closed at once, so groups larger than the open-file limit
work. Small files (one block) are keyed by their whole content.
"""

from __future__ import annotations

import errno
import os
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import xxhash

from sif.errors import ConfigError
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.executors import fork_pool, shared_map
from sif.fileio import open_regular
from sif.walk import RecordColumns, WalkOptions, parallel_walk

FIRST_BLOCK = 4 * 1024
"""The first block: one page, enough to tell most different small files apart."""
GROWTH = 4
"""Each block is GROWTH times the one before: a file of n bytes takes O(log n) rounds."""
MAX_BLOCK = 1024 * 1024
"""The largest block: a read's fixed cost (~5 us) is then under 5% of its copy time."""
DEFAULT_MEMORY_BUDGET = 16 * 1024 * 1024
"""Bytes of subgroup representatives one group's round keeps, at most."""


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


@dataclass(slots=True)
class _Tied:
    """Candidates (indices into a :class:`_Table`) of one size, equal up to ``offset``."""

    size: int
    members: list[int]
    hasher: Any = None  # an xxh3_128 state, made when the group first survives a round
    offset: int = 0
    block: int = FIRST_BLOCK
    digest: str | None = None  # set once the group is read to its end

    def next_length(self) -> int:
        """The length of the next read: the block, cut by the end of file."""
        return min(self.block, self.size - self.offset)


def block_schedule(size: int) -> list[int]:
    """The block lengths read from a file of ``size`` bytes; they sum to ``size``.

    Pure; benchmarks use it to compute the minimum number of bytes to read.
    """
    out: list[int] = []
    offset, block = 0, FIRST_BLOCK
    while offset < size:
        n = min(block, size - offset)
        out.append(n)
        offset += n
        block = min(block * GROWTH, MAX_BLOCK)
    return out


CHANGED = "changed while it was read; skipped"
"""The warning for a file whose size, mtime or ctime moved while sif read it."""


class _Table:
    """The candidates a refiner works on, column by column; a candidate is an index.

    Paths are kept as (directory, name) like :class:`RecordColumns` and joined
    only for a read: a table of 10^5 candidates stays a few MB, to keep and
    to send to a worker.
    """

    __slots__ = ("ctime_ns", "dev", "dir_of", "dirs", "ino", "mtime_ns", "names", "size", "symlink")

    def __init__(self, cols: RecordColumns, indices: list[int]) -> None:
        local: dict[int, int] = {}
        self.dirs: list[str] = []
        self.dir_of = array("I")
        for i in indices:
            d = cols.dir_of[i]
            k = local.get(d)
            if k is None:
                k = local[d] = len(self.dirs)
                self.dirs.append(cols.dirs[d])
            self.dir_of.append(k)
        self.names = [cols.names[i] for i in indices]
        self.dev = array("Q", [cols.dev[i] for i in indices])
        self.ino = array("Q", [cols.ino[i] for i in indices])
        self.size = array("q", [cols.size[i] for i in indices])
        self.mtime_ns = array("q", [cols.mtime_ns[i] for i in indices])
        self.ctime_ns = array("q", [cols.ctime_ns[i] for i in indices])
        self.symlink = bytes([cols.symlink[i] for i in indices])

    def path(self, i: int) -> str:
        return self.dirs[self.dir_of[i]] + self.names[i]

    def read(
        self, i: int, offset: int, length: int, into: bytearray | None = None
    ) -> bytes | bytearray | str:
        """``length`` bytes at ``offset`` of candidate ``i``, or why it must be dropped.

        One ``open``, ``fstat``, ``pread``, ``fstat`` and ``close``. The open
        takes only the regular file the walker saw (same device and inode; no
        FIFO, which would block; no symlink where the walk met none), and the
        ``fstat`` after the read proves it unchanged (size, mtime and ctime),
        so a file changed or replaced meanwhile is never grouped. With
        ``into`` (a buffer of ``length`` bytes, reused from read to read), the
        bytes land there: no allocation and no fresh pages to fault in, which
        makes large blocks a third cheaper in system time.
        """
        path = self.dirs[self.dir_of[i]] + self.names[i]
        try:
            fd, _ = open_regular(
                path,
                expect=(self.dev[i], self.ino[i]),
                follow_symlinks=bool(self.symlink[i]),
                noatime=True,
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
        except FileNotFoundError:
            return "vanished during the scan"
        except PermissionError:
            return "permission denied"
        except OSError as exc:
            return exc.strerror or str(exc)
        if (
            st.st_size != self.size[i]
            or st.st_mtime_ns != self.mtime_ns[i]
            or st.st_ctime_ns != self.ctime_ns[i]
            or n != length
        ):
            return CHANGED
        return data


class _Subgroups:
    """Splits a tied group by the content of one block, exactly (see module docstring).

    Representatives of new subgroups are kept while their bytes fit in
    ``budget``; past it a subgroup keeps only its hash, and a block whose
    hash matches is confirmed by reading the representative's block again
    (``reread``). So memory stays bounded even if a thousand files of one
    size all differ, and extra reads happen only then.
    """

    __slots__ = ("budget", "by_hash", "first", "first_block", "kept", "parent", "reread")

    def __init__(
        self, parent: _Tied, budget: int, reread: Callable[[int], bytes | bytearray | str]
    ) -> None:
        self.parent = parent
        self.budget = budget
        self.reread = reread
        self.kept = 0
        self.first: list[int] | None = None
        self.first_block: bytes | bytearray = b""
        self.by_hash: dict[int, list[tuple[bytes | None, list[int]]]] = {}

    def add(self, cand: int, block: bytes | bytearray) -> None:
        """Put ``cand`` with the members whose block equals ``block`` (copied if kept)."""
        if self.first is None:  # the refiner keeps this buffer intact for the round
            self.first, self.first_block = [cand], block
            return
        if block == self.first_block:  # the common case when most files are replicas
            self.first.append(cand)
            return
        h = xxhash.xxh3_128_intdigest(block)
        bucket = self.by_hash.setdefault(h, [])
        for rep, members in bucket:
            if rep is None:
                rep = self._rep(members[0])
            if rep == block:  # equal hashes are not enough: compare the bytes
                members.append(cand)
                return
        if self.kept + len(block) <= self.budget:
            self.kept += len(block)
            bucket.append((bytes(block), [cand]))
        else:
            bucket.append((None, [cand]))

    def _rep(self, member: int) -> bytes | None:
        data = self.reread(member)
        return None if isinstance(data, str) else bytes(data)  # unreadable now: no match

    def groups(self, length: int) -> Iterator[_Tied]:
        """The subgroups of two or more, advanced past a block of ``length`` bytes."""
        parts: list[tuple[bytes | bytearray | None, list[int]]] = []
        if self.first is not None:
            parts.append((self.first_block, self.first))
        for bucket in self.by_hash.values():
            parts.extend(bucket)
        alive = [(rep, m) for rep, m in parts if len(m) > 1]
        p = self.parent
        end = p.offset + length
        for i, (rep, members) in enumerate(alive):
            if rep is None:
                rep = self._rep(members[0])
                if rep is None:
                    continue  # the representative changed since: sif cannot vouch for it
            # The last survivor takes the parent's hasher; the others copy it.
            hasher = p.hasher or xxhash.xxh3_128()
            if i < len(alive) - 1:
                hasher = hasher.copy()
            hasher.update(rep)
            if end >= p.size:  # finished: keep the digest, not the hasher
                yield _Tied(p.size, members, None, end, digest=hasher.hexdigest())
            else:
                yield _Tied(p.size, members, hasher, end, min(p.block * GROWTH, MAX_BLOCK))


@dataclass
class _Outcome:
    """What refining one batch of groups found: groups as indices into its table."""

    groups: list[tuple[int, str, list[int]]] = field(default_factory=list)
    warnings: list[ScanWarning] = field(default_factory=list)
    bytes_read: int = 0
    survivors: list[tuple[str, int]] = field(default_factory=list)


class _Refiner:
    """Stage 3, the block rounds, over the candidates of one :class:`_Table`."""

    def __init__(
        self,
        table: _Table,
        budget: int,
        on_warning: WarningSink,
        progress: Progress,
    ) -> None:
        self.table = table
        self.budget = budget
        self._buffers: dict[int, tuple[bytearray, bytearray]] = {}
        self.on_warning = on_warning
        self.progress = progress
        self.outcome = _Outcome()

    def _drop(self, i: int, cause: str) -> None:
        w = ScanWarning(self.table.path(i), cause)
        self.outcome.warnings.append(w)
        self.on_warning(w)

    def run(self, tied: list[_Tied]) -> _Outcome:
        """Block rounds until every group is read to its end."""
        pending = tied
        round_no = 0
        while pending:
            round_no += 1
            still: list[_Tied] = []
            # Small files are keyed by their whole content, unless so many that
            # their bytes would not fit the budget: those go the bounded way.
            small: list[_Tied] = []
            large: list[_Tied] = []
            for g in pending:
                whole = g.offset == 0 and g.size <= FIRST_BLOCK
                fits = g.size * len(g.members) <= self.budget
                (small if whole and fits else large).append(g)
            done = list(self._whole(small))
            done.extend(self._round(large))
            for g in done:
                if g.digest is not None:
                    self.outcome.groups.append((g.size, g.digest, g.members))
                else:
                    still.append(g)
            self.outcome.survivors.append(
                (f"block round {round_no}", sum(len(g.members) for g in still))
            )
            pending = still
        return self.outcome

    def _whole(self, groups: list[_Tied]) -> Iterator[_Tied]:
        """Groups of small files, read whole in one go and keyed by their bytes (exact)."""
        read = self.table.read
        advance = self.progress.advance
        for g in groups:
            by_content: dict[bytes, list[int]] = {}
            size = g.size
            for i in g.members:
                res = read(i, 0, size)
                if type(res) is str:
                    self._drop(i, res)
                    continue
                self.outcome.bytes_read += size
                advance(size)
                by_content.setdefault(res, []).append(i)  # type: ignore[arg-type]
            for content, members in by_content.items():
                if len(members) > 1:
                    digest = xxhash.xxh3_128_hexdigest(content)
                    yield _Tied(size, members, None, size, digest=digest)

    def _reread(self, i: int, offset: int, length: int) -> bytes | bytearray | str:
        """A block read again to confirm a match (memory budget exceeded); counted."""
        data = self.table.read(i, offset, length)
        if not isinstance(data, str):
            self.outcome.bytes_read += length
        return data

    def _buffers_for(self, length: int) -> tuple[bytearray, bytearray]:
        """Two reusable buffers of ``length`` bytes: the first member's block, the others'."""
        pair = self._buffers.get(length)
        if pair is None:
            pair = (bytearray(length), bytearray(length))
            if length & (length - 1) == 0:  # block sizes recur; the tails of files do not
                self._buffers[length] = pair
        return pair

    def _round(self, groups: list[_Tied]) -> Iterator[_Tied]:
        """Read the next block of every member of ``groups``; yield the subgroups.

        Blocks are read into two buffers reused from group to group (the first
        member's, which represents the subgroup, and the others'), so when most
        files agree (the common case for large files) a block costs one
        ``preadv`` and one ``memcmp``, and nothing is allocated; only a block
        that starts another subgroup is copied.
        """
        read = self.table.read
        for g in groups:
            length = g.next_length()
            offset = g.offset
            split = _Subgroups(g, self.budget, partial(self._reread, offset=offset, length=length))
            first, other = self._buffers_for(length)
            for i in g.members:
                res = read(i, offset, length, first if split.first is None else other)
                if isinstance(res, str):
                    self._drop(i, res)
                else:
                    self.outcome.bytes_read += length
                    self.progress.advance(length)
                    split.add(i, res)
            yield from split.groups(length)


_Task = tuple[_Table, list[int], list[int], int]
"""A worker's share: its table, the group sizes and lengths, and the memory budget."""


def _refine_task(task: _Task, progress: Progress | None = None) -> _Outcome:
    """Refine a share of the groups (in a worker process, or here with ``progress``)."""
    table, sizes, lengths, budget = task
    tied: list[_Tied] = []
    start = 0
    for size, n in zip(sizes, lengths, strict=True):
        tied.append(_Tied(size, list(range(start, start + n))))
        start += n
    return _Refiner(table, budget, ignore_warning, progress or NullProgress()).run(tied)


class ReplicaFinder:
    """Runs the stages; :meth:`run` is the whole chain after the walk.

    ``jobs`` processes (this one and ``jobs - 1`` workers) share the block
    rounds; groups are independent, so each goes whole to one process.
    Warnings go to ``on_warning``, progress to ``progress``.
    """

    def __init__(
        self,
        *,
        jobs: int | None = None,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        on_warning: WarningSink = ignore_warning,
        progress: Progress | None = None,
        stats: DupesStats | None = None,
    ) -> None:
        self.jobs = jobs or os.cpu_count() or 1
        self.memory_budget = memory_budget
        self.on_warning = on_warning
        self.progress: Progress = progress or NullProgress()
        self.stats = stats if stats is not None else DupesStats()

    def _log(self, stage: str, n: int) -> None:
        self.stats.survivors.append((stage, n))
        self.progress.log(f"{n} candidates after {stage}")

    def group_by_size(self, cols: RecordColumns) -> list[list[int]]:
        """Stage 1: indices of files of equal size, groups of two or more."""
        sizes = cols.size
        self.stats.files += len(cols)
        self.stats.bytes_scanned += sum(sizes)
        counts = Counter(sizes)
        by_size: dict[int, list[int]] = {}
        for i, size in enumerate(sizes):
            if counts[size] > 1:
                by_size.setdefault(size, []).append(i)
        groups = list(by_size.values())
        self._log("grouping by size", sum(map(len, groups)))
        return groups

    def collapse_inodes(
        self, cols: RecordColumns, size_groups: list[list[int]]
    ) -> tuple[list[list[int]], dict[int, list[int]]]:
        """Stage 2: one candidate per inode; groups of one inode drop out.

        Returns the groups (in inode order, a cheap proxy for the order on disk)
        and, for candidates with more names, the indices of those other names.
        The candidate (the name read) is the file's own name rather than a
        symlink to it, when it has one.
        """
        dev, ino, symlink = cols.dev, cols.ino, cols.symlink
        out: list[list[int]] = []
        links: dict[int, list[int]] = {}
        for group in size_groups:
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
            if len(first) > 1:
                uniq = list(first.values()) if len(first) < len(group) else group
                uniq.sort(key=ino.__getitem__)
                out.append(uniq)
        self._log("collapsing hardlinks", sum(map(len, out)))
        return out, links

    def run(self, cols: RecordColumns, pool: Any = None) -> Iterator[Group]:
        """Stages 1 to 3; the groups sorted by size (largest first), then by first path.

        All the work is done, and :attr:`stats` filled, before this returns;
        the :class:`Group` values are made one by one as they are read.

        ``pool`` (from :func:`sif.executors.fork_pool`) shares the block rounds
        with this process.
        """
        start = time.monotonic()
        self.progress.stage("grouping", unit="files")
        groups, links = self.collapse_inodes(cols, self.group_by_size(cols))
        n = sum(map(len, groups))
        self.stats.candidates = n
        total = sum(cols.size[g[0]] * len(g) for g in groups)
        self.progress.stage("comparing", total=total, unit="bytes")
        shares = self._shares(groups, self.jobs if pool is not None else 1)
        tasks = (
            (
                _Table(cols, [i for g in share for i in g]),
                [cols.size[g[0]] for g in share],
                [len(g) for g in share],
                self.memory_budget,
            )
            for share in shares
        )  # made one at a time, as the pool takes them: memory stays small
        parallel = pool is not None and len(shares) > 1
        # Alone, this process reports progress as it reads; shared, as results come in.
        local = _refine_task if parallel else partial(_refine_task, progress=self.progress)
        outcomes = shared_map(_refine_task, tasks, pool if parallel else None, local=local)
        # Groups stay compact (size, digest, member indices) until they are read out.
        found: list[tuple[int, str, str, list[int]]] = []
        rounds: dict[str, int] = {}
        for k, outcome in outcomes:
            flat = [i for g in shares[k] for i in g]
            for size, digest, members in outcome.groups:
                ids = [flat[m] for m in members]
                self._check_names(cols, links, ids)
                first = min(cols.path(j) for i in ids for j in (i, *links.get(i, ())))
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

    def _shares(self, groups: list[list[int]], jobs: int) -> list[list[list[int]]]:
        """Cut the groups into about 4 shares per worker (none if too few to pay)."""
        n = sum(map(len, groups))
        if jobs < 2 or n < PARALLEL_MIN_FILES:
            return [groups] if groups else []
        per_share = n // (4 * jobs) + 1
        shares: list[list[list[int]]] = [[]]
        count = 0
        for g in groups:
            if count >= per_share:
                shares.append([])
                count = 0
            shares[-1].append(g)
            count += len(g)
        return shares

    @staticmethod
    def _group(
        cols: RecordColumns, links: dict[int, list[int]], size: int, digest: str, members: list[int]
    ) -> Group:
        replicas = []
        for i in members:
            names = (i, *links.get(i, ()))
            own = sorted(cols.path(j) for j in names if not cols.symlink[j])
            symlinks = tuple(sorted(cols.path(j) for j in names if cols.symlink[j]))
            replicas.append(
                Replica(
                    (*own, *symlinks),
                    cols.dev[i],
                    cols.ino[i],
                    cols.mtime_ns[i],
                    symlinks=symlinks,
                    ctime_ns=cols.ctime_ns[i],
                )
            )
        replicas.sort(key=lambda r: r.path)
        return Group(size, "xxh3-128:" + digest, tuple(replicas))


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

    ``jobs`` processes (default: one per core) share the walk and the
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
    pool = fork_pool(finder.jobs)
    try:
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
