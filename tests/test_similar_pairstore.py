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


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    seed=st.integers(0, 2**32 - 1),
    same_order=st.booleans(),
)
def test_saved_exact_scores_load_back_by_pair_whether_written_whole_or_joined(
    tmp_path_factory: pytest.TempPathFactory, n: int, seed: int, same_order: bool
) -> None:
    """``save_exact`` writes the table again from the pairs given when they are the
    stored ones in order, else joins the scores in by ``(a, b)``: either way each pair
    loads back with the score given for it, an unscored one with what was stored, and
    the stored run stays."""
    import duckdb

    from sif.index import pairs
    from sif.index.schema import MIGRATIONS

    rng = np.random.default_rng(seed)
    con = duckdb.connect(str(tmp_path_factory.mktemp("c") / "c.duckdb"))
    for _, _, step in MIGRATIONS:
        step(con, b"\0" * 32)
    ab = rng.choice(10_000, size=(n, 2), replace=False)  # distinct pairs
    a = ab[:, 0].astype(np.uint32)
    b = (ab[:, 1] + 10_000).astype(np.uint32)
    cols = {
        "a": a,
        "b": b,
        "shared": rng.integers(1, 50, n).astype(np.uint32),
        "hits_a": rng.integers(1, 50, n).astype(np.uint32),
        "hits_b": rng.integers(1, 50, n).astype(np.uint32),
        "exact_ab": np.where(rng.random(n) < 0.3, rng.random(n), np.nan),
        "exact_ba": rng.random(n),
        "exact_n": rng.integers(0, 3, n).astype(np.uint32),
    }
    cols["exact_ba"][np.isnan(cols["exact_ab"])] = np.nan
    pairs.store_pairs(con, "k", cols, 7, None)
    # This run scores some of the pairs not scored before.
    new = np.isnan(cols["exact_ab"]) & (rng.random(n) < 0.6)
    cols["exact_ab"][new] = rng.random(int(new.sum()))
    cols["exact_ba"][new] = rng.random(int(new.sum()))
    cols["exact_n"][new] = rng.integers(0, 3, int(new.sum()))
    given_ = cols
    if not same_order:  # another order, and only the pairs scored this run
        keep = rng.permutation(np.flatnonzero(new))
        given_ = {k: v[keep] for k, v in cols.items()}
    pairs.save_exact(con, given_)
    got = pairs.load_pairs(con, "k")
    assert got is not None and got[1] == 7
    loaded = got[0]
    order = {
        (int(x), int(y)): i for i, (x, y) in enumerate(zip(loaded["a"], loaded["b"], strict=True))
    }
    assert len(order) == n == len(loaded["a"])
    for i in range(n):
        j = order[(int(a[i]), int(b[i]))]
        for k in ("shared", "hits_a", "hits_b", "exact_n"):
            assert loaded[k][j] == cols[k][i]
        for k in ("exact_ab", "exact_ba"):
            assert np.isnan(loaded[k][j]) == np.isnan(cols[k][i])
            assert np.isnan(cols[k][i]) or loaded[k][j] == cols[k][i]


def test_pairs_that_cannot_be_stored_for_want_of_space_are_a_full_disk(tmp_path: Path) -> None:
    """A full disk at any point of ``sif similar`` (its index's writes, or the pairs' store:
    DuckDB's COMMIT fails and has ended the transaction) is IndexUnusable naming the
    cause, never the ROLLBACK's "no transaction is active"; once there is room, the next
    run gives the same pairs."""
    from actionutil import tmpfs
    from sif.errors import IndexUnusable

    family_tree(tmp_path / "t")
    for n in range(40):  # more pairs: a store that needs some room
        write(tmp_path / "t" / "more" / f"m{n}.txt", text(500 + n % 4, 3000) + text(600 + n, 300))
    with tmpfs("16m") as where:
        idx = where / "idx"
        first = find_similar([tmp_path / "t"], idx, options=SimilarOptions(max_df=50), jobs=1)
        assert len(first.pairs) > 100
        failed = 0
        for k, room in enumerate((4, 16, 32, 48, 64, 96, 128, 192, 256)):
            free = os.statvfs(where)
            with open(where / "filler", "wb") as filler:  # all the space left but room KB
                filler.write(b"\0" * max(0, free.f_bavail * free.f_frsize - room * 1024))
            try:
                opts = SimilarOptions(max_df=20 + k)  # new pairs to store each time
                find_similar([tmp_path / "t"], idx, options=opts, jobs=1)
            except IndexUnusable as exc:
                assert "No space left on device" in str(exc), exc
                failed += 1
            (where / "filler").unlink()
        assert failed
        again = find_similar([tmp_path / "t"], idx, options=SimilarOptions(max_df=50), jobs=1)
        assert described(again) == described(first)


@pytest.mark.parametrize("step", ["store_pairs", "save_exact"])
def test_a_full_disk_at_the_pairs_own_commit_is_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """The disk filled just before the pairs' store writes (a real tmpfs, a real ENOSPC):
    its COMMIT fails and has ended the transaction; the error is IndexUnusable naming the
    cause, never the ROLLBACK's "no transaction is active". The sweep of free room above
    reaches this write only at some block sizes of the catalog; this one always does."""
    import sif.index.pairs as pairs_module
    from actionutil import tmpfs
    from sif.errors import IndexUnusable

    family_tree(tmp_path / "t")
    for n in range(40):
        write(tmp_path / "t" / "more" / f"m{n}.txt", text(500 + n % 4, 3000) + text(600 + n, 300))
    with tmpfs("16m") as where:
        idx = where / "idx"
        first = find_similar([tmp_path / "t"], idx, options=SimilarOptions(max_df=50), jobs=1)
        real = getattr(pairs_module, step)
        filled = []

        def after_filling(con: object, *args: object) -> None:
            free = os.statvfs(where)
            with open(where / "filler", "wb") as filler:  # every byte left
                filler.write(b"\0" * (free.f_bavail * free.f_frsize))
            filled.append(step)
            real(con, *args)

        monkeypatch.setattr(pairs_module, step, after_filling)
        with pytest.raises(IndexUnusable, match="No space left on device"):
            find_similar([tmp_path / "t"], idx, options=SimilarOptions(max_df=30), jobs=1)
        assert filled == [step]
        monkeypatch.undo()
        (where / "filler").unlink()
        again = find_similar([tmp_path / "t"], idx, options=SimilarOptions(max_df=50), jobs=1)
        assert described(again) == described(first)
