"""A segment's lookups (``sif query``'s hot path) against a plain reference.

Both layouts (whole ``uint32`` values; 16-bit remainders under bucket
offsets), values held by several rows, empty and crowded buckets, ids with
gaps: :meth:`Segment.lookup` and :meth:`Segment.position` must give what a
brute-force search of :meth:`Segment.all_rows` gives.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.index.segments import BUCKET_MIN_ROWS, Segment, make_files, write_segment

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


@settings(max_examples=40, deadline=None)
@given(
    which=st.integers(0, 1),
    seed=st.integers(0, 2**32 - 1),
    present=st.integers(0, 300),
    absent=st.integers(0, 300),
)
def test_lookup_finds_every_row_of_each_value(
    segments: list[Segment], which: int, seed: int, present: int, absent: int
) -> None:
    seg = segments[which]
    rng = np.random.default_rng(seed)
    values, _ = seg.all_rows()
    picked = values[rng.integers(0, len(values), present)] if present else values[:0]
    edges = np.array([0, 2**32 - 1, int(values[0]), int(values[-1])], dtype=np.uint64)
    noise = rng.integers(0, 2**32, absent, dtype=np.uint64)
    query = np.unique(np.concatenate([picked, noise, edges]).astype(np.uint32))
    qpos, ids = seg.lookup(query)
    want_qpos, want_ids = _reference(seg, query)
    assert qpos.dtype == np.int64 and ids.dtype == np.uint32
    np.testing.assert_array_equal(qpos, want_qpos)
    np.testing.assert_array_equal(ids, want_ids)
    assert len(qpos) >= present  # each value picked is held by one row at least


def test_lookup_of_nothing_and_of_a_crowded_bucket(segments: list[Segment]) -> None:
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


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(0, 7 * N_FILES + 20), max_size=200))
def test_position_of_ids_present_or_not(segments: list[Segment], ids: list[int]) -> None:
    seg = segments[1]
    query = np.array(ids, dtype=np.uint32)
    pos, here = seg.position(query)
    column = np.ascontiguousarray(seg.files["id"])
    want = np.minimum(np.searchsorted(column, query), len(column) - 1)
    np.testing.assert_array_equal(here, column[want] == query)
    np.testing.assert_array_equal(pos[here], want[here])
    assert pos.dtype == np.int64
    assert here.sum() == sum(1 for i in ids if i % 7 == 3 and i < 7 * N_FILES)
