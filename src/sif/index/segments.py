"""Immutable fingerprint segments and the published snapshot that readers open.

The fingerprints live only here, once (the index budget rules out a second
copy). A *segment* is a directory of ``.npy`` files written once and never
changed: the fingerprint rows of a batch of files, sorted by value, and those
files' metadata. A *manifest* names the segments that make up the index and
the ids of files that died since (changed or removed; their rows stay in
their segment until a compaction). ``CURRENT`` names the manifest in force
and is replaced atomically, so a reader sees one committed state or the
next, never a mixture, and never waits for a writer (DuckDB would lock it
out: see :mod:`sif.index.duck`).

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
(:func:`checksum_files`), and a digest of its own text: the lengths are
compared at every opening, the checksums by :func:`verify_segment` (``sif
index`` before it builds on the index, ``sif index --verify``). Any damage
is :class:`sif.errors.IndexCorrupt` (:func:`corrupt`), never a default or a
traceback. Manifests of format 1 (no checks) are still read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from sif.errors import IndexCorrupt

U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]

#: Format of the manifests written; bump on an incompatible change. 2: lengths and
#: checksums of the segments' files, and a digest of the manifest itself.
SNAPSHOT_FORMAT = 2
#: Manifest formats read (1: no checks; its segments are checked for consistency only).
READ_FORMATS = (1, 2)
BUCKET_BITS = 16
#: From this many rows a segment stores 16-bit remainders under 2^16 buckets.
BUCKET_MIN_ROWS = 1 << 18
#: Every this many paths of a segment one is stored whole (front coding restarts).
PATH_BLOCK = 64
#: Longest shared prefix that front coding records (it fits a ``uint8``).
MAX_LCP = 255

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


Check = dict[str, list[Any]]
"""The checks of a segment's files: file name -> ``[bytes, XXH3-128 hex digest]``."""

_CHUNK = 1 << 20


def corrupt(path: str, cause: str) -> IndexCorrupt:
    """The error for a damaged index file: ``index corrupt: PATH (cause); run with --rebuild``."""
    return IndexCorrupt(f"index corrupt: {path} ({cause}); run with --rebuild")


def file_checksum(path: str) -> str:
    """XXH3-128 of the file at ``path`` (hex), read in 1 MiB chunks: ~10 GB/s from cache."""
    h = xxhash.xxh3_128()
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb") as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def checksum_files(directory: str) -> Check:
    """The length and checksum of every file of the segment ``directory``."""
    out: Check = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        out[name] = [os.path.getsize(path), file_checksum(path)]
    return out


def verify_segment(directory: str, check: Mapping[str, Sequence[Any]]) -> None:
    """Compare every file of ``directory`` with its recorded length and checksum.

    Raises :class:`IndexCorrupt` naming the first file that differs, is
    missing, or is not recorded. Cost: one read of the segment.
    """
    names = set(_listdir(directory))
    for name in sorted(names - set(check)):
        raise corrupt(os.path.join(directory, name), "a file the manifest does not record")
    for name, (size, digest) in sorted(check.items()):
        path = os.path.join(directory, name)
        if name not in names:
            raise corrupt(path, "missing")
        _check_size(path, int(size))
        try:
            got = file_checksum(path)
        except OSError as exc:
            raise corrupt(path, exc.strerror or str(exc)) from exc
        if got != digest:
            raise corrupt(path, "checksum mismatch: its content changed after it was written")


def _listdir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise corrupt(directory, exc.strerror or str(exc)) from exc


def _check_size(path: str, size: int) -> None:
    try:
        got = os.stat(path).st_size
    except FileNotFoundError:
        raise  # retired by a writer (the reader reads CURRENT again), or lost
    except OSError as exc:
        raise corrupt(path, exc.strerror or str(exc)) from exc
    if got != size:
        raise corrupt(path, f"{got:,} bytes where the manifest records {size:,}")


def load_array(path: str, dtypes: Sequence[np.dtype[Any]]) -> npt.NDArray[Any]:
    """The 1-D ``.npy`` array at ``path``, memory-mapped, after checking it.

    The one place where index arrays are opened: the header must parse, give
    one of ``dtypes`` and one dimension, and the file must be exactly as long
    as the header implies; any failure (a 0-byte file, a damaged header:
    ``ValueError``, ``SyntaxError``, ``tokenize.TokenError``, ``EOFError``...)
    is :class:`IndexCorrupt`. ``FileNotFoundError`` passes (a reader retries).
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"npy format {version}")
            offset = f.tell()
    except FileNotFoundError:
        raise
    except Exception as exc:  # whatever a damaged header raises
        raise corrupt(path, f"unreadable array header: {_cause(exc)}") from exc
    if dtype not in dtypes or len(shape) != 1 or dtype.hasobject:
        raise corrupt(path, f"unexpected array {dtype} {shape}")
    expected = offset + shape[0] * dtype.itemsize
    if size != expected:
        raise corrupt(path, f"{size:,} bytes where its header implies {expected:,} (truncated?)")
    if shape[0] == 0:
        return np.empty(0, dtype=dtype)
    try:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise corrupt(path, _cause(exc)) from exc


def _cause(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
    whole segment (an orphan unless a catalog commit names it). Cost: a sort
    of the rows, O(n log n).
    """
    if local is None:
        parts = list(fingerprints)
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        values = np.concatenate(parts).astype(np.uint32) if parts else np.empty(0, np.uint32)
        local = np.repeat(np.arange(len(parts), dtype=np.uint32), counts)
    else:
        values = np.asarray(fingerprints, dtype=np.uint32)
    order = np.argsort(values, kind="stable")
    values = values[order]
    local = local[order]
    tmp = directory + ".tmp"
    os.makedirs(tmp, exist_ok=True)
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
    os.replace(tmp, directory)
    _fsync_dir(os.path.dirname(directory))
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))


