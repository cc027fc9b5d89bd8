"""Scores of two large files taken on a window sample: marked, with an interval that holds.

A pair whose smaller file has at least ``2 * SAMPLE_FROM`` windows is scored on
the windows of a sample chosen by value (``sif.core.exactsets.in_sample``);
the tests lower ``SAMPLE_FROM`` so that files of a few tens of KB are large.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core import exactsets
from sif.core.evidence import INTERVAL_Z, share_bounds
from sif.similar import SimilarOptions, find_similar
from textgen import edited, text
from treeutil import write


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=3000), st.integers(0, 6))
def test_a_sampled_window_set_is_the_sample_of_the_whole_set_and_nested(
    data: bytes, shift: int
) -> None:
    whole = exactsets.window_set(data)
    part = exactsets.window_set(data, shift=shift)
    assert np.array_equal(part, whole[exactsets.in_sample(whole, shift)])
    assert np.array_equal(part, exactsets.window_set(data, jit=True, shift=shift))
    assert np.array_equal(part, exactsets.sampled(whole, shift, jit=True))
    assert exactsets.sample_size(whole, shift) == exactsets.sample_size(whole, shift, True)
    assert exactsets.sample_size(whole, shift) == len(part)
    finer = exactsets.window_set(data, shift=shift + 1)
    assert np.isin(finer, part).all()  # nested: the sparser sample is part of the denser


def test_the_sample_keeps_about_its_rate_of_windows() -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(-(2**63), 2**63 - 1, 200_000, dtype=np.int64)
    for shift in (1, 3, 6):
        kept = int(exactsets.in_sample(values, shift).sum())
        rate = len(values) / 2**shift
        assert abs(kept - rate) < 5 * rate**0.5


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(0, 10**6))
def test_share_bounds_hold_the_share_and_narrow_with_the_sample(p: float, n: int) -> None:
    lo, hi = share_bounds(np.array([p]), np.array([n]), INTERVAL_Z)
    assert 0.0 <= lo[0] <= 100.0 * p + 1e-9 and 100.0 * p - 1e-9 <= hi[0] <= 100.0
    if n == 0:
        assert lo[0] == hi[0] == pytest.approx(100.0 * p)
    if n >= exactsets.SAMPLE_FROM:  # the smallest sample a sampled score rests on
        assert hi[0] - lo[0] < 1.0
    if n >= 1:
        lo4, hi4 = share_bounds(np.array([p]), np.array([4 * n]), INTERVAL_Z)
        assert hi4[0] - lo4[0] <= hi[0] - lo[0] + 1e-9


def test_sample_shift_keeps_at_least_sample_from_windows() -> None:
    least = exactsets.SAMPLE_FROM
    w = np.array([1, least, 2 * least - 1, 2 * least, 10**9])
    r = exactsets.sample_shift(w)
    assert r.tolist()[:3] == [0, 0, 0] and r[3] == 1
    assert (w[r > 0] / 2.0 ** r[r > 0] >= exactsets.SAMPLE_FROM).all()
    assert (w[r > 0] / 2.0 ** r[r > 0] < 2 * exactsets.SAMPLE_FROM).all()


@pytest.fixture
def small_sample(monkeypatch: pytest.MonkeyPatch) -> int:
    """A sample of 1,024 windows at least: files of 2 KB and more are large."""
    monkeypatch.setattr(exactsets, "SAMPLE_FROM", 1024)
    return 1024


def test_large_pairs_are_scored_on_a_sample_marked_with_an_interval_that_holds(
    tmp_path: Path, small_sample: int
) -> None:
    base = text(11, 60_000)
    write(tmp_path / "t/a.txt", base)
    write(tmp_path / "t/b.txt", edited(base, 1, 900))  # about 95% alike
    write(tmp_path / "t/c.txt", edited(base, 2, 120))  # about 65% alike
    write(tmp_path / "t/copy.txt", base)
    write(tmp_path / "t/small.txt", base[5000:5900])  # under the sample: exact
    opts = SimilarOptions(threshold=20)
    result = find_similar([tmp_path / "t"], tmp_path / "idx", options=opts, jobs=1)
    sets = {
        p.name: exactsets.window_set((tmp_path / "t" / p.name).read_bytes())
        for p in (tmp_path / "t").iterdir()
    }
    by = {frozenset((Path(p.a.path).name, Path(p.b.path).name)): p for p in result.pairs}
    sampled = 0
    for names, p in by.items():
        x, y = sorted(names)
        truth = 100.0 * max(exactsets.containment(sets[x], sets[y]))
        if p.identical or "small.txt" in names:
            assert p.exact and p.score == pytest.approx(truth)  # copies, and small files
            continue
        sampled += 1
        assert not p.exact and p.score_low is not None and p.score_high is not None
        assert p.score_low <= p.score <= p.score_high and p.score_high - p.score_low < 5
        assert abs(p.score - truth) < 3  # 1,024 values or more: a few points at most
    assert sampled >= 3 and result.stats.sampled_pairs >= sampled  # type: ignore[attr-defined]
    assert by[frozenset(("a.txt", "copy.txt"))].score == 100.0  # an exact copy scores 100
    # A re-threshold opens no file: the sampled scores are stored, still marked.
    again = find_similar([tmp_path / "t"], tmp_path / "idx", options=opts, jobs=1)
    assert again.stats.exact_files_read == 0 and again.stats.reused  # type: ignore[attr-defined]
    assert [(p.score, p.exact, p.score_low) for p in again.pairs] == [
        (p.score, p.exact, p.score_low) for p in result.pairs
    ]


def test_the_report_marks_a_sampled_score_in_text_and_json(
    tmp_path: Path, small_sample: int
) -> None:
    from io import BytesIO

    from sif.report import write_similar

    base = text(12, 40_000)
    write(tmp_path / "t/a.txt", base)
    write(tmp_path / "t/b.txt", edited(base, 3, 400))
    result = find_similar([tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(), jobs=1)
    assert len(result.pairs) == 1
    out = BytesIO()
    write_similar(result, out, "json", "score")
    (rec,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert rec["score_exact"] is False and rec["exact_a_in_b"] is None
    assert rec["score_low"] <= rec["score"] <= rec["score_high"]
    out = BytesIO()
    write_similar(result, out, "text", "score")
    member = [x for x in out.getvalue().decode().splitlines() if x.startswith("~")]
    assert len(member) == 1 and "(estimate, 90%:" in member[0]


def test_stored_pairs_of_an_older_schema_load_as_exact(tmp_path: Path) -> None:
    import duckdb

    from sif.index import pairs
    from sif.index.schema import MIGRATIONS

    con = duckdb.connect(str(tmp_path / "c.duckdb"))
    for v, _, step in MIGRATIONS:
        if v == 7:
            break
        step(con, b"")  # no secret before schema 9
    con.execute("INSERT INTO similar_runs VALUES ('k', 0, 1, current_timestamp, NULL)")
    con.execute("INSERT INTO similar_pairs VALUES (1, 2, 3, 3, 3, 0.5, 0.25)")
    next(step for v, _, step in MIGRATIONS if v == 7)(con, b"")
    got = pairs.load_pairs(con, "k")
    assert got is not None
    cols, _ = got
    assert cols["exact_ab"].tolist() == [0.5] and cols["exact_n"].tolist() == [0]
    cols["exact_n"] = np.array([70_000], dtype=np.uint32)
    pairs.store_pairs(con, "k", cols, 0, None)
    again = pairs.load_pairs(con, "k")
    assert again is not None and again[0]["exact_n"].tolist() == [70_000]


def test_large_files_that_repeat_themselves_are_never_scored_on_a_sample_too_small(
    tmp_path: Path, small_sample: int
) -> None:
    # 60 KB made of a 60-byte line and of a 300-byte block: few distinct windows for
    # their size. A sample chosen by their size alone would keep almost none of them.
    line = b"#define REG_MASK 0x0000ffff /* a register of the device */\n"
    block = text(13, 300)
    write(tmp_path / "t/a.h", line * 1000 + block * 10)
    write(tmp_path / "t/b.h", line * 990 + block * 11 + b"/* edited */\n")
    result = find_similar([tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(), jobs=1)
    (p,) = result.pairs
    a, b = (exactsets.window_set((tmp_path / "t" / n).read_bytes()) for n in ("a.h", "b.h"))
    truth = 100.0 * max(exactsets.containment(a, b))
    if p.exact:  # a denser sample from the distinct share of its fingerprints: every window
        assert p.score == pytest.approx(truth)
    else:  # or left with its marked estimate, never a score of a handful of values
        assert p.score_low is not None and p.score_high is not None
        assert result.stats.sampled_pairs == 0  # type: ignore[attr-defined]
