"""``sif similar`` behind the pair store's protocol: rows streamed by bucket range."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.index.memory import MemoryIndex
from sif.index.segments import BUCKET_MIN_ROWS, RangeReader, Segment, make_files, write_segment
from sif.similar import SimilarOptions, find_similar
from textgen import text
from treeutil import write

# The module (``sif.similar.collate`` the attribute is the function of that name).
collation = importlib.import_module("sif.similar.collate")


def family_tree(root: Path) -> None:
    """Families of versions (shared passages), a boilerplate in every file, a zip-free mix."""
    boiler = text(99, 2500)
    for f in range(6):
        body = text(100 + f, 5000)
        for v in range(4):
            cut = (v * 911) % 4000
            data = body[:cut] + text(1000 + 10 * f + v, 700) + body[cut:]
            write(root / f"{f}/v{v}.txt", (boiler if v % 2 else b"") + data)
    write(root / "tiny/a.txt", b"same few bytes\n")
    write(root / "tiny/b.txt", b"same few bytes\n")
    write(root / "bin/x.bin", bytes(range(256)) * 40 + text(5, 3000))
    write(root / "bin/y.bin", bytes(range(256)) * 40 + text(5, 3000)[:2000])


def described(result: object) -> list[tuple[object, ...]]:
    return [
        (
            os.path.relpath(p.a.path),
            os.path.relpath(p.b.path),
            p.shared,
            p.exact_a_in_b,
            p.exact_b_in_a,
            p.a_in_b,
            p.b_in_a,
        )
        for p in result.pairs  # type: ignore[attr-defined]
    ]


def test_similar_on_a_memory_index_equals_the_on_disk_index(tmp_path: Path) -> None:
    family_tree(tmp_path / "t")
    opts = SimilarOptions(threshold=10, max_df=5)
    disk = find_similar([tmp_path / "t"], tmp_path / "idx", options=opts, jobs=1)
    memory = MemoryIndex()
    mem = find_similar([tmp_path / "t"], store=memory, options=opts, jobs=1)
    assert len(disk.pairs) > 10
    assert disk.pairs == mem.pairs  # same ids too: both commit in the walk's order
    assert disk.stats.fingerprints == mem.stats.fingerprints > 0
    assert disk.stats.stopped == mem.stats.stopped > 0
    # The memory index keeps its run: a second call reuses the stored pairs.
    again = find_similar([tmp_path / "t"], store=memory, options=opts, jobs=1)
    assert again.stats.reused and again.pairs == mem.pairs
    # Its spill directory (DuckDB's, made in the system's temp dir) goes with it.
    spill = Path(memory.temp_directory())
    assert spill.is_dir()
    memory.close()
    assert not spill.exists()


def test_many_small_partitions_give_the_pairs_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    family_tree(tmp_path / "t")
    opts = SimilarOptions(threshold=10, max_df=5)
    whole = find_similar([tmp_path / "t"], tmp_path / "one", options=opts, jobs=1)
    # About 5 rows a partition: hundreds of bucket ranges, each collated alone.
    monkeypatch.setattr(collation, "PARTITION_ROWS", 5)
    split = find_similar([tmp_path / "t"], tmp_path / "many", options=opts, jobs=1)
    assert collation.partition_count(split.stats.fingerprints) > 100
    assert described(split) == described(whole) and len(whole.pairs) > 10
    assert split.stats.stopped == whole.stats.stopped
    assert split.stats.fingerprints == whole.stats.fingerprints


def _segment(tmp_path: Path, values: np.ndarray, name: str) -> Segment:
    n_files = 5
    local = (np.arange(len(values)) % n_files).astype(np.uint32)
    rows = [(10 + i, 0, 0, 0, 0, 0, 0, 0, b"\0" * 32) for i in range(n_files)]
    files = make_files(rows, [f"/f{i}".encode() for i in range(n_files)])
    write_segment(str(tmp_path / name), files, values.astype(np.uint32), local)
    return Segment(str(tmp_path / name))


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[Segment]:
    where = tmp_path_factory.mktemp("rows")
    rng = np.random.default_rng(11)
    small = rng.integers(0, 2**32, 3000, dtype=np.uint64)
    big = rng.integers(0, 2**32, BUCKET_MIN_ROWS + 5000, dtype=np.uint64)
    segs = [_segment(where, small, "small"), _segment(where, big, "big")]
    assert segs[0].offsets is None and segs[1].offsets is not None  # both layouts
    return segs


@settings(max_examples=30, deadline=None)
@given(lo=st.integers(0, 65535), width=st.integers(1, 65536))
def test_a_range_of_rows_is_the_bucket_range_of_all_rows(
    segments: list[Segment], lo: int, width: int
) -> None:
    hi = min(65536, lo + width)
    for seg in segments:
        values, fids = seg.all_rows()
        reader = RangeReader(seg.directory)
        got_v, local = reader.rows(lo, hi)
        got_f = reader.ids[local]
        sel = ((values >> 16) >= lo) & ((values >> 16) < hi)
        assert np.array_equal(got_v, values[sel]) and np.array_equal(got_f, fids[sel])
