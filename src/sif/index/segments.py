"""Immutable fingerprint segments (the published snapshot: :mod:`sif.index.manifest`).

The fingerprints live only here, once (the index budget rules out a second
copy). A *segment* is a directory of ``.npy`` files written once and never
changed: the fingerprint rows of a batch of files, sorted by value, and those
files' metadata. A *manifest* names the segments that make up the index and
the ids of files that died since (changed or removed; their rows stay in
their segment until a compaction). ``CURRENT`` names the manifest in force
and is replaced atomically, so a reader sees one committed state or the
next, never a mixture, and never waits for a writer (DuckDB would lock it
out: see :mod:`sif.index.duck`; manifests: :mod:`sif.index.manifest`).

Segment layout (``segments/seg-NNNNNN/``):

- ``fp.npy``: the stored 32-bit fingerprints, sorted. In a segment of at
  least :data:`BUCKET_MIN_ROWS` rows only their low 16 bits are stored
  (``uint16``) and ``offsets.npy`` (65,537 ``uint32``) gives where each value
  of the high 16 bits starts: 2 bytes a row instead of 4. Smaller segments
  keep whole ``uint32`` values and no offsets.
- ``fid.npy``: for each row, the position of its file in ``files.npy``, in
  2, 3 or 4 bytes (``uint8`` columns) depending on the number of files.
- ``files.npy``: one record per file, sorted by global file id (see
  :data:`FILE_DTYPE`); ``paths.bin`` and ``paths_off.npy``: the path bytes
  of each file and their offsets. With ``paths_lcp.npy`` (``uint8``, one per
  file) the paths are front-coded: ``paths.bin`` holds each path without
  the first ``lcp`` bytes it shares with the path before it, and every
  :data:`PATH_BLOCK`-th path is whole, so one path is rebuilt from at most
  that many suffixes. Files of one directory follow each other, so a path
  costs its name plus a few bytes (measured on ~100k small files: 96 -> 25
  bytes a file). Segments without it hold whole paths.

A lookup is a vectorised binary search per query value within its bucket:
O(q log n) element reads on memory maps, a few milliseconds at 20 M rows.

Integrity: every opening of a segment checks, cheaply, that each ``.npy``
header is readable and has the dtype and shape the layout says, that each
file is exactly as long as its header implies, and that the files agree
with each other (rows, files, path offsets against ``paths.bin``). A
manifest of format 2 also records each file's length and XXH3-128 checksum
(:func:`sif.index.checks.checksum_files`): the lengths are compared at every
opening, the checksums by :func:`sif.index.checks.verify_segment` (``sif
index`` before it builds on the index, ``sif index --verify``). Any damage
is :class:`sif.errors.IndexCorrupt` (:func:`sif.index.checks.corrupt`),
never a default or a traceback. Segments of manifests of format 1 (no
checks) are checked for consistency only.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.index.checks import cause_of, check_size, corrupt, load_array
from sif.index.frontcode import PATH_BLOCK, front_code
from sif.index.indexdir import temp_dir

try:
    from sif.index import _lookupc
except ImportError:  # not built (no compiler when installed): the numpy descent
    _lookupc = None
try:
    from sif.index import _orderc
except ImportError:  # not built: numpy's stable sorts (stable_order)
    _orderc = None

U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]

BUCKET_BITS = 16
#: From this many rows a segment stores 16-bit remainders under 2^16 buckets.
BUCKET_MIN_ROWS = 1 << 18

_V1_FIELDS = [
    ("id", "<u4"),
    ("kind", "u1"),
    ("n_fp", "<u4"),
    ("n_distinct", "<u4"),
    ("size", "<i8"),
    ("dev", "<u8"),
    ("ino", "<u8"),
    ("mtime_ns", "<i8"),
    ("digest", "V32"),
]
FILE_DTYPE_V1 = np.dtype(_V1_FIELDS)
"""Per-file record of segments written before content views: every file raw and whole."""
FILE_DTYPE = np.dtype([*_V1_FIELDS, ("view", "u1"), ("olen", "<u4")])
"""Per-entry record of a segment (82 bytes, unaligned). ``kind``: index into ``KINDS``;
``view``: index into ``VIEW_NAMES``; ``olen``: bytes of the path that name the file on
disk (the rest, ``!/member``, names an archive member)."""


@dataclass(frozen=True)
class SegmentFiles:
    """The files of one segment, sorted by id: records, path bytes and offsets."""

    records: npt.NDArray[Any]
    paths: bytes
    path_offsets: I64


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save(path: str, arr: npt.NDArray[Any]) -> None:
    with open(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def _width(n_files: int) -> int:
    return 2 if n_files <= 1 << 16 else 3 if n_files <= 1 << 24 else 4


def _pack(local: npt.NDArray[Any], width: int) -> U8:
    """Little-endian ``width``-byte integers as a flat ``uint8`` array."""
    b = local.astype("<u4").view(np.uint8).reshape(-1, 4)[:, :width]
    return np.ascontiguousarray(b).reshape(-1)


def _unpack(packed: U8, width: int, idx: npt.NDArray[Any] | None = None) -> U32:
    rows = packed.reshape(-1, width)
    if idx is not None:
        rows = rows[idx]
    out = np.zeros((len(rows), 4), dtype=np.uint8)
    out[:, :width] = rows
    return out.view("<u4").reshape(-1)


def stable_order(values: U32) -> npt.NDArray[np.intp]:
    """The permutation a stable sort of ``values`` gives (equal values keep their order).

    Two passes of numpy's stable sort on 16 bits (a radix sort, O(n)), the low
    half first: on the 633 k rows of a commit of 16 k files, 13 ms against 32 ms
    for one sort of 64-bit (value, position) keys (introsort), and a stable
    argsort of the 32-bit values (timsort) is slower still.
    """
    first = np.argsort((values & 0xFFFF).astype(np.uint16), kind="stable")
    high = (values >> 16).astype(np.uint16)[first]
    return first[np.argsort(high, kind="stable")]


def sorted_rows(values: U32, local: U32) -> tuple[U32, U32]:
    """The rows ``(values[i], local[i])`` stably sorted by value (equal values keep their
    order): in C where built (``sif.index._orderc``: two radix passes moving both
    columns, 4-5 ms for the 771 k rows of a commit of 7,773 Linux files, where
    :func:`stable_order` and the two gathers took 25-30 ms), else through
    :func:`stable_order`."""
    values = np.ascontiguousarray(values, dtype=np.uint32)
    local = np.ascontiguousarray(local, dtype=np.uint32)
    if _orderc is None:
        order = stable_order(values)
        return values[order], local[order]
    out_values = np.empty_like(values)
    out_local = np.empty_like(local)
    _orderc.order_rows(values, local, out_values, out_local)
    return out_values, out_local


def write_segment(
    directory: str,
    files: SegmentFiles,
    fingerprints: Sequence[U32] | U32,
    local: U32 | None = None,
) -> int:
    """Write a segment into the new directory ``directory``, durably; returns its bytes.

    ``fingerprints`` is either one array per file (in the order of
    ``files.records``) or, with ``local``, one flat array of values and the
    file position of each. The directory is written under a temporary name,
    every file fsync'ed, then renamed: a crash leaves either nothing or a
    whole segment (an orphan unless a catalog commit names it). Cost: two
    radix passes over the rows (:func:`sorted_rows`), O(n).
    """
    if local is None:
        parts = list(fingerprints)
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        values = np.concatenate(parts).astype(np.uint32) if parts else np.empty(0, np.uint32)
        # The files are in order here: a stable sort by value gives the rows by (value, file).
        local = np.repeat(np.arange(len(parts), dtype=np.uint32), counts)
    else:
        values = np.asarray(fingerprints, dtype=np.uint32)
    values, local = sorted_rows(values, local)
    tmp = temp_dir(os.path.dirname(directory), os.path.basename(directory) + ".", ".tmp")
    try:
        _write_files(tmp, files, values, local)
    except BaseException:
        # sif's own directory, just made: a full disk left it (and the disk full) until
        # the next run removed it
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.replace(tmp, directory)
    _fsync_dir(os.path.dirname(directory))
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))


def _write_files(tmp: str, files: SegmentFiles, values: U32, local: U32) -> None:
    """The files of a segment into ``tmp``, each fsynced, then the directory."""
    if len(values) >= BUCKET_MIN_ROWS:
        counts = np.bincount(values >> BUCKET_BITS, minlength=1 << BUCKET_BITS)
        offsets = np.zeros((1 << BUCKET_BITS) + 1, dtype=np.uint32)
        np.cumsum(counts, out=offsets[1:])
        _save(os.path.join(tmp, "offsets.npy"), offsets)
        _save(os.path.join(tmp, "fp.npy"), (values & 0xFFFF).astype(np.uint16))
    else:
        _save(os.path.join(tmp, "fp.npy"), values)
    _save(os.path.join(tmp, "fid.npy"), _pack(local, _width(len(files.records))))
    _save(os.path.join(tmp, "files.npy"), files.records)
    suffixes, lcp, path_offsets = front_code(files.paths, files.path_offsets)
    _save(os.path.join(tmp, "paths_lcp.npy"), lcp)
    _save(os.path.join(tmp, "paths_off.npy"), path_offsets)
    with open(os.path.join(tmp, "paths.bin"), "wb") as f:
        f.write(suffixes)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)


def make_files(rows: Sequence[tuple[Any, ...]], paths: Sequence[bytes]) -> SegmentFiles:
    """A :class:`SegmentFiles` from records (tuples in :data:`FILE_DTYPE` order) and paths.

    A record without the last two fields is a raw, whole file.
    """
    full = [
        r if len(r) == len(FILE_DTYPE.names or ()) else (*r, 0, len(p))
        for r, p in zip(rows, paths, strict=True)
    ]
    records = np.array(full, dtype=FILE_DTYPE)
    order = np.argsort(records["id"], kind="stable")
    records = records[order]
    return SegmentFiles(records, *joined_paths([paths[i] for i in order]))


def joined_paths(paths: Sequence[bytes | bytearray]) -> tuple[bytes, I64]:
    """``paths`` one after the other, and the offsets of each (``n + 1``): C loops."""
    n = len(paths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, paths), dtype=np.int64, count=n), out=offsets[1:])
    return b"".join(paths), offsets


def digest_column(digests: Sequence[bytes | bytearray]) -> npt.NDArray[np.void]:
    """The ``digest`` field of records (``V32``) from ``digests``: joined in C when all
    are 32 bytes (BLAKE3's), else each padded with NULs or cut to 32 first."""
    n = len(digests)
    if n and bool((np.fromiter(map(len, digests), dtype=np.int64, count=n) != 32).any()):
        digests = [bytes(d).ljust(32, b"\0")[:32] for d in digests]
    return np.frombuffer(b"".join(digests), dtype="V32")


class Segment:
    """A segment opened read-only on memory maps (cheap: nothing is read up front).

    ``check`` (from a manifest of format 2): each file must have the recorded
    length. Every opening checks the headers and that the files agree (see
    the module docstring); damage is :class:`IndexCorrupt`. The checksums are
    compared by :func:`verify_segment`, not here.
    """

    def __init__(self, directory: str, check: Mapping[str, Sequence[Any]] | None = None) -> None:
        self.directory = directory
        self._paths_fd = -1
        if check is not None:
            for name, (size, _) in check.items():
                check_size(os.path.join(directory, name), int(size))
        join = os.path.join
        self.fp = load_array(join(directory, "fp.npy"), _FP_DTYPES)
        self.offsets: U32 | None = (
            load_array(join(directory, "offsets.npy"), _U32) if self.fp.dtype == np.uint16 else None
        )
        files = load_array(join(directory, "files.npy"), _FILE_DTYPES)
        self.fid = load_array(join(directory, "fid.npy"), _U8)
        self.path_offsets = load_array(join(directory, "paths_off.npy"), _OFF_DTYPES)
        lcp = join(directory, "paths_lcp.npy")  # absent: whole paths (older)
        whole = not os.path.exists(lcp) and (check is None or "paths_lcp.npy" not in check)
        self.path_lcp: U8 | None = None if whole else load_array(lcp, _U8)
        paths = join(directory, "paths.bin")
        try:
            # Held open: a writer may unlink a retired segment while we read it.
            self._paths_fd = os.open(paths, os.O_RDONLY)
            paths_size = os.fstat(self._paths_fd).st_size
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise corrupt(paths, exc.strerror or str(exc)) from exc
        if files.dtype == FILE_DTYPE_V1:  # before content views: raw, whole files
            files = _upgrade(np.asarray(files), np.asarray(self.path_offsets))
        self.files = files
        self.width = _width(len(self.files))
        rows = len(self.fp)
        n = len(self.files)
        if len(self.fid) != rows * self.width:
            raise corrupt(join(directory, "fid.npy"), f"{len(self.fid)} bytes for {rows} rows")
        if len(self.path_offsets) != n + 1:
            raise corrupt(join(directory, "paths_off.npy"), f"{n + 1} offsets expected")
        if self.path_lcp is not None and len(self.path_lcp) != n:
            raise corrupt(lcp, f"{n} prefix lengths expected")
        if self.offsets is not None and (
            len(self.offsets) != (1 << BUCKET_BITS) + 1
            or int(self.offsets[0]) != 0
            or int(self.offsets[-1]) != rows
        ):
            raise corrupt(join(directory, "offsets.npy"), f"bucket offsets do not end at {rows}")
        if int(self.path_offsets[0]) != 0 or int(self.path_offsets[-1]) != paths_size:
            raise corrupt(
                paths,
                f"{paths_size:,} bytes where the path offsets say {int(self.path_offsets[-1]):,}",
            )

    def close(self) -> None:
        if self._paths_fd >= 0:
            os.close(self._paths_fd)
            self._paths_fd = -1

    def __del__(self) -> None:
        if getattr(self, "_paths_fd", -1) >= 0:
            self.close()

    @property
    def rows(self) -> int:
        return len(self.fp)

    def lookup(self, query: U32) -> tuple[npt.NDArray[np.int64], U32]:
        """Rows whose value is in ``query`` (sorted, unique): (query position, file id).

        One pair per matching row, so a value a file holds twice counts twice.
        Cost: a vectorised binary search, O(len(query) * log(rows)).
        """
        q = np.asarray(query, dtype=np.uint32)
        fp = np.asarray(self.fp)  # the map as a plain array: gathers skip np.memmap's Python
        if self.offsets is not None:
            bucket = (q >> BUCKET_BITS).astype(np.intp)
            offsets = np.asarray(self.offsets)
            lo = offsets[bucket].astype(np.int64)
            hi = offsets[bucket + 1].astype(np.int64)
            key: npt.NDArray[Any] = (q & 0xFFFF).astype(np.uint16)
            if len(q) and ((hi < lo).any() or int(hi.max()) > self.rows):
                # Only the first and last offsets are checked at opening.
                raise corrupt(os.path.join(self.directory, "offsets.npy"), "offsets out of order")
        else:
            lo = np.zeros(len(q), dtype=np.int64)
            hi = np.full(len(q), self.rows, dtype=np.int64)
            key = q
        first = _lower_bound(fp, lo, hi, key)
        # Most query values are in no row: the end of a value's rows is sought only
        # for the values found.
        hit = np.flatnonzero(first < hi)
        hit = hit[fp[first[hit]] == key[hit]]
        if len(hit) == 0:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        first = first[hit]
        counts = _upper_bound(fp, first + 1, hi[hit], key[hit]) - first
        total = int(counts.sum())
        qpos = np.repeat(hit.astype(np.int64), counts)
        starts = np.repeat(first - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        rows = starts + np.arange(total, dtype=np.int64)
        local = self._local(_unpack(np.asarray(self.fid), self.width, rows))
        return qpos, np.asarray(self.files["id"])[local]

    def _local(self, local: U32) -> U32:
        """``local`` after checking that each names a file of the segment."""
        if len(local) and int(local.max()) >= len(self.files):
            raise corrupt(os.path.join(self.directory, "fid.npy"), "a row names no file")
        return local

    def all_rows(self) -> tuple[U32, U32]:
        """Every row as (32-bit value, file id), sorted by value. Cost: O(rows) memory."""
        if self.offsets is not None:
            offsets = np.asarray(self.offsets).astype(np.int64)
            counts: I64 = offsets[1:] - offsets[:-1]
            high = np.repeat(np.arange(1 << BUCKET_BITS, dtype=np.uint32), counts)
            values: U32 = (high << np.uint32(BUCKET_BITS)) | np.asarray(self.fp).astype(np.uint32)
        else:
            values = np.array(self.fp, dtype=np.uint32)
        local = self._local(_unpack(np.asarray(self.fid), self.width))
        return values, np.asarray(self.files["id"])[local]

    def position(self, ids: U32) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Positions of ``ids`` in this segment's files and whether each is here."""
        fid = np.asarray(self.files["id"])  # strided: one field of the records
        n = len(fid)
        if n and len(ids) * 32 < n:
            # A few ids: bisect on the strided column, reading ~log2(n) records each
            # (np.searchsorted would first copy the whole column, ~1 ms at 200k files).
            zero = np.zeros(len(ids), dtype=np.int64)
            pos = np.minimum(_lower_bound(fid, zero, zero + n, ids), n - 1)
        else:
            pos = np.minimum(np.searchsorted(fid, ids), max(n - 1, 0))
        here = fid[pos] == ids if n else np.zeros(len(ids), dtype=bool)
        return pos.astype(np.int64), here

    def path(self, pos: int) -> bytes:
        """The raw path bytes of the file at ``pos``.

        Cost: one ``pread`` (of at most :data:`PATH_BLOCK` suffixes when front-coded).
        """
        try:
            return self._path(pos)
        except (ValueError, OverflowError, OSError) as exc:
            raise corrupt(os.path.join(self.directory, "paths.bin"), cause_of(exc)) from exc

    def _path(self, pos: int) -> bytes:
        if self.path_lcp is None:
            start, end = int(self.path_offsets[pos]), int(self.path_offsets[pos + 1])
            return os.pread(self._paths_fd, end - start, start)
        first = pos - pos % PATH_BLOCK
        offs = np.asarray(self.path_offsets[first : pos + 2], dtype=np.int64)
        data = os.pread(self._paths_fd, int(offs[-1] - offs[0]), int(offs[0]))
        offs -= offs[0]
        path = b""
        for j, k in enumerate(np.asarray(self.path_lcp[first : pos + 1]).tolist()):
            path = path[:k] + data[offs[j] : offs[j + 1]]
        return path


class RangeReader:
    """A segment's rows by bucket range (value >> :data:`BUCKET_BITS`), read with ``pread``.

    Opens the segment once (every check of :class:`Segment`), keeps its files'
    ids, where its arrays start in their files and, in a segment of whole values
    (under :data:`BUCKET_MIN_ROWS` rows, at most 1 MB), the values; then closes
    it. Each :meth:`rows` opens ``fp.npy``, ``fid.npy`` (and ``offsets.npy``)
    for one range, reads it and closes them: no memory map stays resident (at a
    million files the maps of a collation kept 250 MB resident by its last
    range) and no descriptor stays open (a merge of hundreds of segments). A
    merge of 1 M files used to open its 62 segments again for each of 42
    ranges, 0.6 ms an opening: a cost that grew with the square of the index.
    """

    def __init__(self, directory: str) -> None:
        seg = Segment(directory)
        try:
            self.directory = directory
            self.width = seg.width
            self.ids: U32 = np.array(seg.files["id"], dtype=np.uint32)
            self.fp_dtype = seg.fp.dtype
            self.fp_at = int(getattr(seg.fp, "offset", 0))
            self.fid_at = int(getattr(seg.fid, "offset", 0))
            self.offsets_at = -1
            self.values: U32 | None = None
            if seg.offsets is not None:
                self.offsets_at = int(getattr(seg.offsets, "offset", 0))
            else:
                self.values = np.array(seg.fp, dtype=np.uint32)
        finally:
            seg.close()

    def rows(self, lo: int, hi: int) -> tuple[U32, U32]:
        """The rows whose bucket is in ``[lo, hi)``, sorted by value: a hash partition
        of :meth:`Segment.all_rows` (every row of one value in one range), as (32-bit
        value, position of the file in :attr:`ids`). Cost: O(rows in the range)."""
        join = os.path.join
        if self.values is None:
            edges = _pread(
                join(self.directory, "offsets.npy"), self.offsets_at, lo, hi + 1, _U32[0]
            )
            start, end = int(edges[0]), int(edges[-1])
            counts: I64 = np.diff(edges.astype(np.int64)).astype(np.int64)
            if (counts < 0).any():
                raise corrupt(join(self.directory, "offsets.npy"), "bucket offsets out of order")
            raw = _pread(join(self.directory, "fp.npy"), self.fp_at, start, end, self.fp_dtype)
            high = np.repeat(np.arange(lo, hi, dtype=np.uint32), counts)
            values: U32 = (high << np.uint32(BUCKET_BITS)) | raw.astype(np.uint32)
        else:
            start, end = (
                len(self.values)
                if b >= 1 << BUCKET_BITS
                else int(np.searchsorted(self.values, np.uint32(b << BUCKET_BITS)))
                for b in (lo, hi)
            )
            values = self.values[start:end].copy()
        w = self.width
        fid = _pread(join(self.directory, "fid.npy"), self.fid_at, start * w, end * w, _U8[0])
        local = _unpack(fid, w)
        if len(local) and int(local.max()) >= len(self.ids):
            raise corrupt(join(self.directory, "fid.npy"), "a row names no file")
        return values, local


def _pread(path: str, at: int, first: int, end: int, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """Items ``[first, end)`` of the array of ``dtype`` stored from byte ``at`` of ``path``."""
    size = (end - first) * dtype.itemsize
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise corrupt(path, "missing") from None
    except OSError as exc:
        raise corrupt(path, exc.strerror or str(exc)) from exc
    try:
        buf = bytearray(size)
        view, got = memoryview(buf), 0
        while got < size:
            n = os.preadv(fd, [view[got:]], at + first * dtype.itemsize + got)
            if n <= 0:
                raise corrupt(path, f"{got:,} bytes where {size:,} were expected (truncated?)")
            got += n
    except OSError as exc:
        raise corrupt(path, exc.strerror or str(exc)) from exc
    finally:
        os.close(fd)
    return np.frombuffer(buf, dtype=dtype)


_U8 = (np.dtype(np.uint8),)
_U32 = (np.dtype(np.uint32),)
_FP_DTYPES = (np.dtype(np.uint32), np.dtype(np.uint16))
_FILE_DTYPES = (FILE_DTYPE, FILE_DTYPE_V1)
_OFF_DTYPES = (np.dtype(np.uint32), np.dtype(np.int64))


def _upgrade(old: npt.NDArray[Any], path_offsets: I64) -> npt.NDArray[Any]:
    """Records of :data:`FILE_DTYPE_V1` as :data:`FILE_DTYPE` (view raw, whole files)."""
    new = np.zeros(len(old), dtype=FILE_DTYPE)
    for name in FILE_DTYPE_V1.names or ():
        new[name] = old[name]
    if len(path_offsets) == len(old) + 1:
        new["olen"] = np.diff(path_offsets)
    return new


def _lower_bound(
    keys: npt.NDArray[Any],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    target: npt.NDArray[Any],
) -> npt.NDArray[np.int64]:
    """Vectorised ``bisect_left`` of each target in the sorted run ``keys[lo:hi]``.

    Branch-free: ``pos`` grows by each power of two, largest first, while the
    element before it is below the target (one gather a step, no masks).
    """
    return _descend(keys, lo, hi, target, right=False)


def _upper_bound(
    keys: npt.NDArray[Any],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    target: npt.NDArray[Any],
) -> npt.NDArray[np.int64]:
    """Vectorised ``bisect_right`` of each target in the sorted run ``keys[lo:hi]``."""
    return _descend(keys, lo, hi, target, right=True)


def _descend(
    keys: npt.NDArray[Any],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    target: npt.NDArray[Any],
    right: bool,
) -> npt.NDArray[np.int64]:
    if (
        _lookupc is not None
        and keys.ndim == 1
        and keys.dtype in _KERNEL_DTYPES
        and keys.flags.c_contiguous
        and keys.flags.aligned
        and target.dtype == keys.dtype
    ):
        # Compiled: one pass (the descent below makes a dozen over all targets, ~2.8 ms
        # for a 30 KB query in each segment). A strided column takes the descent, as does
        # a misaligned one (a damaged ``.npy`` header of odd length: the C loop reads
        # the keys through a cast).
        out = np.empty(len(lo), dtype=np.int64)
        _lookupc.bounds(
            keys,
            np.ascontiguousarray(target),
            keys.dtype.itemsize,
            np.ascontiguousarray(lo, dtype=np.int64),
            np.ascontiguousarray(hi, dtype=np.int64),
            right,
            out,
        )
        return out
    return _descend_numpy(keys, lo, hi, target, right)


_KERNEL_DTYPES = (np.dtype(np.uint16), np.dtype(np.uint32))


def _descend_numpy(
    keys: npt.NDArray[Any],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    target: npt.NDArray[Any],
    right: bool,
) -> npt.NDArray[np.int64]:
    pos = lo.copy()
    if len(pos) == 0 or len(keys) == 0:
        return pos
    span = int((hi - lo).max())
    last = len(keys) - 1
    step = 1 << max(span.bit_length() - 1, 0)
    while step and span:
        cand = pos + step
        probe = keys[np.minimum(cand - 1, last)]
        move = (probe <= target) if right else (probe < target)
        move &= cand <= hi
        pos += step * move
        step >>= 1
    return pos
