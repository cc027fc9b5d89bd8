"""Stage 3 of the replica pipeline: the block rounds, byte-exact (seed ``003``).

Every group still tied reads its next block, all groups in lock step; the
block grows geometrically (4 KiB first, then x4 up to :data:`MAX_BLOCK`).
Each byte of a file is read at most once (but see *Memory*, and with helper
threads a first block read past a file left to Python is read again); a file
leaves as soon as one of its blocks differs.

**Exactness.** The first block of every file (the whole file, when it is
that small) is grouped by a 64-bit xxh3 of it, then the members of one
hash by the bytes themselves as a dictionary key: Python compares
equal-hashing keys byte for byte, so only equal blocks meet. A later block
is grouped by comparing its bytes with the block of a representative of
each subgroup (``bytes ==``, a ``memcmp``). An xxh3-128 of the block only
serves to find the candidate subgroup when the block differs from the first
one; equal hashes with unequal bytes make separate subgroups. So a hash
collision can never make two different files replicas, and no third pass
(re-reading to confirm) is needed. When all files of a group agree, which
is the common case when most files are replicas (the seed's last line), no
hash is computed at all for a later block, only one ``memcmp`` per block.

**Digest.** Each final group carries the XXH3-128 digest of its content,
computed once per distinct block, not once per file. It names the content;
it decides nothing (the grouping is byte-exact), so a fast hash suffices.

**Changes during the scan.** A file is opened only if it is still the regular
file the walk saw (same device and inode, checked by ``fstat`` of the new
descriptor before any read: :func:`sif.fileio.open_regular`'s rules, never
blocking on a FIFO swapped in, and not through a symbolic link that was not
one during the walk); every read must give its full length, and after the
last read of a file that stays in a group, its ``fstat`` (for a file read
whole in the first round, once its group is known; a ``stat`` of its name
where its descriptor was not kept) must give the walk's device, inode,
size, mtime and ctime (the ctime moves with any write, a rename or an
unlink of the file, and ``utime`` cannot set it back). A later block is
checked so after each read. Otherwise the file
is dropped with a warning naming it ("changed while it was read"), and so
is one that vanished or cannot be read. A first block with no equal needs
no such proof: that file is in no group.

**Order.** The first blocks are read in batches of groups whose first
blocks fit :data:`FIRST_BATCH` together (a group that fits the budget but
not a batch is a batch alone), each batch in inode order (fclones and
rmlint read in disk order too): on a cold cache the disk seeks less, and
even from the page cache the kernel does less work than in the order of
sizes. The groups of a batch still tied are then read to their end, group
by group, before the next batch; a group too large for the budget goes in
lock step with the others of its kind, round after round.

**Memory.** Per process: two reusable buffers per block size (under 3 MiB
in all), the first blocks of one batch, plus the blocks of the subgroups
that a round starts, up to ``memory_budget`` bytes per group: the first
blocks of a group are keyed by content only while ``members x block``
fits the budget, and a later round keeps representatives while they fit;
past that a subgroup keeps only its hash and a match is confirmed by
reading its representative's block again, which happens only when very
many files of one size differ in one block. So memory is bounded whatever
the file sizes and group sizes. A file stays open from its first read to
the end of its batch (while the batch before had at least one file in
:data:`KEEP_OPEN_SHARE` tied; otherwise a file that ties is opened again,
once, for its later blocks), at most :func:`hold_limit` of them
(a quarter of the open-file limit); past that, and in the lock-step
rounds, a file is opened for one read and closed at once, so groups larger
than the open-file limit work.

**Cost.** Per file: ``open``, ``fstat``, ``pread`` of the first block and
``close``; per later block ``preadv`` and ``fstat`` through the descriptor
kept open (``open``, ``fstat``, ``preadv``, ``fstat``, ``close`` where none
is); one more ``fstat`` for a file read whole that ends in a group; and a few
hundred nanoseconds of Python (:func:`sif.exact.first.read_first`, in C
where ``sif.exact._firstc`` is built, and :meth:`_Table.read` are the hot
functions; anything unusual falls back to :func:`sif.fileio.open_regular`,
which names the cause).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import xxhash

from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.exact.first import read_first
from sif.exact.table import CHANGED, _Table
from sif.records import RecordColumns

__all__ = ["CHANGED", "DEFAULT_MEMORY_BUDGET", "FIRST_BLOCK", "GROWTH", "MAX_BLOCK", "_Table"]

FIRST_BLOCK = 4 * 1024
"""The first block: one page, enough to tell most different small files apart."""
GROWTH = 4
"""Each block is GROWTH times the one before: a file of n bytes takes O(log n) rounds."""
MAX_BLOCK = 1024 * 1024
"""The largest block: a read's fixed cost (~5 us) is then under 5% of its copy time."""
DEFAULT_MEMORY_BUDGET = 16 * 1024 * 1024
"""Bytes of subgroup representatives one group's round keeps, at most."""
FIRST_BATCH = 2 * 1024 * 1024
"""Bytes of first blocks read in one batch, in inode order, at most (and at most the
memory budget): enough files for the order to pay, little resident memory."""


