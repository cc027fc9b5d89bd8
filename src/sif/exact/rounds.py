"""Stage 3 of the replica pipeline: the block rounds, byte-exact (seed ``003``).

Every group still tied reads its next block, all groups in lock step; the
block grows geometrically (4 KiB first, then x4 up to :data:`MAX_BLOCK`).
Each byte of a file is read at most once (but see *Memory*); a file leaves
as soon as one of its blocks differs.

**Exactness.** The first block of every file (the whole file, when it is
that small) is grouped by its bytes as a dictionary key: Python compares
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
last read of a file that stays in a group, its ``fstat`` (or, for a file
read whole in the first round, a ``stat`` of its name once its group is
known) must give the walk's device, inode, size, mtime and ctime (the ctime
moves with any write, and ``utime`` cannot set it back). Otherwise the file
is dropped with a warning naming it ("changed while it was read"), and so
is one that vanished or cannot be read. A first block with no equal needs
no such proof: that file is in no group.

**Memory.** Per process: two reusable buffers per block size (under 3 MiB
in all), plus the blocks of the subgroups that a round starts, up to
``memory_budget`` bytes per group: the first blocks of a group are keyed
by content only while ``members x block`` fits the budget, and a later
round keeps representatives while they fit; past that a subgroup keeps
only its hash and a match is confirmed by reading its representative's
block again, which happens only when very many files of one size differ in
one block. So memory is bounded whatever the file sizes and group sizes.
Files are opened for one read and closed at once, so groups larger than the
open-file limit work.

**Cost.** Per file and block: ``open``, ``fstat``, ``pread``, ``fstat``,
``close``, and a few hundred nanoseconds of Python (:meth:`_Table.read` is
the one hot function; anything unusual falls back to
:func:`sif.fileio.open_regular`, which names the cause).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from stat import S_ISREG
from typing import Any

import xxhash

from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning
from sif.fileio import open_regular
from sif.records import RecordColumns

FIRST_BLOCK = 4 * 1024
"""The first block: one page, enough to tell most different small files apart."""
GROWTH = 4
"""Each block is GROWTH times the one before: a file of n bytes takes O(log n) rounds."""
MAX_BLOCK = 1024 * 1024
"""The largest block: a read's fixed cost (~5 us) is then under 5% of its copy time."""
DEFAULT_MEMORY_BUDGET = 16 * 1024 * 1024
"""Bytes of subgroup representatives one group's round keeps, at most."""


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


_NOATIME = getattr(os, "O_NOATIME", 0)
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
"""The open of a fast read: :func:`sif.fileio.open_regular`'s flags."""
_OPEN_FLAGS = (_FLAGS | _NOATIME | os.O_NOFOLLOW, _FLAGS | _NOATIME)
"""By the candidate's ``symlink`` column: a name that was no link is opened ``O_NOFOLLOW``;
``O_NOATIME`` (reading leaves the access time alone) where the kernel allows it."""
_OPEN_FLAGS_ATIME = (_FLAGS | os.O_NOFOLLOW, _FLAGS)
"""The same without ``O_NOATIME``, which only a file's owner (or root) may ask for."""


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
        # One C loop a column (map over the walk's arrays): no Python per candidate.
        self.dirs: list[str] = cols.dirs
        self.dir_of = array("I", map(cols.dir_of.__getitem__, indices))
        self.names = list(map(cols.names.__getitem__, indices))
        self.dev = array("Q", map(cols.dev.__getitem__, indices))
        self.ino = array("Q", map(cols.ino.__getitem__, indices))
        self.size = array("q", map(cols.size.__getitem__, indices))
        self.mtime_ns = array("q", map(cols.mtime_ns.__getitem__, indices))
        self.ctime_ns = array("q", map(cols.ctime_ns.__getitem__, indices))
        self.symlink = array("B", map(cols.symlink.__getitem__, indices))

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
        if (
            st.st_size != self.size[i]
            or st.st_mtime_ns != self.mtime_ns[i]
            or st.st_ctime_ns != self.ctime_ns[i]
        ):
            return CHANGED
        return None

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
        if (
            n != length
            or st.st_size != self.size[i]
            or st.st_mtime_ns != self.mtime_ns[i]
            or st.st_ctime_ns != self.ctime_ns[i]
        ):
            return CHANGED
        return data


