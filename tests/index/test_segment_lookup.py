"""A segment's lookups (``sif query``'s hot path) against a plain reference.

Both layouts (whole ``uint32`` values; 16-bit remainders under bucket
offsets), values held by several rows, empty and crowded buckets, ids with
gaps: :meth:`Segment.lookup` and :meth:`Segment.position` must give what a
brute-force search of :meth:`Segment.all_rows` gives, with the compiled search
(``sif.index._lookupc``) and with the numpy descent it stands in for.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.errors import IndexCorrupt
from sif.index import segments as segments_module
from sif.index.segments import (
    BUCKET_MIN_ROWS,
    Segment,
    _descend,
    _descend_numpy,
    make_files,
    stable_order,
    write_segment,
)

KERNELS = ["compiled", "numpy"]


@contextlib.contextmanager
def kernel(name: str) -> Iterator[None]:
    """The compiled search, or the numpy descent (as without a compiler)."""
    saved = segments_module._lookupc
    if name == "numpy":
        segments_module._lookupc = None
    try:
        yield
    finally:
        segments_module._lookupc = saved


def test_the_compiled_search_is_built() -> None:
    # setup.py builds it (optional=True only spares an install without a compiler).
    assert segments_module._lookupc is not None


N_FILES = 3000
#: File ids with gaps (a segment holds ids from a global sequence).
IDS = 7 * np.arange(N_FILES, dtype=np.uint32) + 3


def _segment(where: Path, values: np.ndarray, name: str) -> Segment:
    local = (np.arange(len(values)) % N_FILES).astype(np.uint32)
    rows = [(int(IDS[i]), 0, 1, 1, 0, 0, i, 0, b"\0" * 32) for i in range(N_FILES)]
    files = make_files(rows, [f"/d/f{i}".encode() for i in range(N_FILES)])
    write_segment(str(where / name), files, values.astype(np.uint32), local)
    return Segment(str(where / name))


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[Segment]:
    where = tmp_path_factory.mktemp("lookup")
    rng = np.random.default_rng(5)
    # Values from a small pool repeat (several rows a value); one bucket is crowded.
    pool = rng.integers(0, 2**32, 4000, dtype=np.uint64)
    small = rng.choice(pool, 6000)
    crowd = (np.uint64(0x1234) << np.uint64(16)) | rng.integers(0, 1 << 16, 3000, dtype=np.uint64)
    big = np.concatenate([rng.choice(pool, BUCKET_MIN_ROWS), crowd, small[:500]])
    segs = [_segment(where, small, "small"), _segment(where, big, "big")]
    assert segs[0].offsets is None and segs[1].offsets is not None  # both layouts
    return segs


def _reference(seg: Segment, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, ids = seg.all_rows()
    lo = np.searchsorted(values, query, side="left")
    hi = np.searchsorted(values, query, side="right")
    qpos = np.repeat(np.arange(len(query), dtype=np.int64), hi - lo)
    rows = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi, strict=True)] + [[]])
    return qpos, ids[rows.astype(np.int64)]


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=40, deadline=None)
@given(
    which=st.integers(0, 1),
    seed=st.integers(0, 2**32 - 1),
    present=st.integers(0, 300),
    absent=st.integers(0, 300),
)
def test_lookup_finds_every_row_of_each_value(
    segments: list[Segment], name: str, which: int, seed: int, present: int, absent: int
) -> None:
    seg = segments[which]
    rng = np.random.default_rng(seed)
    values, _ = seg.all_rows()
    picked = values[rng.integers(0, len(values), present)] if present else values[:0]
    edges = np.array([0, 2**32 - 1, int(values[0]), int(values[-1])], dtype=np.uint64)
    noise = rng.integers(0, 2**32, absent, dtype=np.uint64)
    query = np.unique(np.concatenate([picked, noise, edges]).astype(np.uint32))
    with kernel(name):
        qpos, ids = seg.lookup(query)
    want_qpos, want_ids = _reference(seg, query)
    assert qpos.dtype == np.int64 and ids.dtype == np.uint32
    np.testing.assert_array_equal(qpos, want_qpos)
    np.testing.assert_array_equal(ids, want_ids)
    assert len(qpos) >= present  # each value picked is held by one row at least


@pytest.mark.parametrize("name", KERNELS)
def test_lookup_of_nothing_and_of_a_crowded_bucket(segments: list[Segment], name: str) -> None:
    with kernel(name):
        for seg in segments:
            qpos, ids = seg.lookup(np.empty(0, np.uint32))
            assert len(qpos) == len(ids) == 0
        crowded = segments[1]
        values, _ = crowded.all_rows()
        query = np.unique(values[(values >> 16) == 0x1234])
        assert len(query) > 2000
        qpos, ids = crowded.lookup(query)
    want_qpos, want_ids = _reference(crowded, query)
    np.testing.assert_array_equal(qpos, want_qpos)
    np.testing.assert_array_equal(ids, want_ids)


@pytest.mark.parametrize("name", KERNELS)
@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(0, 7 * N_FILES + 20), max_size=200))
def test_position_of_ids_present_or_not(segments: list[Segment], name: str, ids: list[int]) -> None:
    seg = segments[1]
    query = np.array(ids, dtype=np.uint32)
    with kernel(name):
        pos, here = seg.position(query)
    column = np.ascontiguousarray(seg.files["id"])
    want = np.minimum(np.searchsorted(column, query), len(column) - 1)
    np.testing.assert_array_equal(here, column[want] == query)
    np.testing.assert_array_equal(pos[here], want[here])
    assert pos.dtype == np.int64
    assert here.sum() == sum(1 for i in ids if i % 7 == 3 and i < 7 * N_FILES)


@st.composite
def runs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sorted runs of keys side by side (uniform, crowded at one end, or few values
    repeated), and targets each with its run: in it, between, below and above."""
    dtype = draw(st.sampled_from([np.uint16, np.uint32]))
    top = int(np.iinfo(dtype).max)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    parts, bounds = [], [0]
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(0, 400))
        shape = draw(st.sampled_from(["uniform", "skewed", "few"]))
        if shape == "uniform":
            run = rng.integers(0, top + 1, n, dtype=np.uint64)
        elif shape == "skewed":  # the interpolated first probe lands far from the answer
            run = (top - rng.integers(0, 1 + top // 1000, n, dtype=np.uint64)).astype(np.uint64)
        else:
            run = rng.choice(np.array([0, 1, top // 2, top - 1, top], dtype=np.uint64), n)
        parts.append(np.sort(run).astype(dtype))
        bounds.append(bounds[-1] + n)
    keys = np.concatenate(parts)
    m = draw(st.integers(1, 300))
    which = rng.integers(0, len(parts), m)
    lo = np.array(bounds, dtype=np.int64)[which]
    hi = np.array(bounds, dtype=np.int64)[which + 1]
    noise = rng.integers(0, top + 1, m, dtype=np.uint64).astype(dtype)
    edges = rng.choice(np.array([0, 1, top - 1, top], dtype=np.uint64), m).astype(dtype)
    picked = noise
    if len(keys):  # a key of the run (of a neighbour's when the run is empty)
        picked = keys[np.minimum(rng.integers(lo, np.maximum(hi, lo + 1)), len(keys) - 1)]
    target = np.where(rng.random(m) < 0.4, picked, noise)
    target = np.where(rng.random(m) < 0.2, edges, target).astype(dtype)
    return keys, lo, hi, target


@settings(max_examples=300, deadline=None)
@given(case=runs(), right=st.booleans())
def test_the_compiled_search_gives_the_descent_s_positions(
    case: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], right: bool
) -> None:
    keys, lo, hi, target = case
    want = _descend_numpy(keys, lo, hi, target, right)
    got = _descend(keys, lo, hi, target, right)
    np.testing.assert_array_equal(got, want)
    side = "right" if right else "left"
    for i in range(len(lo)):  # and both are bisect's
        run = keys[lo[i] : hi[i]]
        assert want[i] == lo[i] + np.searchsorted(run, target[i], side=side)


def test_misaligned_keys_take_the_descent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column one byte off its alignment (a damaged ``.npy`` header of odd length) is
    never given to the C loop, which reads keys through a cast; the answer is the same."""
    import sif.index.segments as segments

    values = np.arange(0, 4000, 7, dtype=np.uint32)
    raw = np.zeros(values.nbytes + 1, dtype=np.uint8)
    raw[1:] = values.view(np.uint8)
    keys = raw[1:].view(np.uint32)
    assert not keys.flags.aligned and keys.flags.c_contiguous
    lo, hi = np.array([0, 10], dtype=np.int64), np.array([len(keys), 50], dtype=np.int64)
    target = np.array([700, 71], dtype=np.uint32)

    class NoC:
        def bounds(self, *args: object) -> None:
            raise AssertionError("a misaligned column reached the C loop")

    monkeypatch.setattr(segments, "_lookupc", NoC())
    got = segments._descend(keys, lo, hi, target, False)
    np.testing.assert_array_equal(got, _descend_numpy(values, lo, hi, target, False))
    assert got.tolist() == [100, 11]


def test_the_compiled_search_refuses_runs_outside_its_keys() -> None:
    from sif.index import _lookupc

    keys = np.arange(10, dtype=np.uint16)
    out = np.empty(1, np.int64)
    t = np.zeros(1, np.uint16)
    for lo, hi in ((-1, 3), (4, 3), (0, 11)):
        with pytest.raises(ValueError, match="out of"):
            _lookupc.bounds(keys, t, 2, np.array([lo]), np.array([hi]), False, out)
    with pytest.raises(ValueError, match="mismatched"):
        _lookupc.bounds(keys, t, 2, np.array([0, 0]), np.array([1, 1]), False, out)


@pytest.mark.parametrize("name", KERNELS)
def test_bucket_offsets_out_of_order_are_named(
    segments: list[Segment], name: str, tmp_path: Path
) -> None:
    # Only the first and last offsets are checked at opening; a lookup checks the
    # buckets it reads (the compiled search would otherwise read past the rows).
    shutil.copytree(segments[1].directory, tmp_path / "seg")
    path = tmp_path / "seg" / "offsets.npy"
    offsets = np.load(path)
    offsets[0x1235] = offsets[-1] + 1  # past the rows, and above the next bucket's
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - offsets.nbytes)
        f.write(offsets.tobytes())
    seg = Segment(str(tmp_path / "seg"))
    with kernel(name), pytest.raises(IndexCorrupt, match=r"offsets\.npy.*out of order"):
        seg.lookup(np.array([0x1234_0005, 0x1235_0005], dtype=np.uint32))
    seg.close()


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.integers(0, 2**32 - 1),
            st.sampled_from([0, 1, 0xFFFF, 0x10000, 0xFFFF0000, 2**32 - 1]),  # edges of halves
            st.integers(0, 40),  # many equal values (their order is the test)
        ),
        max_size=400,
    )
)
def test_stable_order_is_a_stable_sort(values: list[int]) -> None:
    """Two 16-bit radix passes give the permutation of numpy's stable sort of 32-bit values:
    sorted, and equal values in their first order (a pass in the wrong order, or an
    unstable one, fails on the repeated small values)."""
    v = np.array(values, dtype=np.uint32)
    assert np.array_equal(stable_order(v), np.argsort(v, kind="stable"))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_files=st.integers(1, 60), crowd=st.booleans())
def test_a_segment_of_per_file_arrays_holds_its_rows_by_value_then_file(
    tmp_path_factory: pytest.TempPathFactory, seed: int, n_files: int, crowd: bool
) -> None:
    """write_segment from one array per file: every (value, file) row once, ordered by
    value, then by the file's place; in both layouts (with and without bucket offsets)."""
    rng = np.random.default_rng(seed)
    size = BUCKET_MIN_ROWS // n_files + 1 if crowd else 40
    pool = rng.integers(0, 2**32, 50, dtype=np.uint64).astype(np.uint32)
    lengths = [size] * n_files if crowd else rng.integers(0, size, n_files).tolist()
    parts = [rng.choice(pool, int(k)).astype(np.uint32) for k in lengths]
    ids = np.arange(1, n_files + 1, dtype=np.uint32)
    rows = [(int(ids[i]), 0, 1, 1, 0, 0, i, 0, b"\0" * 32) for i in range(n_files)]
    files = make_files(rows, [f"/d/f{i}".encode() for i in range(n_files)])
    where = tmp_path_factory.mktemp("order") / "seg"
    write_segment(str(where), files, parts)
    seg = Segment(str(where))
    assert (seg.offsets is not None) == crowd  # both layouts
    values, got_ids = seg.all_rows()
    want = sorted((int(v), int(ids[i])) for i, p in enumerate(parts) for v in p)
    assert list(zip(values.tolist(), got_ids.tolist(), strict=True)) == want