@dataclass(slots=True)
class _Tied:
    """Candidates (indices into a :class:`_Table`) of one size, equal up to ``offset``."""

    size: int
    members: list[int]
    hasher: Any = None  # an xxh3_128 state, made when the group first survives a round
    offset: int = 0
    block: int = FIRST_BLOCK
    digest: str | None = None  # set once the group is read to its end
    reads: int = 0  # blocks read so far: the number of the round that read the last one

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
            reads = p.reads + 1
            if end >= p.size:  # finished: keep the digest, not the hasher
                yield _Tied(p.size, members, None, end, digest=hasher.hexdigest(), reads=reads)
            else:
                nxt = min(p.block * GROWTH, MAX_BLOCK)
                yield _Tied(p.size, members, hasher, end, nxt, reads=reads)


@dataclass
class _Outcome:
    """What refining one batch of groups found: groups as indices into its table."""

    groups: list[tuple[int, str, list[int]]] = field(default_factory=list)
    warnings: list[ScanWarning] = field(default_factory=list)
    bytes_read: int = 0
    survivors: list[tuple[str, int]] = field(default_factory=list)
    walk_rows: bool = False
    """Whether the groups name their members by the walk's indices (a task with rows:
    refined in the process that walked, on its columns) rather than by the rows of a
    compact table (a worker's)."""