def _cause(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "vanished during the scan"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or str(exc)


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
        budget = self.budget
        while pending:
            round_no += 1
            still: list[_Tied] = []
            # First blocks are keyed by their bytes, unless a group has so many
            # files that their blocks would not fit the budget: those go the
            # bounded way (representatives, then hashes), as every later block.
            keyed: list[_Tied] = []
            other: list[_Tied] = []
            for g in pending:
                fits = g.offset == 0 and min(g.size, FIRST_BLOCK) * len(g.members) <= budget
                (keyed if fits else other).append(g)
            done = self._first_blocks(keyed)
            done.extend(self._round(other))
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

    def _first_blocks(self, groups: list[_Tied]) -> list[_Tied]:
        """The first block of every file of ``groups``, keyed by its bytes (exact).

        A file of one block is read whole and its group is final (once
        :meth:`_Table.unchanged` vouches for its members); a larger one's
        subgroup goes on with the block hashed into its digest, and its next
        read checks the file. The hot loop of a tree of mostly unique files:
        one :meth:`_Table.read` (four system calls) and one dictionary insert
        a file.
        """
        read = self.table.read
        advance = self.progress.advance
        out: list[_Tied] = []
        bytes_read = 0
        for g in groups:
            size = g.size
            length = g.next_length()
            by_block: dict[bytes | bytearray | str, list[int]] = {}
            for i in g.members:
                res = read(i, 0, length, None, False)  # checked below if it stays in a group
                members = by_block.get(res)
                if members is None:
                    by_block[res] = [i]
                else:
                    members.append(i)
            if len(by_block) == len(g.members):  # all different: the usual case of unique files
                bytes_read += length * len(by_block)
                for res, (i,) in by_block.items():
                    if isinstance(res, str):
                        bytes_read -= length
                        self._drop(i, res)
                continue
            for res, members in by_block.items():
                if isinstance(res, str):  # why these could not be read
                    for i in members:
                        self._drop(i, res)
                    continue
                bytes_read += length * len(members)
                if len(members) < 2:
                    continue
                if length == size:  # read whole: the check the read left out, now
                    members = self._unchanged(members)
                    if len(members) < 2:
                        continue
                    digest = xxhash.xxh3_128_hexdigest(res)
                    out.append(_Tied(size, members, None, size, digest=digest))
                else:
                    block = min(g.block * GROWTH, MAX_BLOCK)
                    out.append(_Tied(size, members, xxhash.xxh3_128(res), length, block))
            if bytes_read >= 1 << 20:
                self.outcome.bytes_read += bytes_read
                advance(bytes_read)
                bytes_read = 0
        self.outcome.bytes_read += bytes_read
        advance(bytes_read)
        return out

    def _unchanged(self, members: list[int]) -> list[int]:
        """``members`` without (and warned of) those :meth:`_Table.unchanged` refuses."""
        kept = []
        for i in members:
            cause = self.table.unchanged(i)
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


_Task = tuple[_Table, "list[int] | None", list[int], list[int], int]
"""A share of the groups: its table, the table's rows of the groups one after the other
(``None``: all rows, in order), the groups' sizes and lengths, and the memory budget."""


def _refine_task(task: _Task, progress: Progress | None = None) -> _Outcome:
    """Refine a share of the groups (in a worker process, or here with ``progress``).

    The outcome's groups name their members by the table's rows."""
    table, rows, sizes, lengths, budget = task
    tied: list[_Tied] = []
    start = 0
    for size, n in zip(sizes, lengths, strict=True):
        members = list(range(start, start + n)) if rows is None else rows[start : start + n]
        tied.append(_Tied(size, members))
        start += n
    return _Refiner(table, budget, ignore_warning, progress or NullProgress()).run(tied)
