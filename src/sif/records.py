"""What the walker met: :class:`FileRecord`, one file, and :class:`RecordColumns`, many.

Kept apart from :mod:`sif.walk` (which re-exports both) so that each module
holds one job: the walk decides which files, this module stores them.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
from array import array
from collections.abc import Iterable, Iterator
from typing import NamedTuple

try:
    from sif._treec import decode_names as _c_decode_names  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # no compiler at install time: decoded in Python
    _c_decode_names = None


class FileRecord(NamedTuple):
    """A regular file met by the walker, with what ``lstat`` (or ``stat``) said of it.

    A named tuple: immutable, and cheap to make and to pickle for 10^5 files.
    """

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    nlink: int = 1
    ctime_ns: int = 0
    """The inode's change time, which ``utime`` cannot set: part of a file's identity."""
    symlink: bool = False
    """The name is a symbolic link (followed: ``follow_symlinks``, or a root), not the
    file itself: open it following links; a name that was not a link is opened with
    ``O_NOFOLLOW``."""


_DECODING = threading.Lock()
"""Held while :attr:`RecordColumns.names` decodes raw names (rarely contended: once a
run, by at most two threads)."""


class RecordColumns:
    """Many :class:`FileRecord` values stored column by column.

    A path is stored as its directory (shared by all files of that directory)
    and its name: about 100 bytes a file instead of 350 for records, and
    cheap to send between processes (the names travel as one string, the
    numbers as arrays). :meth:`path` joins the two on demand.

    Names may also be held as the C walk gives them (:meth:`add_raw_names`: their
    bytes in one string and their offsets, 28 bytes a name where a ``str`` in a list
    takes ~65), and decoded a row at a time by :meth:`path`; :attr:`names` decodes
    them all, once, when first asked (``sif index`` asks for the 1% it reads).
    """

    __slots__ = (
        "_names",
        "_raw",
        "_raw_rows",
        "ctime_ns",
        "dev",
        "dir_of",
        "dirs",
        "ino",
        "mtime_ns",
        "nlink",
        "size",
        "symlink",
    )

    def __init__(self) -> None:
        self.dirs: list[str] = []  # each ends with a separator, or is "" for a bare name
        self.dir_of = array("I")
        self._names: list[str] = []
        self._raw: list[tuple[int, bytes, array[int]]] = []
        """Names not decoded yet: (first row, their bytes, n + 1 offsets), after _names."""
        self._raw_rows = 0
        self.dev = array("Q")
        self.ino = array("Q")
        self.size = array("q")
        self.mtime_ns = array("q")
        self.nlink = array("Q")
        self.ctime_ns = array("q")
        self.symlink = array("B")  # 1: the name is a symbolic link (see FileRecord.symlink)

    @property
    def names(self) -> list[str]:
        """Every file's name (the raw ones decoded now, once)."""
        if self._raw:
            # One thread decodes; one asking meanwhile (``sif dupes -j 2`` makes a
            # worker's table as it is pickled, in the pool's queue feeder thread) waits
            # and finds them done. The list is published whole, then the raw names are
            # dropped, so that name() never sees a list half made (before, two threads
            # extended one list at once, and paths named other files).
            with _DECODING:
                raw = self._raw
                if raw:
                    names = self._names[: raw[0][0]]  # the rows before the raw ones
                    for _, blob, offsets in raw:
                        if _c_decode_names is not None and offsets.typecode == "q":  # ~2x faster
                            names += _c_decode_names(blob, offsets)
                            continue
                        text = blob.decode("utf-8", "surrogateescape")
                        if len(text) == len(blob):  # ASCII: characters are bytes
                            names.extend(text[a:b] for a, b in itertools.pairwise(offsets))
                        else:
                            names.extend(
                                blob[a:b].decode("utf-8", "surrogateescape")
                                for a, b in itertools.pairwise(offsets)
                            )
                    self._names = names
                    self._raw, self._raw_rows = [], 0
        return self._names

    @names.setter
    def names(self, value: list[str]) -> None:
        self._names, self._raw, self._raw_rows = value, [], 0

    def add_raw_names(self, blob: bytes, offsets: array[int]) -> None:
        """Append ``len(offsets) - 1`` names: ``blob[offsets[i]:offsets[i + 1]]`` each, the
        bytes the file system gave (decoded as :func:`os.fsdecode` does, with UTF-8)."""
        self._raw.append((len(self), blob, offsets))
        self._raw_rows += len(offsets) - 1

    def __len__(self) -> int:
        return len(self._names) + self._raw_rows

    def name(self, i: int) -> str:
        """The name of row ``i`` (a raw one decoded alone); a negative ``i`` counts from
        the end, as for a list."""
        raw = self._raw  # once: another thread may publish the decoded names meanwhile
        if not raw:
            return self._names[i]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("row out of range")
        if i < len(self._names):
            return self._names[i]
        k = bisect.bisect_right(raw, i, key=lambda r: r[0]) - 1
        start, blob, offsets = raw[k]
        j = i - start
        return blob[offsets[j] : offsets[j + 1]].decode("utf-8", "surrogateescape")

    def path(self, i: int) -> str:
        return self.dirs[self.dir_of[i]] + self.name(i)

    @property
    def paths(self) -> list[str]:
        """Every path (a new list)."""
        dirs = self.dirs
        return [dirs[d] + n for d, n in zip(self.dir_of, self.names, strict=True)]

    def add_dir(self, dirpath: str) -> int:
        """Register a directory; files added with its number get ``dirpath/name`` paths."""
        self.dirs.append(dirpath if dirpath.endswith("/") else dirpath + "/")
        return len(self.dirs) - 1

    def __iter__(self) -> Iterator[FileRecord]:
        return map(
            FileRecord,
            self.paths,
            self.dev,
            self.ino,
            self.size,
            self.mtime_ns,
            self.nlink,
            self.ctime_ns,
            map(bool, self.symlink),
        )

    def extend(self, records: Iterable[FileRecord]) -> None:
        """Append ``records``; names held raw stay raw (the new ones are added raw too)."""
        raw: list[bytes] = []
        for r in records:
            head, name = os.path.split(r.path)
            self.dir_of.append(self.add_dir(head) if head else self._bare())
            if self._raw:  # raw names before: these follow them
                raw.append(name.encode("utf-8", "surrogateescape"))
            else:
                self._names.append(name)
            self.dev.append(r.dev)
            self.ino.append(r.ino)
            self.size.append(r.size)
            self.mtime_ns.append(r.mtime_ns)
            self.nlink.append(r.nlink)
            self.ctime_ns.append(r.ctime_ns)
            self.symlink.append(1 if r.symlink else 0)
        if raw:
            offsets = array("q", [0])
            offsets.extend(itertools.accumulate(map(len, raw)))
            self.add_raw_names(b"".join(raw), offsets)

    def _bare(self) -> int:
        self.dirs.append("")
        return len(self.dirs) - 1

    def record(self, i: int) -> FileRecord:
        return FileRecord(
            self.path(i),
            self.dev[i],
            self.ino[i],
            self.size[i],
            self.mtime_ns[i],
            self.nlink[i],
            self.ctime_ns[i],
            bool(self.symlink[i]),
        )

    def __getstate__(
        self,
    ) -> tuple[int, str, str, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]:
        return (
            len(self.dirs),  # "" joins both [] and [""]: the count tells them apart
            "\0".join(self.dirs),  # no file name holds a NUL
            "\0".join(self.names),
            self.dir_of.tobytes(),
            self.dev.tobytes(),
            self.ino.tobytes(),
            self.size.tobytes(),
            self.mtime_ns.tobytes(),
            self.nlink.tobytes(),
            self.ctime_ns.tobytes(),
            self.symlink.tobytes(),
        )

    def __setstate__(
        self, state: tuple[int, str, str, bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]
    ) -> None:
        self.__init__()  # type: ignore[misc]
        ndirs, dirs, names, dir_of, dev, ino, size, mtime_ns, nlink, ctime_ns, link = state
        self.dirs = dirs.split("\0") if ndirs else []
        self.dir_of.frombytes(dir_of)
        self.names = names.split("\0") if len(self.dir_of) else []
        self.dev.frombytes(dev)
        self.ino.frombytes(ino)
        self.size.frombytes(size)
        self.mtime_ns.frombytes(mtime_ns)
        self.nlink.frombytes(nlink)
        self.ctime_ns.frombytes(ctime_ns)
        self.symlink.frombytes(link)

    def digest(self) -> str:
        """A digest of every file's path, device, inode, size, mtime and ctime, as hex.

        Two walks that met the same files with the same stat fields give the
        same digest, whatever the order in which processes returned their
        directories (directories are put in path order; the files of one
        directory, which the walker keeps together, in readdir order, which is
        stable while the directory is unchanged). ``nlink`` is left out: a new
        hard link elsewhere changes no content. Cost: a sort of the directories,
        one stable argsort of the files (numpy), a hash of about 40 bytes a
        file plus its name (blake2b, ~5 ms for 40k files). ``symlink`` is left
        out too: a name that became a link to the same inode reads the same.
        """
        import hashlib

        import numpy as np

        h = hashlib.blake2b(digest_size=16)
        by_path = sorted(range(len(self.dirs)), key=self.dirs.__getitem__)
        rank = np.empty(len(self.dirs), dtype=np.int64)
        rank[by_path] = np.arange(len(self.dirs))
        dir_rank = rank[np.frombuffer(self.dir_of, dtype=np.uint32)] if len(self) else rank[:0]
        order = np.argsort(dir_rank, kind="stable")
        names = self.names
        h.update(b"%d\0" % len(self))
        h.update("\0".join([self.dirs[i] for i in by_path]).encode("utf-8", "surrogateescape"))
        h.update(b"\0\0")
        step = 1 << 16  # the names joined a slice at a time: the same bytes, hashed in pieces
        for lo in range(0, len(order), step):
            part = "\0".join(map(names.__getitem__, order[lo : lo + step].tolist()))
            h.update((("\0" if lo else "") + part).encode("utf-8", "surrogateescape"))
        h.update(dir_rank[order].tobytes())
        for col, dtype in ((self.dev, np.uint64), (self.ino, np.uint64)):
            h.update(np.frombuffer(col, dtype=dtype)[order].tobytes())
        for col in (self.size, self.mtime_ns, self.ctime_ns):
            h.update(np.frombuffer(col, dtype=np.int64)[order].tobytes())
        return h.hexdigest()

    def absorb(self, other: RecordColumns) -> None:
        """Append all of ``other``."""
        base = len(self.dirs)
        self.dirs.extend(other.dirs)
        self.dir_of.extend(array("I", [d + base for d in other.dir_of]))
        self.names.extend(other.names)
        self.dev.extend(other.dev)
        self.ino.extend(other.ino)
        self.size.extend(other.size)
        self.mtime_ns.extend(other.mtime_ns)
        self.nlink.extend(other.nlink)
        self.ctime_ns.extend(other.ctime_ns)
        self.symlink.extend(other.symlink)

    def without(self, ranges: Iterable[tuple[int, int]]) -> RecordColumns:
        """A copy without the rows ``start:stop`` of each range (directories left unused go).

        Cost: one pass over every column (C loops), for the rare walk that read
        a directory twice.
        """
        from itertools import compress

        mask = bytearray(b"\1") * len(self)
        for a, b in ranges:
            mask[a:b] = bytes(b - a)
        out = RecordColumns()
        used = sorted(set(compress(self.dir_of, mask)))
        out.dirs = [self.dirs[d] for d in used]
        new = dict(zip(used, range(len(used)), strict=True))
        out.dir_of = array("I", [new[d] for d in compress(self.dir_of, mask)])
        out.names = list(compress(self.names, mask))
        for col in ("dev", "ino", "size", "mtime_ns", "nlink", "ctime_ns", "symlink"):
            old: array[int] = getattr(self, col)
            setattr(out, col, array(old.typecode, compress(old, mask)))
        return out