def front_code(paths: bytes, offsets: I64) -> tuple[bytes, U8, npt.NDArray[Any]]:
    """Front-code the paths ``paths[offsets[i]:offsets[i + 1]]``: (suffixes, lcp, offsets).

    ``lcp[i]`` bytes of path ``i`` are those of path ``i - 1`` (0 for every
    :data:`PATH_BLOCK`-th path; at most :data:`MAX_LCP`); the suffixes follow
    each other, their offsets as ``uint32`` when they fit. Cost: a compare of
    the first :data:`MAX_LCP` bytes of neighbours (numpy, in chunks of 64k
    paths), a join of the suffixes.
    """
    n = len(offsets) - 1
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    lens = np.diff(np.asarray(offsets, dtype=np.int64))
    items = [paths[a:b] for a, b in zip(starts.tolist(), offsets[1:].tolist(), strict=True)]
    lcp = np.zeros(n, dtype=np.int64)
    chunk = 1 << 16
    for lo in range(1, n, chunk):
        part = items[lo - 1 : lo + chunk]
        m = np.frombuffer(
            b"".join(p[:MAX_LCP].ljust(MAX_LCP, b"\0") for p in part), dtype=np.uint8
        ).reshape(-1, MAX_LCP)
        eq = m[1:] == m[:-1]
        first = np.where(eq.all(axis=1), MAX_LCP, eq.argmin(axis=1))
        cap = np.minimum(lens[lo - 1 : lo - 1 + len(first)], lens[lo : lo + len(first)])
        lcp[lo : lo + len(first)] = np.minimum(first, cap)
    lcp[::PATH_BLOCK] = 0
    suffixes = b"".join(p[k:] for p, k in zip(items, lcp.tolist(), strict=True))
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens - lcp, out=out[1:])
    if out[-1] < 1 << 32:
        return suffixes, lcp.astype(np.uint8), out.astype(np.uint32)
    return suffixes, lcp.astype(np.uint8), out


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
    ordered = [paths[i] for i in order]
    offsets = np.zeros(len(ordered) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in ordered], out=offsets[1:])
    return SegmentFiles(records, b"".join(ordered), offsets)


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
                _check_size(os.path.join(directory, name), int(size))
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
        if self.offsets is not None:
            bucket = (q >> BUCKET_BITS).astype(np.int64)
            offsets = np.asarray(self.offsets)
            lo = offsets[bucket].astype(np.int64)
            hi = offsets[bucket + 1].astype(np.int64)
            key: npt.NDArray[Any] = (q & 0xFFFF).astype(np.uint16)
        else:
            lo = np.zeros(len(q), dtype=np.int64)
            hi = np.full(len(q), self.rows, dtype=np.int64)
            key = q
        first = _bound(self.fp, lo, hi, key, right=False)
        last = _bound(self.fp, first, hi, key, right=True)
        counts = last - first
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        qpos = np.repeat(np.arange(len(q), dtype=np.int64), counts)
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
        fid = np.asarray(self.files["id"])
        pos = np.minimum(np.searchsorted(fid, ids), max(len(fid) - 1, 0))
        here = fid[pos] == ids if len(fid) else np.zeros(len(ids), dtype=bool)
        return pos.astype(np.int64), here

    def path(self, pos: int) -> bytes:
        """The raw path bytes of the file at ``pos``.

        Cost: one ``pread`` (of at most :data:`PATH_BLOCK` suffixes when front-coded).
        """
        try:
            return self._path(pos)
        except (ValueError, OverflowError, OSError) as exc:
            raise corrupt(os.path.join(self.directory, "paths.bin"), _cause(exc)) from exc

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


def _bound(
    keys: npt.NDArray[Any],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    target: npt.NDArray[Any],
    right: bool,
) -> npt.NDArray[np.int64]:
    """Vectorised ``bisect_left`` (or ``bisect_right``) of each target in ``keys[lo:hi]``."""
    lo = lo.copy()
    hi = hi.copy()
    last = len(keys) - 1
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = np.minimum((lo + hi) >> 1, last)
        probe = np.asarray(keys[mid])
        go_right = (probe <= target) if right else (probe < target)
        lo = np.where(active & go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)