class _Refiner:
    """Stage 3, the block rounds, over the candidates of one :class:`_Table`."""

    def __init__(
        self,
        table: _Table,
        budget: int,
        on_warning: WarningSink,
        progress: Progress,
        helpers: int = 0,
    ) -> None:
        self.table = table
        self.helpers = helpers
        """Threads that share the first blocks' system calls with this one."""
        self.budget = budget
        self._buffers: dict[int, tuple[bytearray, bytearray]] = {}
        self.on_warning = on_warning
        self.progress = progress
        self.outcome = _Outcome()
        self._survivors: list[int] = []  # by round: candidates still tied after it
        self.hold = hold_limit()
        # Whether the last batch found enough files tied to keep them open (0: never).
        self.keep_open = KEEP_OPEN_SHARE > 0

    def _drop(self, i: int, cause: str) -> None:
        w = ScanWarning(self.table.path(i), cause)
        self.outcome.warnings.append(w)
        self.on_warning(w)

    def _tally(self, reads: int, tied: int) -> None:
        """Count ``tied`` candidates as still tied after round ``reads``."""
        counts = self._survivors
        while len(counts) < reads:
            counts.append(0)
        counts[reads - 1] += tied

    def run(self, tied: list[_Tied]) -> _Outcome:
        """Block rounds until every group is read to its end.

        Groups whose first blocks fit the budget are read to their end batch
        by batch (:meth:`_first_blocks`); the others go in lock step, round
        after round (:meth:`_round`).
        """
        budget = self.budget
        # First blocks are keyed by their bytes, unless a group has so many
        # files that their blocks would not fit the budget: those go the
        # bounded way (representatives, then hashes), as every later block.
        keyed: list[_Tied] = []
        pending: list[_Tied] = []
        for g in tied:
            fits = min(g.size, FIRST_BLOCK) * len(g.members) <= budget
            (keyed if fits else pending).append(g)
        self._first_blocks(keyed)
        while pending:
            still: list[_Tied] = []
            for g in self._round(pending):
                if g.digest is not None:
                    self.outcome.groups.append((g.size, g.digest, g.members))
                else:
                    still.append(g)
            self._tally(pending[0].reads + 1, sum(len(g.members) for g in still))
            pending = still
        self.outcome.survivors = [(f"block round {n}", k) for n, k in enumerate(self._survivors, 1)]
        return self.outcome

    def _first_blocks(self, groups: list[_Tied]) -> None:
        """Every group of ``groups`` read to its end, batch by batch; the groups found go
        to the outcome.

        The groups go in batches whose first blocks fit :data:`FIRST_BATCH`
        (and the memory budget) together, with at most :attr:`hold` files
        longer than a block; the files of a batch are read in inode order (a
        proxy for their order on disk, and cheaper for the kernel even from
        the page cache) by :meth:`_first_batch`.
        """
        batch: list[_Tied] = []
        held = files = 0
        budget = min(self.budget, FIRST_BATCH)
        hold = max(self.hold, 1)
        for g in groups:
            cost = min(g.size, FIRST_BLOCK) * len(g.members)
            if batch and (held + cost > budget or files + len(g.members) > hold):
                self._first_batch(batch)
                batch, held, files = [], 0, 0
            batch.append(g)
            held += cost
            files += len(g.members)
        if batch:
            self._first_batch(batch)

    def _first_batch(self, groups: list[_Tied]) -> None:
        """Read the first block of every member of ``groups``, in inode order; split them;
        read the groups still tied to their end (:meth:`_rest`).

        The first blocks are :func:`sif.exact.first.read_first`'s (the hot
        loop of a tree of mostly unique files; compiled where the extension is
        built). The ``fstat`` comes before the read: only the regular file the
        walk saw (device, inode, size, mtime, ctime) is read. Anything else (a
        failed open, a file replaced or changed, a short read) goes through
        :meth:`_Table.read`, which reads it the careful way or names the
        cause. Every file read stays open (up to :attr:`hold` of them) until
        the batch is done: a file read whole is checked through it once its
        group is known (:meth:`_split_first`), a larger one reads its next
        blocks through it: one ``open`` a file, whatever its number of blocks.
        """
        rows = [i for g in groups for i in g.members]
        rows.sort(key=self.table.ino.__getitem__)
        fds: dict[int, int] = {}  # the files kept open for their next blocks
        hold = self.hold if self.keep_open else 0
        try:
            got, keys = read_first(self.table, rows, FIRST_BLOCK, hold, fds, self.helpers)
            before = self.outcome.bytes_read
            found = len(self.outcome.groups)
            tied: list[_Tied] = []
            for g in groups:
                tied.extend(self._split_first(g, got, keys, fds))
            self.progress.advance(self.outcome.bytes_read - before)
            del got
            grouped = sum(len(g.members) for g in tied)
            grouped += sum(len(m) for _, _, m in self.outcome.groups[found:])
            # Where few files have an equal first block (a tree of unique files), keeping
            # every file open until the batch ends costs more than reopening those few.
            self.keep_open = grouped * KEEP_OPEN_SHARE >= len(rows)
            self._rest(tied, fds)
        finally:
            for fd in fds.values():
                os.close(fd)

    def _split_first(
        self,
        g: _Tied,
        got: dict[int, bytes | bytearray | str],
        keys: dict[int, int],
        fds: dict[int, int],
    ) -> list[_Tied]:
        """``g`` split by its members' first blocks in ``got``: the subgroups of two or more
        still to read (a group read whole goes to the outcome).

        Keyed by the 64-bit xxh3 of the block in ``keys`` first (ten times
        cheaper than Python's hash of the bytes; a group whose keys are all
        different, the usual case of unique files, is done in C loops);
        the members of one key are then compared
        byte for byte with the first block of each subgroup (a ``memcmp``;
        one subgroup but for a collision), so only equal blocks meet. A file
        read whole is checked through its descriptor in ``fds``
        (:meth:`_unchanged`).
        """
        size = g.size
        length = min(size, FIRST_BLOCK)
        hashes = list(map(keys.get, g.members))
        if None not in hashes and len(set(hashes)) == len(hashes):
            self.outcome.bytes_read += length * len(hashes)
            self._tally(1, 0)
            return []
        by_hash: dict[int, list[int]] = {}
        bytes_read = 0
        for i, key in zip(g.members, hashes, strict=True):
            if key is None:
                self._drop(i, cast(str, got[i]))
                continue
            bytes_read += length
            members = by_hash.get(key)
            if members is None:
                by_hash[key] = [i]
            else:
                members.append(i)
        self.outcome.bytes_read += bytes_read
        out: list[_Tied] = []
        if len(by_hash) == len(g.members):  # all different: the usual case of unique files
            self._tally(1, 0)
            return out
        tied = 0
        for same in by_hash.values():
            if len(same) < 2:
                continue
            by_block: list[tuple[bytes | bytearray, list[int]]] = []
            for i in same:  # blocks only: what could not be read is in no hash
                block = cast("bytes | bytearray", got[i])
                for rep, members in by_block:
                    if rep == block:
                        members.append(i)
                        break
                else:
                    by_block.append((block, [i]))
            for block, members in by_block:
                if len(members) < 2:
                    continue
                if length == size:  # read whole: the check the read left out, now
                    members = self._unchanged(members, fds)
                    if len(members) < 2:
                        continue
                    digest = xxhash.xxh3_128_hexdigest(block)
                    self.outcome.groups.append((size, digest, members))
                else:
                    nxt = min(g.block * GROWTH, MAX_BLOCK)
                    out.append(_Tied(size, members, xxhash.xxh3_128(block), length, nxt, reads=1))
                    tied += len(members)
        self._tally(1, tied)
        return out

    def _rest(self, groups: list[_Tied], fds: dict[int, int]) -> None:
        """Read ``groups`` to their end, one group (and its subgroups) after another;
        the groups found go to the outcome.

        A member in ``fds`` is read through that descriptor (``preadv``, then
        ``fstat``: :meth:`_Table.read_open`; the ``fstat`` after its last read
        is its proof); a member not kept open is opened once for all its
        blocks (:meth:`_Table.open_checked`) while :attr:`hold` allows; any
        other member is opened for each read (:meth:`_Table.read`).
        """
        stack = groups[::-1]
        found = self.outcome.groups
        table, hold = self.table, self.hold
        while stack:
            g = stack.pop()
            if g.reads == 1 and len(fds) < hold:
                for i in g.members:
                    if i not in fds and len(fds) < hold:
                        fd = table.open_checked(i)
                        if fd is not None:
                            fds[i] = fd
            subgroups = list(self._round([g], fds))
            tied = 0
            for sub in reversed(subgroups):
                if sub.digest is None:
                    stack.append(sub)
                    tied += len(sub.members)
                    continue
                found.append((sub.size, sub.digest, sub.members))
            self._tally(g.reads + 1, tied)

    def _unchanged(self, members: list[int], fds: dict[int, int]) -> list[int]:
        """``members`` without (and warned of) those that changed since the walk: checked
        through their descriptor in ``fds`` (:meth:`_Table.unchanged_open`), else by name
        (:meth:`_Table.unchanged`)."""
        kept = []
        table = self.table
        for i in members:
            fd = fds.get(i)
            cause = table.unchanged(i) if fd is None else table.unchanged_open(i, fd)
            if cause is None:
                kept.append(i)
            else:
                self._drop(i, cause)
        return kept

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

    def _round(self, groups: list[_Tied], fds: dict[int, int] | None = None) -> Iterator[_Tied]:
        """Read the next block of every member of ``groups``; yield the subgroups.

        Blocks are read into two buffers reused from group to group (the first
        member's, which represents the subgroup, and the others'), so when most
        files agree (the common case for large files) a block costs one
        ``preadv`` and one ``memcmp``, and nothing is allocated; only a block
        that starts another subgroup is copied. A member in ``fds`` is read
        through its open descriptor.
        """
        table = self.table
        read, read_open = table.read, table.read_open
        fds = fds or {}
        advance = self.progress.advance
        for g in groups:
            length = g.next_length()
            offset = g.offset
            split = _Subgroups(g, self.budget, partial(self._reread, offset=offset, length=length))
            first, other = self._buffers_for(length)
            n_read = 0
            for i in g.members:
                into = first if split.first is None else other
                fd = fds.get(i)
                if fd is None:
                    res = read(i, offset, length, into)
                else:
                    res = read_open(i, fd, offset, length, into)
                if isinstance(res, str):
                    self._drop(i, res)
                else:
                    n_read += length
                    split.add(i, res)
            self.outcome.bytes_read += n_read
            advance(n_read)
            yield from split.groups(length)


