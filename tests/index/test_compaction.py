"""Compaction streamed in pieces (sif.index.compaction): the bytes of the whole-array merge."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.index import build, build_index, compaction, open_reader
from sif.index.segments import (
    BUCKET_MIN_ROWS,
    FILE_DTYPE,
    PATH_BLOCK,
    make_files,
    write_segment,
)
from sif.query import query_files
from treeutil import segment_content, write


def _files(n_files: int, seed: int) -> tuple[object, list[bytes]]:
    rng = np.random.default_rng(seed)
    paths = [b"/r/d%d/f%03d" % (int(rng.integers(0, 4)), i) for i in range(n_files)]
    recs = [
        (i * 2 + 1, i % 3, 1, 1, 10 + i, 7, 1000 + i, i * 5, bytes([i % 256]) * 32, i % 2, 3)
        for i in range(n_files)
    ]
    return make_files(recs, paths), paths


def _pieces(files: object, values: np.ndarray, local: np.ndarray, row_cut: int, file_cut: int):
    """The rows sorted by (value, file) cut every ``row_cut``; the files every ``file_cut``."""
    order = np.lexsort((local, values))
    v, loc = values[order], local[order]
    rows = [(v[i : i + row_cut], loc[i : i + row_cut]) for i in range(0, max(len(v), 1), row_cut)]
    recs, paths, offs = files.records, files.paths, files.path_offsets  # type: ignore[attr-defined]
    chunks = []
    for i in range(0, len(recs), file_cut):
        o = offs[i : i + file_cut + 1]
        chunks.append((recs[i : i + file_cut], paths[o[0] : o[-1]], o - o[0]))
    return iter(rows), iter(chunks)


def _same_dirs(a: Path, b: Path) -> None:
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


def _check(tmp: Path, n_files: int, values: np.ndarray, local: np.ndarray, cuts: tuple[int, int]):
    files, _ = _files(n_files, len(values))
    # The whole-array writer, rows given by file (a stable sort by value: (value, file)).
    by_file = np.argsort(local, kind="stable")
    write_segment(str(tmp / "whole"), files, values[by_file], local[by_file])  # type: ignore[arg-type]
    rows, chunks = _pieces(files, values, local, *cuts)
    compaction.write_streamed(str(tmp / "streamed"), n_files, len(values), rows, chunks)
    _same_dirs(tmp / "whole", tmp / "streamed")


@settings(deadline=None, max_examples=40)
@given(
    st.integers(1, 300),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 10**6)), max_size=400),
    st.integers(1, 50),
    st.integers(1, 4),
)
def test_streamed_segment_is_the_whole_one(
    tmp_path_factory: pytest.TempPathFactory,
    n_files: int,
    rows: list[tuple[int, int]],
    row_cut: int,
    blocks: int,
) -> None:
    tmp = tmp_path_factory.mktemp("seg")
    values = np.array([v for v, _ in rows], dtype=np.uint32) * np.uint32(70_000_001)
    local = np.array([f % n_files for _, f in rows], dtype=np.uint32)
    _check(tmp, n_files, values, local, (row_cut, blocks * PATH_BLOCK))


def test_streamed_bucketed_segment_is_the_whole_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = BUCKET_MIN_ROWS + 5000
    values = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    values[:99] = values[99:198]  # repeated values
    local = rng.integers(0, 70_000, n).astype(np.uint32)  # 3-byte file positions
    _check(tmp_path, 70_000, values, local, (50_000, 10 * PATH_BLOCK))


def test_a_row_count_that_disagrees_is_damage(tmp_path: Path) -> None:
    files, _ = _files(5, 1)
    rows, chunks = _pieces(files, np.arange(3, dtype=np.uint32), np.zeros(3, np.uint32), 2, 64)
    from sif.errors import IndexCorrupt

    with pytest.raises(IndexCorrupt):
        compaction.write_streamed(str(tmp_path / "seg"), 5, 4, rows, chunks)
    assert os.listdir(tmp_path) == []  # the partial segment is gone


def _letters_tree(
    top: Path, n: int, dirs: int, seed: int, size: int = 1500, step: int = 40
) -> list[Path]:
    """``n`` files of random letters under ``top/t`` (``size + step * i`` bytes), in
    ``dirs`` directories."""
    rng = np.random.default_rng(seed)
    paths = [top / "t" / f"d{i % dirs}" / f"f{i:03d}.txt" for i in range(n)]
    for i, p in enumerate(paths):
        write(p, rng.integers(97, 123, size + step * i, dtype=np.uint8).tobytes())
    return paths


def _tree_and_index(root: Path) -> tuple[Path, list[Path]]:
    paths = _letters_tree(root, 150, 7, seed=7)
    index = root / "idx"
    # A checkpoint every batch; the second run drops a third of the rows: all merged.
    build_index([root / "t"], index, jobs=1, checkpoint_bytes=20_000)
    for i, p in enumerate(paths):
        if i % 5 == 0:
            p.unlink()
        elif i % 9 == 1:
            write(p, p.read_bytes()[::-1])
    build_index([root / "t"], index, jobs=1, checkpoint_bytes=20_000)
    return index, paths


def test_compaction_in_tiny_pieces_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, paths = _tree_and_index(tmp_path / "a")
    monkeypatch.setattr(compaction, "COMPACT_ROWS", 5)
    monkeypatch.setattr(compaction, "COMPACT_FILES", 1)  # PATH_BLOCK files at a time
    b, _ = _tree_and_index(tmp_path / "b")
    sa, sb = sorted(os.listdir(a / "segments")), sorted(os.listdir(b / "segments"))
    assert sa == sb and len(sa) <= 2  # compacted
    for name in sa:  # the same rows and files (the paths differ by the tree's root)
        for f in ("fp.npy", "fid.npy", "paths_lcp.npy"):
            assert (a / "segments" / name / f).read_bytes() == (
                b / "segments" / name / f
            ).read_bytes()
    live = [p for i, p in enumerate(paths) if i % 5]
    # Copies of two indexed files, outside both trees: each finds its original.
    probes = []
    for i, p in enumerate((live[3], live[40])):
        probes.append(tmp_path / f"probe{i}.txt")
        probes[-1].write_bytes(p.read_bytes())
    found = {root: _answers(root, probes) for root in (a, b)}
    assert [[m[0] for m in r] for r in found[a]] == [[str(live[3])], [str(live[40])]]
    assert found[a] == [
        [(path.replace("/b/", "/a/"), *rest) for path, *rest in r] for r in found[b]
    ]


def test_tiny_checkpoints_give_the_same_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sif.index import build

    rng = np.random.default_rng(11)
    for i in range(60):
        write(
            tmp_path / "t" / f"d{i % 4}" / f"f{i:02d}.txt",
            rng.integers(97, 123, 3000, dtype=np.uint8).tobytes(),
        )
    whole = build_index([tmp_path / "t"], tmp_path / "whole", jobs=1)
    monkeypatch.setattr(build, "CHECKPOINT_ENTRIES", 3)  # 20 commits, then a compaction
    monkeypatch.setattr(build, "BATCH_FILES", 3)
    parts = build_index([tmp_path / "t"], tmp_path / "parts", jobs=1)
    assert whole.commits == 1 and parts.commits >= 20
    assert len(os.listdir(tmp_path / "parts" / "segments")) == 1
    assert segment_content(tmp_path / "whole") == segment_content(tmp_path / "parts")
    assert sorted(whole.read_paths) == sorted(parts.read_paths)


@settings(deadline=None, max_examples=200)
@given(st.lists(st.integers(0, 10**6), min_size=2, max_size=30))
def test_the_smallest_segments_are_merged_and_cost_less_than_any_left_alone(
    rows: list[int],
) -> None:
    sizes = list(enumerate(rows, start=5))
    chosen = compaction.to_merge(sizes)
    assert len(chosen) >= 2 and len(set(chosen)) == len(chosen)
    assert set(chosen) <= {i for i, _ in sizes}
    merged = sum(r for i, r in sizes if i in chosen)
    left = [r for i, r in sizes if i not in chosen]
    assert all(r > merged for r in left)  # a merge costs less than any segment left alone
    assert max(r for i, r in sizes if i in chosen) <= min(left, default=10**7)


def _segments(index: Path) -> dict[str, bytes]:
    return {
        n: (index / "segments" / n / "fp.npy").read_bytes() for n in os.listdir(index / "segments")
    }


def _answers(index: Path, files: list[Path]) -> list[list[tuple[object, ...]]]:
    reader = open_reader(index)
    try:
        return [
            sorted((m.path, m.size, m.percent, m.hits, m.shared) for m in r.matches)
            for r in query_files(files, reader, threshold=5)
        ]
    finally:
        reader.close()


def test_an_incremental_run_merges_its_own_rows_not_the_whole_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "BATCH_FILES", 8)  # a commit every 8 files: many segments
    paths = _letters_tree(tmp_path, 120, 6, seed=11)
    index = tmp_path / "idx"
    # A checkpoint every batch: the first run writes 15 segments and merges them.
    build_index([tmp_path / "t"], index, jobs=1, checkpoint_bytes=20_000)
    first = _segments(index)
    assert list(first) == ["seg-000016"]
    for run in range(1, 12):  # each run changes two files: one small segment a run
        for p in (paths[run], paths[60 + run]):
            write(p, p.read_bytes()[::-1] + b"%d" % run)
        build_index([tmp_path / "t"], index, jobs=1, checkpoint_bytes=20_000)
        now = _segments(index)
        assert len(now) <= 8
        assert set(first) <= set(now), run  # the first run's segment is never merged again
    fresh = tmp_path / "fresh"
    build_index([tmp_path / "t"], fresh, jobs=1)
    probes = [paths[0], paths[5], paths[65], paths[119]]
    assert _answers(index, probes) == _answers(fresh, probes)


@pytest.mark.parametrize("key", ["real", "one half-key for every path"])
def test_an_incremental_run_tells_paths_apart_even_when_their_keys_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """The walk and the index meet by 64-bit keys of their paths; where two paths share
    one, the run compares the paths themselves and plans the same."""
    import xxhash

    import sif.pathkeys
    import sif.treewalk

    if key != "real":  # the first 64 bits, those sorted and searched, the same for all
        monkeypatch.setattr(
            sif.pathkeys, "path_key", lambda origin: (0, xxhash.xxh64_intdigest(origin))
        )
        monkeypatch.setattr(sif.treewalk, "_treec", None)  # the walk's keys made by path_key
    paths = _letters_tree(tmp_path, 30, 3, seed=5, size=900, step=50)
    index = tmp_path / "idx"
    first = build_index([tmp_path / "t"], index, jobs=1)
    assert (first.new, first.changed, first.unchanged, first.removed) == (30, 0, 0, 0)
    write(paths[4], paths[4].read_bytes()[::-1])  # changed
    paths[9].unlink()  # removed
    write(tmp_path / "t" / "d1" / "new.txt", paths[12].read_bytes() + b"more")  # new
    again = build_index([tmp_path / "t"], index, jobs=1)
    assert (again.new, again.changed, again.unchanged, again.removed) == (1, 1, 28, 1)
    fresh = tmp_path / "fresh"
    build_index([tmp_path / "t"], fresh, jobs=1)
    probes = [paths[4], paths[12], paths[20]]
    assert _answers(index, probes) == _answers(fresh, probes)
    third = build_index([tmp_path / "t"], index, jobs=1)
    assert (third.new, third.changed, third.unchanged, third.removed) == (0, 0, 30, 0)


@settings(deadline=None, max_examples=60)
@given(
    st.lists(  # segments: (number of files, rows a file at most), ids given out in order
        st.tuples(st.integers(1, 12), st.integers(0, 6)), min_size=1, max_size=4
    ),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1, 3, 50, 1 << 20]),
    st.booleans(),
)
def test_merged_rows_are_the_live_rows_sorted_by_value_and_place(
    tmp_path_factory: pytest.TempPathFactory,
    shapes: list[tuple[int, int]],
    seed: int,
    chunk_rows: int,
    bucketed: bool,
) -> None:
    """Against a merge written out plainly: every row of a live file, from every segment,
    as (value, position of its file among the live ids), sorted; dead files' rows gone.
    Segments of whole values and of 16-bit remainders under bucket offsets alike."""
    from unittest import mock

    from sif.index import segments

    with mock.patch.object(segments, "BUCKET_MIN_ROWS", 1 if bucketed else 1 << 18):
        _check_merge(tmp_path_factory.mktemp("merge"), shapes, seed, chunk_rows)


def _check_merge(tmp: Path, shapes: list[tuple[int, int]], seed: int, chunk_rows: int) -> None:
    rng = np.random.default_rng(seed)
    next_id, dirs, rows = 1, [], []
    for k, (n_files, most) in enumerate(shapes):
        ids = np.arange(next_id, next_id + n_files, dtype=np.uint32)
        next_id += n_files + int(rng.integers(0, 3))  # gaps: ids of files dropped before
        counts = rng.integers(0, most + 1, size=n_files)
        values = rng.integers(0, 2**32, size=int(counts.sum()), dtype=np.uint64).astype(np.uint32)
        values[: len(values) // 3] &= 0xFF  # repeated values, within and across segments
        local = np.repeat(np.arange(n_files, dtype=np.uint32), counts)
        recs = [
            (int(i), 0, int(c), int(c), 100, 1, int(i), 0, b"\0" * 32, 0, 5)
            for i, c in zip(ids, counts, strict=True)
        ]
        files = make_files(recs, [b"/r/s%d/f%03d" % (k, j) for j in range(n_files)])
        d = str(tmp / f"seg{k}")
        write_segment(d, files, values, local)
        dirs.append(d)
        rows += zip(values.tolist(), ids[local].tolist(), strict=True)
    every = np.array(sorted({i for _, i in rows} | {next_id - 1}), dtype=np.uint32)
    live = np.sort(rng.choice(every, size=int(rng.integers(0, len(every) + 1)), replace=False))
    place = {int(i): p for p, i in enumerate(live.tolist())}
    want = sorted((v, place[i]) for v, i in rows if i in place)
    got: list[tuple[int, int]] = []
    for values, pos in compaction.merged_rows(dirs, live, len(rows), chunk_rows):
        got += zip(values.tolist(), pos.tolist(), strict=True)
    assert got == want


def test_a_segment_truncated_during_a_merge_is_damage_not_a_short_read(tmp_path: Path) -> None:
    from sif.errors import IndexCorrupt
    from sif.index.segments import RangeReader

    files, _ = _files(4, 1)
    d = tmp_path / "seg"
    write_segment(str(d), files, np.arange(40, dtype=np.uint32) * 7919, np.arange(40) % 4)  # type: ignore[arg-type]
    reader = RangeReader(str(d))
    assert len(reader.rows(0, 1 << 15)[0]) + len(reader.rows(1 << 15, 1 << 16)[0]) == 40
    os.truncate(d / "fid.npy", os.path.getsize(d / "fid.npy") - 10)
    with pytest.raises(IndexCorrupt, match=r"fid\.npy.*truncated"):
        reader.rows(0, 1 << 15)


def _views_tree(top: Path) -> None:
    """Plain files, random bytes, PostScript, a gzip file, a zip of two members and a
    tar: entries of both kinds and of two views, and members whose path is longer
    than their file's (``olen``)."""
    import gzip
    import io
    import tarfile
    import zipfile

    rng = np.random.default_rng(5)

    def text(n: int) -> bytes:
        return rng.integers(97, 123, n, dtype=np.uint8).tobytes()

    for i in range(6):
        write(top / f"d{i % 2}" / f"plain{i}.txt", text(2500 + 40 * i))
    write(top / "d0" / "doc.txt.gz", gzip.compress(text(4000), mtime=0))
    write(top / "d0" / "noise.bin", rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    # PostScript: indexed without its prolog (a view of its own).
    prolog = b"%!PS-Adobe-3.0\n%%BeginProlog\n/x { moveto } def\n%%EndProlog\n"
    write(top / "d1" / "page.ps", prolog + b"(" + text(3000) + b") show\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("in/a.txt", text(3000))
        z.writestr("in/b.txt", text(3500))
    write(top / "d1" / "pair.zip", buf.getvalue())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = text(2800)
        info = tarfile.TarInfo("member.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    write(top / "d1" / "one.tar", buf.getvalue())


def test_a_merge_keeps_each_entry_s_kind_view_digest_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _views_tree(tmp_path / "t")
    whole = build_index([tmp_path / "t"], tmp_path / "whole", jobs=1)
    monkeypatch.setattr(build, "CHECKPOINT_ENTRIES", 1)  # a segment an entry, then merged
    monkeypatch.setattr(build, "BATCH_FILES", 1)
    parts = build_index([tmp_path / "t"], tmp_path / "parts", jobs=1)
    assert whole.commits == 1 and parts.commits >= 8
    assert len(os.listdir(tmp_path / "parts" / "segments")) == 1
    content = segment_content(tmp_path / "whole")
    assert segment_content(tmp_path / "parts") == content
    records = content[1]
    names = FILE_DTYPE.names or ()
    kinds = {r[names.index("kind")] for r in records}
    views = {r[names.index("view")] for r in records}
    assert len(kinds) >= 2 and len(views) >= 2  # not only plain text: the codes were read
    # Members: the first olen bytes of their path name the file on disk that holds them.
    from sif.index.segments import Segment

    (name,) = os.listdir(tmp_path / "parts" / "segments")
    seg = Segment(str(tmp_path / "parts" / "segments" / name))
    paths = [seg.path(i) for i in range(len(seg.files))]
    olens = seg.files["olen"].tolist()
    seg.close()
    assert [p.find(b"!/") if b"!/" in p else len(p) for p in paths] == olens
    assert sum(b"!/" in p for p in paths) == 3


def test_a_file_of_a_kind_sif_does_not_know_is_damage_to_the_catalog(tmp_path: Path) -> None:
    import duckdb

    from sif.errors import IndexCorrupt
    from sif.index.duck import DuckStore

    _views_tree(tmp_path / "t")
    index = tmp_path / "idx"
    build_index([tmp_path / "t"], index, jobs=1)
    con = duckdb.connect(str(index / "catalog.duckdb"))
    con.execute("UPDATE files SET kind = 'hologram' WHERE id = (SELECT min(id) FROM files)")
    con.close()
    with DuckStore(str(index)) as store:
        pid = store.catalog().execute("SELECT id FROM params").fetchone()[0]
        with pytest.raises(IndexCorrupt, match=r"catalog\.duckdb.*unknown kind"):
            store.compact(pid)


@pytest.mark.parametrize("column", ["digest", "path", "size"])
def test_a_file_with_a_field_missing_is_damage_to_the_catalog(tmp_path: Path, column: str) -> None:
    import duckdb

    from sif.errors import IndexCorrupt
    from sif.index.duck import DuckStore

    _views_tree(tmp_path / "t")
    index = tmp_path / "idx"
    build_index([tmp_path / "t"], index, jobs=1)
    con = duckdb.connect(str(index / "catalog.duckdb"))
    con.execute(f"UPDATE files SET {column} = NULL WHERE id = (SELECT max(id) FROM files)")
    con.close()
    with DuckStore(str(index)) as store:
        pid = store.catalog().execute("SELECT id FROM params").fetchone()[0]
        with pytest.raises(IndexCorrupt, match=rf"catalog\.duckdb.*without its {column}"):
            store.compact(pid)