# --- manifests --------------------------------------------------------------------


@dataclass(frozen=True)
class Manifest:
    """One published state: parameter sets, segments per set, and dead file ids.

    ``checks``: segment name -> :data:`Check` of its files (empty in a manifest
    of format 1, and for a segment an older writer made); ``dead_check``: the
    ``[bytes, checksum]`` of the dead-id file; ``files``: the live entries of
    each parameter set (what the catalog says; ``None`` in format 1).
    """

    generation: int
    params: dict[int, dict[str, Any]]  # id -> {"key": ..., "anchors": file name or None}
    segments: dict[int, list[str]]  # params id -> segment names
    dead: str | None  # file name of the sorted dead ids, under manifests/
    last_params: int | None
    checks: dict[str, Check] = field(default_factory=dict)
    dead_check: list[Any] | None = None
    files: dict[int, int] | None = None


_MANIFEST_NAME = re.compile(r"gen-(\d{8,})")


def _digest(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "digest"}
    return xxhash.xxh3_128_hexdigest(json.dumps(body, sort_keys=True).encode())


def publish(root: str, manifest: Manifest, dead: U32) -> Manifest:
    """Make ``manifest`` the state readers see: write it, then swap ``CURRENT`` atomically.

    Returns it as published (with the dead-id file's name and check).
    """
    mdir = os.path.join(root, "manifests")
    os.makedirs(mdir, exist_ok=True)
    name = f"gen-{manifest.generation:08d}"
    dead_name = None
    dead_check = None
    if len(dead):
        dead_name = name + ".dead.npy"
        dead_path = os.path.join(mdir, dead_name)
        _save(dead_path, np.sort(dead).astype(np.uint32))
        dead_check = [os.path.getsize(dead_path), file_checksum(dead_path)]
    doc: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "generation": manifest.generation,
        "params": {str(k): v for k, v in manifest.params.items()},
        "segments": {str(k): v for k, v in manifest.segments.items()},
        "dead": dead_name,
        "last_params": manifest.last_params,
        "checks": manifest.checks,
        "dead_check": dead_check,
        "files": {str(k): v for k, v in (manifest.files or {}).items()},
    }
    doc["digest"] = _digest(doc)
    with open(os.path.join(mdir, name + ".json"), "w", encoding="utf-8") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(mdir)
    tmp = os.path.join(root, f"CURRENT.tmp{os.getpid()}")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(root, "CURRENT"))
    _fsync_dir(root)
    return Manifest(
        manifest.generation,
        manifest.params,
        manifest.segments,
        dead_name,
        manifest.last_params,
        manifest.checks,
        dead_check,
        manifest.files,
    )


def read_manifest(root: str) -> Manifest | None:
    """The manifest in force, or ``None`` for an index never published.

    Raises ``FileNotFoundError`` if the manifest vanished after ``CURRENT``
    was read (a writer moved on: read again) and :class:`IndexCorrupt` if it
    is unreadable, fails its digest, or if ``CURRENT`` is missing or damaged
    while the index has published before (a published state is only ever
    replaced, never removed).
    """
    current = os.path.join(root, "CURRENT")
    try:
        with open(current, encoding="ascii") as f:
            name = f.read().strip()
    except FileNotFoundError:
        if _published_before(root):
            raise corrupt(current, "missing, yet the index has published states") from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise corrupt(current, _cause(exc)) from exc
    if not _MANIFEST_NAME.fullmatch(name):
        raise corrupt(current, f"names no manifest ({name[:40]!r})")
    path = os.path.join(root, "manifests", name + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        if doc.get("format") not in READ_FORMATS:
            raise corrupt(path, f"snapshot format {doc.get('format')} is not supported")
        if doc["format"] >= 2 and doc.get("digest") != _digest(doc):
            raise corrupt(path, "digest mismatch: the manifest was changed after it was written")
        files = doc.get("files")
        return Manifest(
            generation=int(doc["generation"]),
            params={int(k): dict(v) for k, v in doc["params"].items()},
            segments={int(k): [str(n) for n in v] for k, v in doc["segments"].items()},
            dead=doc["dead"],
            last_params=doc["last_params"],
            checks={str(k): dict(v) for k, v in doc.get("checks", {}).items()},
            dead_check=doc.get("dead_check"),
            files=None if files is None else {int(k): int(v) for k, v in files.items()},
        )
    except FileNotFoundError:
        raise
    except IndexCorrupt:
        raise
    except Exception as exc:  # JSON of any shape
        raise corrupt(path, f"unreadable index manifest: {_cause(exc)}") from exc


def _published_before(root: str) -> bool:
    """Whether a state after the first (generation 0, an empty index) was published."""
    try:
        names = os.listdir(os.path.join(root, "manifests"))
    except OSError:
        return False
    for n in names:
        m = _MANIFEST_NAME.match(n)
        if m and int(m.group(1)) > 0:
            return True
    return False