KEEP_OPEN_SHARE = 8
"""The files of a batch stay open after their first block while at least one in this
many files of the batch before had an equal first block (0: never; a file that ties is
then opened again, once, for its later blocks)."""


def hold_limit() -> int:
    """How many files a refiner keeps open at most: a quarter of the soft limit on open
    files (a caller may hold others), and no more than a batch can hold."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(0, min(FIRST_BATCH // FIRST_BLOCK, soft // 4))


_Task = tuple[_Table, "list[int] | None", list[int], list[int], int]
"""A share of the groups: its table, the table's rows of the groups one after the other
(``None``: all rows, in order), the groups' sizes and lengths, and the memory budget."""


class _Share:
    """A share of the groups as a pool hands it out (:func:`sif.executors.shared_map`).

    Made with the walk's columns and indices: the process that walked refines it
    on them (:meth:`_Table.over`, no copy). A share sent to a worker is pickled
    as a share of a compact table of its candidates only, made at that moment,
    so only the shares the workers take cost a table: before, every share got
    one, also those this process then refined itself, which needed no copy (on
    ``/usr``, 101 k candidates, the tables took 0.09 CPU s, ~10 ms a column).

    The pickling runs in the pool's queue feeder thread while this one refines:
    the columns must not change meanwhile, so the walk's raw names are decoded
    here, when the share is made (a no-op after the first).
    """

    __slots__ = ("_cols", "_table", "budget", "flat", "lengths", "sizes")

    def __init__(
        self,
        cols: RecordColumns | None,
        flat: list[int] | None,
        sizes: list[int],
        lengths: list[int],
        budget: int,
        table: _Table | None = None,
    ) -> None:
        if cols is not None:
            cols.names  # noqa: B018 (decoded before the share can be pickled: see above)
        self._cols, self._table, self.flat = cols, table, flat
        self.sizes, self.lengths, self.budget = sizes, lengths, budget

    def __reduce__(self) -> tuple[Any, ...]:
        table = self._table
        if self._cols is not None:
            table = _Table(self._cols, self.flat or [])
        return (_Share, (None, None, self.sizes, self.lengths, self.budget, table))

    def task(self) -> _Task:
        if self._cols is not None:
            return (_Table.over(self._cols), self.flat, self.sizes, self.lengths, self.budget)
        assert self._table is not None
        return (self._table, None, self.sizes, self.lengths, self.budget)


def _refine_share(share: _Share) -> _Outcome:
    """:func:`_refine_task` of a :class:`_Share`, here or in a worker (no progress: the
    caller advances it as outcomes come in)."""
    return _refine_task(share.task())


def _refine_task(task: _Task, progress: Progress | None = None, helpers: int = 0) -> _Outcome:
    """Refine a share of the groups (in a worker process, or here with ``progress`` and
    ``helpers`` threads for the first blocks).

    The outcome's groups name their members by the table's rows."""
    table, rows, sizes, lengths, budget = task
    tied: list[_Tied] = []
    start = 0
    for size, n in zip(sizes, lengths, strict=True):
        members = list(range(start, start + n)) if rows is None else rows[start : start + n]
        tied.append(_Tied(size, members))
        start += n
    refiner = _Refiner(table, budget, ignore_warning, progress or NullProgress(), helpers)
    outcome = refiner.run(tied)
    outcome.walk_rows = rows is not None
    return outcome
