"""Compaction: segments of a parameter set merged into one, streamed (from ``duck.py``).

The merged segment is written in pieces, so that memory stays bounded
whatever the size of the index (at 1 M files: 42 M rows, which the merge
held whole, with a sort, in about 4 GB):

- the rows a range of buckets (value >> :data:`sif.index.segments.BUCKET_BITS`)
  at a time, :data:`COMPACT_ROWS` at most a range (on average), read from
  every old segment (each opened again for a range, so that the pages its
  memory maps touched leave this process with it), those of dead files
  dropped, sorted by (value, file) and appended to ``fp.npy`` and ``fid.npy``;
- the files :data:`COMPACT_FILES` at a time, read from the catalog by id,
  their records appended to ``files.npy`` and their front-coded paths to
  ``paths.bin`` (a chunk is a multiple of :data:`sif.index.segments.PATH_BLOCK`
  paths, so the coding is exactly that of the whole list).

The bytes written are those that the segment of all the rows at once would
hold (tests compare both, with tiny chunks).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import duckdb
import numpy as np
import numpy.typing as npt

from sif.index.checks import checksum_files, corrupt
from sif.index.indexdir import CATALOG, temp_dir
from sif.index.segments import (
    BUCKET_BITS,
    BUCKET_MIN_ROWS,
    FILE_DTYPE,
    PATH_BLOCK,
    RangeReader,
    _fsync_dir,
    _pack,
    _save,
    _width,
    digest_column,
    front_code,
    joined_paths,
)
from sif.memtrim import release_memory

if TYPE_CHECKING:
    from sif.index.duck import DuckStore

U32 = npt.NDArray[np.uint32]

#: Rows merged at a time (on average: a range of buckets holds about this many).
COMPACT_ROWS = 1 << 20
#: Files read from the catalog at a time (a multiple of ``PATH_BLOCK``).
COMPACT_FILES = 1 << 15
#: Merge a parameter set's smallest segments once it has more than this...
MAX_SEGMENTS = 8
#: ... and all of them once this share of its rows belongs to dropped files.
MAX_DEAD_SHARE = 0.25


class _NpyStream:
    """A 1-D ``.npy`` file written in pieces: its length is known before its data."""

    def __init__(self, path: str, dtype: np.dtype[Any], length: int) -> None:
        self.path, self.dtype, self.length, self.written = path, dtype, length, 0
        self.f: BinaryIO = open(path, "wb")  # noqa: SIM115 (closed on exit)
        header = {
            "descr": np.lib.format.dtype_to_descr(dtype),
            "fortran_order": False,
            "shape": (length,),
        }
        np.lib.format.write_array_header_1_0(self.f, header)

    def write(self, arr: npt.NDArray[Any]) -> None:
        arr = np.ascontiguousarray(arr, dtype=self.dtype)
        self.written += len(arr)
        if self.written > self.length:
            raise corrupt(self.path, f"more than the {self.length:,} items expected")
        self.f.write(arr.tobytes())

    def __enter__(self) -> _NpyStream:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        try:
            if kind is None:
                if self.written != self.length:
                    got, want = self.written, self.length
                    raise corrupt(self.path, f"{got:,} items where {want:,} expected")
                self.f.flush()
                os.fsync(self.f.fileno())
        finally:
            self.f.close()


def write_streamed(
    directory: str,
    n_files: int,
    n_rows: int,
    rows: Iterator[tuple[U32, U32]],
    files: Iterator[tuple[npt.NDArray[Any], bytes, npt.NDArray[np.int64]]],
) -> int:
    """Write a segment from pieces into the new directory ``directory``; returns its bytes.

    ``rows`` gives (values, local file positions), sorted by (value, position)
    within a piece and each piece after the one before; ``files`` the records
    (:data:`sif.index.segments.FILE_DTYPE`, by id), path bytes and offsets of
    consecutive files, each piece but the last a multiple of ``PATH_BLOCK``
    files. ``n_files`` and ``n_rows`` are the totals: a mismatch is
    :class:`sif.errors.IndexCorrupt` (the catalog disagrees with its
    segments). The same files, written and renamed as
    :func:`sif.index.segments.write_segment` does.
    """
    tmp = temp_dir(os.path.dirname(directory), os.path.basename(directory) + ".", ".tmp")
    try:
        _write_pieces(tmp, n_files, n_rows, rows, files)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_dir(tmp)
    os.replace(tmp, directory)
    _fsync_dir(os.path.dirname(directory))
    return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))


def _write_pieces(
    tmp: str,
    n_files: int,
    n_rows: int,
    rows: Iterator[tuple[U32, U32]],
    files: Iterator[tuple[npt.NDArray[Any], bytes, npt.NDArray[np.int64]]],
) -> None:
    join = os.path.join
    bucketed = n_rows >= BUCKET_MIN_ROWS
    width = _width(n_files)
    counts = np.zeros(1 << BUCKET_BITS, dtype=np.int64)
    last = -1
    fp_type = np.dtype(np.uint16 if bucketed else np.uint32)
    with (
        _NpyStream(join(tmp, "fp.npy"), fp_type, n_rows) as fp,
        _NpyStream(join(tmp, "fid.npy"), np.dtype(np.uint8), n_rows * width) as fid,
    ):
        for values, local in rows:
            if len(values):
                if int(values[0]) < last:
                    raise ValueError("rows out of order")
                last = int(values[-1])
            if bucketed:
                counts += np.bincount(values >> BUCKET_BITS, minlength=1 << BUCKET_BITS)
                fp.write((values & 0xFFFF).astype(np.uint16))
            else:
                fp.write(values)
            fid.write(_pack(local, width))
    if bucketed:
        offsets = np.zeros((1 << BUCKET_BITS) + 1, dtype=np.uint32)
        np.cumsum(counts, out=offsets[1:])
        _save(join(tmp, "offsets.npy"), offsets)
    lcps: list[npt.NDArray[np.uint8]] = []
    lens: list[npt.NDArray[Any]] = []
    with (
        _NpyStream(join(tmp, "files.npy"), FILE_DTYPE, n_files) as recs,
        open(join(tmp, "paths.bin"), "wb") as out,
    ):
        for records, paths, offsets_ in files:
            recs.write(records)
            suffixes, lcp, off = front_code(paths, offsets_)
            out.write(suffixes)
            lcps.append(lcp)
            lens.append(np.diff(off.astype(np.int64)))
        out.flush()
        os.fsync(out.fileno())
    lens_all = np.concatenate(lens) if lens else np.empty(0, np.int64)
    path_offsets = np.zeros(n_files + 1, dtype=np.int64)
    np.cumsum(lens_all, out=path_offsets[1:])
    lcp_all = np.concatenate(lcps) if lcps else np.empty(0, np.uint8)
    _save(join(tmp, "paths_lcp.npy"), lcp_all.astype(np.uint8))
    _save(
        join(tmp, "paths_off.npy"),
        path_offsets.astype(np.uint32) if path_offsets[-1] < 1 << 32 else path_offsets,
    )


def merged_rows(
    directories: Sequence[str], live: U32, stored_rows: int, chunk_rows: int
) -> Iterator[tuple[U32, U32]]:
    """The rows of the segments in ``directories`` of the files in ``live`` (sorted
    ids), a range of buckets at a time: (values, positions in ``live``), sorted by
    (value, position). The rows of other files (dead) are dropped.

    Each segment is opened once (:class:`sif.index.segments.RangeReader`) and read
    a range at a time with ``pread``; its files are placed in ``live`` once (a
    binary search a file), and a row then takes its file's place by its position
    in the segment, a gather from a table of 8 bytes a file. Before, each row's
    id was gathered from the records' strided column, then sought in ``live``
    (at 1 M ids, 20 steps that miss the cache), and each segment was opened again
    for each range: merging one segment of 1 M files, 42 M rows, took 19.5-21.3 s
    then and 7.1-9.0 s with the places (100 k files: 1.65 s, then 0.75-1.0 s).
    """
    n_ranges = max(1, min(1 << BUCKET_BITS, -(-stored_rows // max(chunk_rows, 1))))
    # sorted(set()), not np.unique: its first call imports numpy.ma (~15 ms of a run).
    edges = sorted(set(np.linspace(0, 1 << BUCKET_BITS, n_ranges + 1).astype(np.int64).tolist()))
    readers = [_reader(d) for d in directories]
    places = [_places(live, r.ids) for r in readers]
    whole = [bool((p >= 0).all()) for p in places]  # no dead file: every row kept
    low, high = (0, 1) if sys.byteorder == "little" else (1, 0)  # a key's 32-bit halves
    for lo, hi in itertools.pairwise(edges):
        parts = []
        for reader, place, all_live in zip(readers, places, whole, strict=True):
            values, local = reader.rows(lo, hi)
            pos = place[local]
            if not all_live:
                keep = pos >= 0
                values, pos = values[keep], pos[keep]
            parts.append((values, pos))
        # Each row's 64-bit key (value, position), written in place into one array for
        # the range: no concatenation, no temporary a step (at 100 k files the range's
        # concatenations, keys and split took 0.05 of the merge's 0.16 s of rows).
        keys = np.empty(sum(len(v) for v, _ in parts), dtype=np.uint64)
        at = 0
        for values, pos in parts:
            part = keys[at : at + len(values)]
            part[:] = values
            part <<= np.uint64(32)
            part |= pos.view(np.uint64)  # positions are >= 0 here
            at += len(values)
        del parts
        # Each segment's keys are sorted already (its rows by value and position; a
        # file's place grows with its position): timsort merges these runs. On 4.25 M
        # rows in 7 runs, 0.06 s against 0.29 s for the default sort; 60 runs, 0.10 s
        # against 0.36 s.
        keys.sort(kind="stable")
        release_memory()  # the range's parts, freed: the next range reuses no holes
        halves = keys.view(np.uint32).reshape(-1, 2)  # views of the keys: no copy
        yield halves[:, high], halves[:, low]


def _reader(directory: str) -> RangeReader:
    """The :class:`RangeReader` of a segment the catalog names (a missing file is damage)."""
    try:
        return RangeReader(directory)
    except FileNotFoundError as exc:
        raise corrupt(exc.filename or directory, "missing") from None


def _places(live: U32, ids: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """The position in ``live`` (sorted) of each of ``ids``, -1 where it is not there."""
    if not len(live):
        return np.full(len(ids), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(live, ids), len(live) - 1).astype(np.int64)
    return np.where(live[pos] == ids, pos, -1)


def file_chunks(
    con: Any,
    pid: int,
    live: U32,
    chunk_files: int,
    segments: list[int] | None = None,
    catalog: str = CATALOG,
) -> Iterator[tuple[npt.NDArray[Any], bytes, npt.NDArray[np.int64]]]:
    """The catalog's files of parameter set ``pid`` (ids ``live``, sorted; those of the
    segments ``segments`` only, if given) as segment records, path bytes and offsets,
    ``chunk_files`` at a time (a multiple of ``PATH_BLOCK``). No Python a file: the
    catalog gives the codes of kinds and views, and the paths and digests are joined
    in C (at 100 k files, 0.13-0.15 s of a merge's 0.52 s went to a Python step or
    three a file). A kind or view that sif does not know is damage to ``catalog``."""
    from sif.index.commitcols import codes

    kinds, views = (list(c) for c in codes())  # in code order
    step = max(PATH_BLOCK, chunk_files - chunk_files % PATH_BLOCK)
    for start in range(0, len(live), step):
        lo, hi = int(live[start]), int(live[min(start + step, len(live)) - 1])
        # The kinds and views as their codes + 1 (0: a name sif does not know).
        cols = con.execute(
            "SELECT id, coalesce(list_position(?::VARCHAR[], kind), 0) AS kind, n_fp, "
            "n_distinct, size, dev, ino, mtime_ns, digest, path, "
            "coalesce(list_position(?::VARCHAR[], view), 0) AS view, "
            "octet_length(coalesce(origin, path)) AS olen FROM files "
            "WHERE params_id = ? AND id BETWEEN ? AND ? "
            "AND (?::INTEGER[] IS NULL OR list_contains(?::INTEGER[], segment)) ORDER BY id",
            [kinds, views, pid, lo, hi, segments, segments],
        ).fetchnumpy()
        n = len(cols["id"])
        for name, col in cols.items():  # DuckDB masks NULLs: a field sif always writes
            if bool(np.any(getattr(col, "mask", False))):
                raise corrupt(catalog, f"a file without its {name}")
        rec = np.zeros(n, dtype=FILE_DTYPE)
        for name in ("id", "n_fp", "n_distinct", "size", "dev", "ino", "mtime_ns", "olen"):
            rec[name] = np.asarray(cols[name])
        for name in ("kind", "view"):
            code = np.asarray(cols[name], dtype=np.int64)
            if n and int(code.min()) < 1:
                raise corrupt(catalog, f"a file of an unknown {name}")
            rec[name] = code - 1
        rec["digest"] = digest_column(cols["digest"])  # joined in C, as the paths
        yield rec, *joined_paths(cols["path"])


def compact(store: DuckStore, pid: int, segments: list[int] | None = None) -> int:
    """Merge the segments ``segments`` (ids; default: every one) of parameter set ``pid``
    into one, without dead rows; returns the new segment's id.

    Memory is bounded by :data:`COMPACT_ROWS` rows and :data:`COMPACT_FILES`
    files at a time, whatever the index's size. Cost: one read of every row of
    those segments and of their files in the catalog, a sort a range of rows.
    """
    self = store
    con = self._con
    # Every segment of the set when ``segments`` is None (SQL NULL): the same statements.
    chosen = "params_id = ? AND (?::INTEGER[] IS NULL OR list_contains(?::INTEGER[], {}))"
    of_segments, of_files = chosen.format("id"), chosen.format("segment")
    args = [pid, segments, segments]
    old = con.execute(
        f"SELECT name, rows FROM segments WHERE {of_segments} ORDER BY id", args
    ).fetchall()
    live = con.execute(f"SELECT id FROM files WHERE {of_files} ORDER BY id", args).fetchnumpy()[
        "id"
    ]
    live = np.asarray(live, dtype=np.uint32)
    n_rows = int(
        con.execute(f"SELECT coalesce(sum(n_fp), 0) FROM files WHERE {of_files}", args).fetchone()[
            0
        ]  # type: ignore[index]
    )
    segdir = os.path.join(self.root, "segments")
    directories = [os.path.join(segdir, n) for n, _ in old]
    seg_id = self._int_meta("next_segment_id")
    name = f"seg-{seg_id:06d}"
    directory = os.path.join(segdir, name)
    stored = sum(int(r) for _, r in old)
    rows = merged_rows(directories, live, stored, COMPACT_ROWS)
    files = file_chunks(con, pid, live, COMPACT_FILES, segments, os.path.join(self.root, CATALOG))
    write_streamed(directory, len(live), n_rows, rows, files)
    checks = json.dumps(checksum_files(directory))
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            f"DELETE FROM dead WHERE segment IN (SELECT id FROM segments WHERE {of_segments})",
            args,
        )
        con.execute(f"DELETE FROM segments WHERE {of_segments}", args)
        con.execute(f"UPDATE files SET segment = ? WHERE {of_files}", [seg_id, *args])
        con.execute(
            "INSERT INTO segments (id, params_id, name, files, rows, checks) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [seg_id, pid, name, len(live), n_rows, checks],
        )
        self._set_meta("next_segment_id", seg_id + 1)
        self._set_meta("generation", self._int_meta("generation") + 1)
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has rolled back
            con.execute("ROLLBACK")
        raise
    self._publish()
    return seg_id


def to_merge(sizes: Sequence[tuple[int, int]]) -> list[int]:
    """Which of the segments ``sizes`` ((id, rows) each, two or more) to merge when a set
    has too many: the smallest ones (the largest set aside while it holds more rows than
    all the smaller ones together, two at least kept), so that a merge costs less than
    any segment it leaves alone and a row is merged again only when its segment has at
    least doubled (the cost of keeping the count bounded grows as n log n, not n²)."""
    tail = sorted(sizes, key=lambda s: (-s[1], s[0]))  # the largest first
    rest = sum(rows for _, rows in tail)
    while len(tail) > 2 and tail[0][1] > rest - tail[0][1]:
        rest -= tail[0][1]
        tail = tail[1:]
    return sorted(i for i, _ in tail)


def tidy(store: DuckStore, pid: int, written: list[int]) -> None:
    """Compaction of parameter set ``pid`` at the end of a run that wrote the segments
    ``written`` (a run's segments are never merged meanwhile):

    1. a set whose rows are more than :data:`MAX_DEAD_SHARE` dead is merged whole;
    2. else the segments this run wrote are merged into one (a run of 1 M files
       commits dozens): the cost is the run's own, not the index's;
    3. then, while the set has more than :data:`MAX_SEGMENTS` segments, its
       smallest ones are merged (:func:`to_merge`).

    So an incremental run that changed 1% of the files merges about 1% of the
    rows, not all of them (on a tree of 100 k files, whose first run left 8
    segments, the merge of all was 1.9 of its 2.3 s).
    """
    con = store.catalog()
    rows, dead_rows = con.execute(
        "SELECT coalesce(sum(rows), 0), (SELECT coalesce(sum(d.n_fp), 0) FROM dead d "
        "JOIN segments s ON d.segment = s.id WHERE s.params_id = ?) "
        "FROM segments WHERE params_id = ?",
        [pid, pid],
    ).fetchone()  # type: ignore[misc]
    if rows and dead_rows > MAX_DEAD_SHARE * rows:
        store.compact(pid)
        return
    sizes = _segment_rows(con, pid)
    if len(set(written) & set(sizes)) > 1:
        store.compact(pid, sorted(set(written) & set(sizes)))
        sizes = _segment_rows(con, pid)
    while len(sizes) > MAX_SEGMENTS:
        store.compact(pid, to_merge(list(sizes.items())))
        sizes = _segment_rows(con, pid)


def _segment_rows(con: Any, pid: int) -> dict[int, int]:
    """The segments of parameter set ``pid``: id -> rows."""
    return {
        int(i): int(r)
        for i, r in con.execute(
            "SELECT id, rows FROM segments WHERE params_id = ?", [pid]
        ).fetchall()
    }
