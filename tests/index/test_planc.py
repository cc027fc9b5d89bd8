"""The plan's match in C (sif.index._planc) against numpy (runplan._match_numpy)."""

from __future__ import annotations

import os
from array import array
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.index import build_index, runplan
from sif.index.duck import DuckStore
from sif.index.store import KnownColumns
from sif.records import RecordColumns
from treeutil import write


@pytest.fixture(autouse=True)
def _built() -> None:
    if runplan._planc is None:
        pytest.fail("sif.index._planc is not built (pip install -e . builds it)")


def _case(
    draw: st.DrawFn,
) -> tuple[RecordColumns, KnownColumns, np.ndarray]:
    """An index of origins (one or more rows each), and a walk that meets some of them,
    with stat fields that differ here and there; keys drawn from a small range, so that
    first halves meet (rarely with different second halves: a collision)."""
    n_origins = draw(st.integers(0, 40))
    small = st.integers(0, 60)
    origins = [(draw(small), draw(st.integers(0, 3))) for _ in range(n_origins)]
    origins = list(dict(origins).items())  # one second half a first half, mostly
    if origins and draw(st.integers(0, 4)) == 0:  # a collision in the index
        k, c = draw(st.sampled_from(origins))
        origins.append((k, c + 1))
    stats = {o: [draw(st.integers(0, 2)) for _ in range(5)] for o in origins}
    rows = [o for o in origins for _ in range(draw(st.integers(1, 3)))]
    perm = draw(st.permutations(range(len(rows))))
    rows = [rows[i] for i in perm]
    n = len(rows)
    known = KnownColumns(
        np.array([k for k, _ in rows], dtype=np.uint64),
        np.array([c for _, c in rows], dtype=np.uint64),
        np.arange(100, 100 + n, dtype=np.uint32),
        *(np.array([stats[o][f] for o in rows], dtype=dt) for f, dt in enumerate(DTYPES[:4])),
        ctime_ns=(
            np.array([stats[o][4] for o in rows], dtype=np.int64) if draw(st.booleans()) else None
        ),
    )
    walked = (
        [draw(st.sampled_from(origins)) for _ in range(draw(st.integers(0, 10)))] if origins else []
    )
    walked += [(draw(small) + 1000, 0) for _ in range(draw(st.integers(0, 5)))]  # new files
    if origins and draw(st.integers(0, 4)) == 0:  # a walked path that meets another's half-key
        k, c = draw(st.sampled_from(origins))
        walked.append((k, c + 7))
    walked = list(dict.fromkeys(walked))  # a path is walked once
    cols = RecordColumns()
    cols.add_dir("/d")
    for j, o in enumerate(walked):
        cols.dir_of.append(0)
        cols.names.append(f"f{j}")
        st_ = stats.get(o, [9] * 5)
        flip = draw(st.integers(-1, 4))  # a field that changed, or none
        vals = [v + (f == flip) for f, v in enumerate(st_)]
        cols.dev.append(vals[0])
        cols.ino.append(vals[1])
        cols.size.append(vals[2])
        cols.mtime_ns.append(vals[3])
        cols.nlink.append(1)
        cols.ctime_ns.append(vals[4])
        cols.symlink.append(0)
    keys = np.array(walked, dtype=np.uint64).reshape(-1, 2)
    return cols, known, keys


DTYPES = (np.uint64, np.uint64, np.int64, np.int64, np.int64)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_c_match_equals_numpy(data: st.DataObject) -> None:
    cols, known, keys = _case(data.draw)
    if not len(cols) or not len(known.ids):
        return  # the plan matches nothing then
    got = runplan._match(cols, known, keys)
    want = runplan._match_numpy(cols, known, keys)
    if want is None:
        assert got is None
        return
    assert got is not None
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.tolist()


def test_c_match_at_a_larger_scale() -> None:
    rng = np.random.default_rng(4)
    n = 50_000
    kk = rng.integers(0, 2**64, n, dtype=np.uint64)
    known = KnownColumns(
        kk,
        rng.integers(0, 2**64, n, dtype=np.uint64),
        np.arange(n, dtype=np.uint32),
        *(rng.integers(0, 5, n).astype(dt) for dt in DTYPES[:4]),
        ctime_ns=rng.integers(0, 5, n).astype(np.int64),
    )
    pick = rng.choice(n, 40_000, replace=False)
    keys = np.stack([known.keys[pick], known.checks[pick]], axis=1)
    keys = np.concatenate([keys, rng.integers(0, 2**64, (1000, 2), dtype=np.uint64)])
    cols = RecordColumns()
    for name, col in (("dev", known.dev), ("ino", known.ino), ("size", known.size)):
        vals = np.concatenate([col[pick], np.zeros(1000, col.dtype)])
        getattr(cols, name).frombytes(vals.tobytes())
    for name, col in (("mtime_ns", known.mtime_ns), ("ctime_ns", known.ctime_ns)):
        vals = np.concatenate([col[pick], np.zeros(1000, np.int64)])  # type: ignore[index]
        vals[::7] += 1
        getattr(cols, name).frombytes(vals.tobytes())
    cols.names = ["x"] * len(keys)
    got = runplan._match(cols, known, keys)
    want = runplan._match_numpy(cols, known, keys)
    assert got is not None and want is not None
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)
    assert 0 < int(got[1].sum()) < 40_000


def test_c_match_refuses_columns_of_unequal_lengths() -> None:
    known = KnownColumns.empty()
    with pytest.raises(ValueError):
        runplan._planc.match(  # type: ignore[union-attr]
            known.keys,
            known.checks,
            np.zeros(2, np.uint64),
            known.dev,
            known.ino,
            known.size,
            known.mtime_ns,
            None,
            array("Q"),
            array("Q"),
            array("q"),
            array("q"),
            array("q"),
        )


@pytest.mark.parametrize("compiled", [True, False], ids=["C match", "numpy match"])
def test_an_incremental_run_plans_the_same_with_either_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """A whole run on disk: new, changed, unchanged and removed files counted alike, and
    the catalog holds the tree's paths, whether the plan's match is C's or numpy's."""
    if not compiled:
        monkeypatch.setattr(runplan, "_planc", None)
    rng = np.random.default_rng(7)
    t = tmp_path / "t"
    for i in range(30):
        write(t / f"d{i % 4}" / f"f{i}.txt", rng.integers(97, 123, 1500, dtype=np.uint8).tobytes())
    idx = tmp_path / "idx"
    build_index([t], idx, jobs=1)
    (t / "d0" / "f0.txt").unlink()
    (t / "d1" / "f1.txt").unlink()
    write(t / "d2" / "f2.txt", b"changed " * 400)
    write(t / "d3" / "new.txt", b"new " * 500)
    os.rename(t / "d1", t / "d9")  # every path under it is new, the old ones gone
    again = build_index([t], idx, jobs=1)
    moved = sum(1 for i in range(30) if i % 4 == 1) - 1  # d1's files but f1
    assert (again.new, again.changed, again.removed) == (1 + moved, 1, 2 + moved)
    assert again.unchanged == 30 - 2 - 1 - moved
    s = DuckStore(str(idx))
    try:
        rows = s.catalog().execute("SELECT path FROM files").fetchall()
    finally:
        s.close()
    assert {os.fsdecode(bytes(p)) for (p,) in rows} == {str(p) for p in t.rglob("*.txt")}
