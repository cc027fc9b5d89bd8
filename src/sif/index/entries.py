"""Entries read by ``sif index``, as columns: what a worker sends back and a commit takes.

A file read makes one entry (a plain file) or more (archive members, content
views). The workers of ``sif index`` used to make a :class:`NewFile` and its
:class:`~sif.index.scan.ScannedFile` an entry, pickle them as tuples, and the
coordinator made them again, then read them back field by field for the
commit: a few microseconds of Python an entry on each side, more than the
reading of a small file. :class:`Entries` holds them as one list a field and
the fingerprints of all of them in one array, from the worker's batch
(:func:`sif.index.scanjobs._scan_batch`) to the commit
(:class:`sif.index.commitcols.Columns`); a :class:`NewFile` is made only if
somebody asks for one (it is a ``Sequence[NewFile]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from sif.index.scan import PlainScan, ScannedFile
from sif.index.store import NewFile

U32 = npt.NDArray[np.uint32]

__all__ = ["Entries"]

#: One list each, in the order of the entries.
FIELDS = (
    "path",
    "dev",
    "ino",
    "mtime_ns",
    "origin",
    "file_size",
    "ctime_ns",
    "kind",
    "digest",
    "size",
    "view",
    "n_distinct",
    "n_fp",
)

_EMPTY = np.empty(0, np.uint32)

#: About the bytes of an entry's fields in their lists, its path aside (ints, a digest, the
#: list slots).
ENTRY_BYTES = 400


class Entries(Sequence[NewFile]):
    """Entries as columns: ``path``, ``dev``, ``ino``, ``mtime_ns``, ``origin``,
    ``file_size`` and ``ctime_ns`` as :class:`NewFile` has them (``None`` where it has
    ``None``), ``kind``, ``digest``, ``size``, ``view``, ``n_distinct`` as its
    :class:`ScannedFile` has them, ``n_fp`` its number of fingerprints; the
    fingerprints of all the entries, in order, in :meth:`fingerprints`.

    An index scan samples no windows: a :class:`ScannedFile` added keeps only what a
    commit keeps (its ``windows`` and ``scale`` are not carried).
    """

    __slots__ = (*FIELDS, "_parts")

    path: list[str]
    dev: list[int]
    ino: list[int]
    mtime_ns: list[int]
    origin: list[str | None]
    file_size: list[int | None]
    ctime_ns: list[int | None]
    kind: list[str]
    digest: list[bytes]
    size: list[int]
    view: list[str]
    n_distinct: list[int]
    n_fp: list[int]

    def __init__(self) -> None:
        for name in FIELDS:
            setattr(self, name, [])
        self._parts: list[U32] = []  # concatenated: every entry's fingerprints, in order

    @classmethod
    def of(cls, files: Iterable[NewFile]) -> Entries:
        """The entries of ``files`` (a comprehension a field)."""
        if isinstance(files, Entries):
            return files
        files = list(files)
        out = cls()
        scans = [f.scan for f in files]
        out.path = [f.path for f in files]
        out.dev = [f.dev for f in files]
        out.ino = [f.ino for f in files]
        out.mtime_ns = [f.mtime_ns for f in files]
        out.origin = [f.origin for f in files]
        out.file_size = [f.file_size for f in files]
        out.ctime_ns = [f.ctime_ns for f in files]
        out.kind = [s.kind for s in scans]
        out.digest = [s.digest for s in scans]
        out.size = [s.size for s in scans]
        out.view = [s.view for s in scans]
        out.n_distinct = [s.n_distinct for s in scans]
        out._parts = [s.fingerprints for s in scans]
        out.n_fp = list(map(len, out._parts))
        return out

    def add(
        self,
        path: str,
        dev: int,
        ino: int,
        mtime_ns: int,
        scan: ScannedFile,
        origin: str | None,
        file_size: int | None,
        ctime_ns: int | None,
    ) -> None:
        """One entry more, as ``NewFile(path, dev, ino, mtime_ns, scan, origin, ...)``."""
        self.path.append(path)
        self.dev.append(dev)
        self.ino.append(ino)
        self.mtime_ns.append(mtime_ns)
        self.origin.append(origin)
        self.file_size.append(file_size)
        self.ctime_ns.append(ctime_ns)
        self.kind.append(scan.kind)
        self.digest.append(scan.digest)
        self.size.append(scan.size)
        self.view.append(scan.view)
        self.n_distinct.append(scan.n_distinct)
        self.n_fp.append(len(scan.fingerprints))
        self._parts.append(scan.fingerprints)

    def add_plain(
        self,
        scan: PlainScan,
        start: int,
        end: int,
        items: Sequence[tuple[str, int, int, int, int, int]],
        view: str,
    ) -> None:
        """The plain files ``start:end`` of ``scan`` (:func:`sif.index.scan.read_plain`)
        more, a list extended a field: file ``j`` is ``items[scan.index[j]]``, a
        ``(path, dev, ino, size, mtime_ns, ctime_ns)`` of the walk, its only entry
        of view ``view`` and its own origin."""
        if start >= end:
            return
        taken = [items[i] for i in scan.index[start:end]]
        paths = [t[0] for t in taken]
        self.path += paths
        self.dev += [t[1] for t in taken]
        self.ino += [t[2] for t in taken]
        self.file_size += [t[3] for t in taken]
        self.mtime_ns += [t[4] for t in taken]
        self.ctime_ns += [t[5] for t in taken]
        self.origin += paths
        self.kind += scan.kinds[start:end]
        self.digest += scan.digests[start:end]
        self.size += scan.sizes[start:end]
        self.view += [view] * (end - start)
        self.n_distinct += scan.n_distinct[start:end]
        edges = scan.edges
        lo, hi = edges[start:end], edges[start + 1 : end + 1]
        self.n_fp += [b - a for a, b in zip(lo, hi, strict=True)]
        self._parts.append(scan.values[edges[start] : edges[end]])

    def extend(self, other: Iterable[NewFile]) -> None:
        """The entries of ``other`` (an :class:`Entries`, or :class:`NewFile` objects) after
        these."""
        more = Entries.of(other)
        for name in FIELDS:
            getattr(self, name).extend(getattr(more, name))
        self._parts.extend(more._parts)

    def clear(self) -> None:
        """No entry left (their memory freed)."""
        for name in FIELDS:
            getattr(self, name).clear()
        self._parts.clear()

    def fingerprints(self) -> U32:
        """The fingerprints of every entry, in order (entry ``k`` has ``n_fp[k]``), as one
        array (made once)."""
        if len(self._parts) != 1:
            flat = (
                np.concatenate(self._parts).astype(np.uint32, copy=False) if self._parts else _EMPTY
            )
            self._parts = [flat]
        return self._parts[0]

    def nbytes(self) -> int:
        """About the memory these entries hold: their fingerprints, paths and fields (what
        a Dask worker counts for a part's results: :func:`sif.executors.dask.scan_part`)."""
        return (
            sum(p.nbytes for p in self._parts)
            + 2 * sum(map(len, self.path))
            + ENTRY_BYTES * len(self.path)
        )

    def __len__(self) -> int:
        return len(self.path)

    @overload
    def __getitem__(self, k: int) -> NewFile: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[NewFile]: ...

    def __getitem__(self, k: int | slice) -> NewFile | Sequence[NewFile]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("entry index out of range")
        return self._entry(k, sum(self.n_fp[:k]))

    def __iter__(self) -> Iterator[NewFile]:
        start = 0
        for k, n in enumerate(self.n_fp):
            yield self._entry(k, start)
            start += n

    def _entry(self, k: int, start: int) -> NewFile:
        """Entry ``k``, whose fingerprints start at ``start``, as a :class:`NewFile`."""
        scan = ScannedFile(
            self.kind[k],
            self.digest[k],
            self.fingerprints()[start : start + self.n_fp[k]],
            self.size[k],
            self.view[k],
        )
        scan.__dict__["n_distinct"] = self.n_distinct[k]  # the cached property, known
        return NewFile(
            self.path[k],
            self.dev[k],
            self.ino[k],
            self.mtime_ns[k],
            scan,
            self.origin[k],
            self.file_size[k],
            self.ctime_ns[k],
        )

    def __getstate__(self) -> tuple[Any, ...]:
        return (*(getattr(self, name) for name in FIELDS), self.fingerprints())

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(FIELDS, state, strict=False):
            setattr(self, name, value)
        self._parts = [state[-1]]

    def __repr__(self) -> str:
        return f"<Entries: {len(self)}>"
