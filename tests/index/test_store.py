"""The index store: segments, the DuckDB catalog, incremental runs, locks, corruption."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.errors import IndexCorrupt, IndexInUse, IndexParamsMismatch
from sif.fingerprint import make_params
from sif.index import MemoryIndex, ParamSet, build_index, open_reader, open_store
from sif.index.build import DEFAULT_PARAMS
from sif.index.duck import SCHEMA_VERSION
from sif.index.segments import BUCKET_MIN_ROWS, Segment, make_files, write_segment
from sif.query import match_scan, query_files, resolve_params
from treeutil import write


def tree(root: Path, n: int = 30, size: int = 6000, seed: int = 1) -> list[Path]:
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        p = root / f"d{i % 3}" / f"f{i:03d}.txt"
        write(p, rng.integers(97, 123, size, dtype=np.uint8).tobytes())
        paths.append(p)
    return paths


@pytest.mark.parametrize("rows", [1000, BUCKET_MIN_ROWS + 5000])
def test_segment_lookup_matches_brute_force(tmp_path: Path, rows: int) -> None:
    rng = np.random.default_rng(rows)
    n_files = 70_000 if rows > 1000 else 7  # >65,536 files: 3-byte file positions
    values = rng.integers(0, 1 << 32, rows, dtype=np.uint64).astype(np.uint32)
    values[:50] = values[50:100]  # repeated values
    local = rng.integers(0, n_files, rows).astype(np.uint32)
    recs = [(i * 3 + 1, 0, 1, 1, 10, 0, i, 0, b"\0" * 32) for i in range(n_files)]
    files = make_files(recs, [f"/f{i}".encode() for i in range(n_files)])
    write_segment(str(tmp_path / "seg"), files, values, local)
    seg = Segment(str(tmp_path / "seg"))
    assert seg.rows == rows
    query = np.unique(
        np.concatenate([values[:200], rng.integers(0, 1 << 32, 200).astype(np.uint32)])
    )
    qpos, ids = seg.lookup(query)
    got = sorted(zip(query[qpos].tolist(), ids.tolist(), strict=True))
    hit = np.isin(values, query)
    want = sorted(zip(values[hit].tolist(), (local[hit] * 3 + 1).tolist(), strict=True))
    assert got == want
    all_values, all_ids = seg.all_rows()
    assert sorted(zip(all_values.tolist(), all_ids.tolist(), strict=True)) == sorted(
        zip(values.tolist(), (local * 3 + 1).tolist(), strict=True)
    )
    assert seg.path(5) == b"/f5"


def test_front_coded_paths_read_back(tmp_path: Path) -> None:
    long = b"/" + b"x" * 300  # a shared prefix longer than MAX_LCP
    paths = [b"/a/b/c%d" % i for i in range(100)] + [long + b"/1", long + b"/22", b"/", b"/a"]
    paths += [os.fsencode("/d/\udcff\u00e9")] + [b"/a/b/c1" * 3] * 3
    recs = [(i + 1, 0, 1, 1, 10, 0, i, 0, b"\0" * 32) for i in range(len(paths))]
    write_segment(
        str(tmp_path / "seg"), make_files(recs, paths), [np.ones(1, np.uint32)] * len(paths)
    )
    seg = Segment(str(tmp_path / "seg"))
    assert [seg.path(i) for i in range(len(paths))] == paths
    assert os.path.getsize(tmp_path / "seg" / "paths.bin") < sum(map(len, paths)) // 2


def test_scoring_on_the_memory_double() -> None:
    idx = MemoryIndex()
    params = make_params()
    a = idx.add("/a", [1, 2, 3, 4])
    idx.add("/b", [1, 1, 2, 9, 10, 11, 12, 13])  # holds 1 twice
    idx.add("/c", [50])
    from sif.index.scan import ScannedFile

    q = ScannedFile("text", b"\0" * 32, np.array([1, 2, 3, 4], dtype=np.uint32), 1024)
    got = {m.path: m for m in match_scan(idx, params, q, threshold=0)}
    assert set(got) == {"/a", "/b"}
    assert got["/a"].percent == 100 and got["/a"].exact  # same size and digest
    assert got["/b"].percent == 75 and got["/b"].hits == 3 and got["/b"].shared == 2
    # Without a window sample the query's fingerprints stand in: C(b in q) = 2 of b's 7
    # values; C(q in b) scales it by their window counts, (size - 49) * distinct / all.
    assert got["/b"].file_in_query == 2 / 7
    assert got["/b"].query_in_file == pytest.approx(2 / 7 * (2048 - 49) * 7 / 8 / (1024 - 49))
    assert [m.path for m in match_scan(idx, params, q, threshold=80)] == ["/a"]
    assert match_scan(idx, params, q, threshold=0, exclude=(0, a))[0].path == "/b"


def test_incremental_reads_only_changed_files(tmp_path: Path) -> None:
    files = tree(tmp_path / "t")
    index = tmp_path / "idx"
    first = build_index([tmp_path / "t"], index, jobs=2)
    assert (first.new, first.files_read) == (30, 30)
    files[0].write_bytes(b"changed content " * 500)
    os.utime(files[1], ns=(1, 1))  # same bytes, new mtime: read again
    files[2].unlink()
    write(tmp_path / "t" / "d0" / "new.txt", b"brand new " * 300)
    second = build_index([tmp_path / "t"], index, jobs=2)
    assert (second.new, second.changed, second.unchanged, second.removed) == (1, 2, 27, 1)
    assert sorted(second.read_paths) == sorted(
        [str(files[0]), str(files[1]), str(tmp_path / "t" / "d0" / "new.txt")]
    )
    third = build_index([tmp_path / "t"], index, jobs=1)
    assert (third.files_read, third.unchanged) == (0, 30)
    reader = open_reader(index)
    params = reader.parameter_sets()[0]
    [res] = query_files([files[3]], reader, threshold=50)
    assert [m.path for m in res.matches] == []  # itself, left out
    [res] = query_files([tmp_path / "t" / "d0" / "new.txt"], reader, threshold=50)
    assert res.matches == ()
    # the removed file and the old version of the changed one are gone
    assert len(reader.describe(params, np.arange(1, 100, dtype=np.uint32))) == 30


def test_indexing_another_root_keeps_the_first(tmp_path: Path) -> None:
    tree(tmp_path / "a", n=3)
    tree(tmp_path / "b", n=4, seed=2)
    build_index([tmp_path / "a"], tmp_path / "idx", jobs=1)
    build_index([tmp_path / "b"], tmp_path / "idx", jobs=1)
    with open_store(tmp_path / "idx") as store:  # type: ignore[attr-defined]
        assert len(store.known_files(DEFAULT_PARAMS)) == 7
        (version,) = store.catalog().execute("SELECT max(version) FROM sif_migrations").fetchone()
        assert version == SCHEMA_VERSION


def test_other_parameters_are_indexed_beside_never_mixed(tmp_path: Path) -> None:
    files = tree(tmp_path / "t", n=5)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    sif94 = make_params("sif94")
    stats = build_index([tmp_path / "t"], idx, sif94, jobs=1)
    assert stats.new == 5  # fingerprinted again, beside
    reader = open_reader(idx)
    assert set(reader.parameter_sets()) == {ParamSet(DEFAULT_PARAMS), ParamSet(sif94)}
    assert reader.parameter_sets()[0] == ParamSet(sif94)  # the last run's
    copy = tmp_path / "copy.txt"
    copy.write_bytes(files[0].read_bytes())
    for p in (DEFAULT_PARAMS, sif94):
        [res] = query_files([copy], reader, p)
        assert [m.path for m in res.matches] == [str(files[0])]
        assert res.matches[0].exact and res.matches[0].percent == 100
    with pytest.raises(IndexParamsMismatch, match=r"holds: .*; asked: "):
        resolve_params(reader, make_params(k=6))


def test_second_writer_is_refused_or_waits(tmp_path: Path) -> None:
    tree(tmp_path / "t", n=2)
    store = open_store(tmp_path / "idx")
    with pytest.raises(IndexInUse, match=rf"index in use \(pid {os.getpid()}\)"):
        build_index([tmp_path / "t"], tmp_path / "idx", jobs=1)
    threading.Timer(0.5, store.close).start()
    started = time.monotonic()
    stats = build_index([tmp_path / "t"], tmp_path / "idx", jobs=1, wait=True)
    assert stats.new == 2 and time.monotonic() - started >= 0.4


def test_corrupt_catalog_is_named_and_rebuild_recovers(tmp_path: Path) -> None:
    tree(tmp_path / "t", n=3)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    (idx / "catalog.duckdb").write_bytes(b"this is not a database" * 1000)
    with pytest.raises(IndexCorrupt, match=r"index corrupt: .*catalog.duckdb.*run with --rebuild"):
        build_index([tmp_path / "t"], idx, jobs=1)
    stats = build_index([tmp_path / "t"], idx, jobs=1, rebuild=True)
    assert stats.new == 3
    # a truncated segment: the reader says so
    seg = next((idx / "segments").iterdir())
    (seg / "fid.npy").write_bytes((seg / "fid.npy").read_bytes()[:100])
    with pytest.raises(IndexCorrupt, match="segment"):
        open_reader(idx)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.lists(st.integers(0, 40), max_size=30), min_size=1, max_size=12))
def test_segment_rows_are_by_value_then_file(
    tmp_path_factory: pytest.TempPathFactory, per_file: list[list[int]]
) -> None:
    # The rows a segment stores, in order, are those of a stable sort by value of the
    # files' fingerprints in file order (values repeat, within and across files).
    seg_dir = tmp_path_factory.mktemp("seg") / "seg"
    parts = [np.array(v, dtype=np.uint32) * np.uint32(97_000_000) for v in per_file]
    recs = [(i + 1, 0, 1, 1, 10, 0, i, 0, b"\0" * 32) for i in range(len(parts))]
    files = make_files(recs, [f"/f{i}".encode() for i in range(len(parts))])
    write_segment(str(seg_dir), files, parts)
    values = np.concatenate(parts)
    owner = np.repeat(np.arange(len(parts)), [len(p) for p in parts]) + 1
    order = np.argsort(values, kind="stable")
    all_values, all_ids = Segment(str(seg_dir)).all_rows()
    assert all_values.tolist() == values[order].tolist()
    assert all_ids.tolist() == owner[order].tolist()
