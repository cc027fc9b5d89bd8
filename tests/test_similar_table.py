"""The columnar pairs and groups equal the values made one object at a time."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.similar import SimilarFile, SimilarPair, similar_groups
from sif.similar.table import GroupTable, PairTable

NAMES = [b"a", b"b/x.c", b"b/y.c", b"\xff\xfe.txt", b"caf\xc3\xa9", b"z", b"B", b"b"]


def _files(n: int) -> dict[str, Any]:
    paths = np.empty(n, dtype=object)
    for i in range(n):
        paths[i] = NAMES[i % len(NAMES)] + str(i).encode()
    return {
        "id": np.arange(1, n + 1, dtype=np.uint32) * 3,
        "path": paths,
        "size": np.arange(n, dtype=np.int64) * 7 + 100,
        "kind": np.array(["text"] * n, dtype=object),
        "n_fp": np.arange(n, dtype=np.int64) + 1,
        "n_distinct": np.arange(n, dtype=np.int64) + 1,
        "digest": np.array([bytes([i % 3]) * 4 for i in range(n)], dtype=object),
    }


def _file(files: dict[str, Any], i: int) -> SimilarFile:
    return SimilarFile(
        int(files["id"][i]),
        os.fsdecode(files["path"][i]),
        int(files["size"][i]),
        "text",
        int(files["n_fp"][i]),
        int(files["n_distinct"][i]),
        bytes(files["digest"][i]),
    )


def _one_at_a_time(files: dict[str, Any], cols: dict[str, Any]) -> list[SimilarPair]:
    """The pairs as ``decide`` made them before the table: one object a row, sorted."""
    out = []
    for j in range(len(cols["ia"])):
        fa, fb = _file(files, cols["ia"][j]), _file(files, cols["ib"][j])
        known = not np.isnan(cols["exact_ab"][j])
        ex = (float(cols["exact_ab"][j]), float(cols["exact_ba"][j])) if known else (None, None)
        low, high = (None, None) if known else (float(cols["low"][j]), float(cols["high"][j]))
        p = SimilarPair(
            fa,
            fb,
            int(cols["shared"][j]),
            float(cols["a_in_b"][j]),
            float(cols["b_in_a"][j]),
            float(cols["jaccard"][j]),
            float(cols["pa"][j]),
            float(cols["pb"][j]),
            ex[0],
            ex[1],
            low,
            high,
        )
        if fb.path < fa.path:
            p = SimilarPair(
                fb,
                fa,
                p.shared,
                p.b_in_a,
                p.a_in_b,
                p.jaccard,
                p.percent_b_in_a,
                p.percent_a_in_b,
                p.exact_b_in_a,
                p.exact_a_in_b,
                p.score_low,
                p.score_high,
            )
        out.append(p)
    out.sort(key=lambda p: (-p.score, p.a.path, p.b.path))
    return out


@st.composite
def _pairs(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    n = draw(st.integers(2, 12))
    every = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(every), unique=True, max_size=30))
    flip = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    # Few distinct scores: ties are ordered by path, and groups repeat.
    share = st.sampled_from([0.25, 0.5, 1.0])
    m = len(chosen)

    def floats() -> Any:
        return np.array(draw(st.lists(share, min_size=m, max_size=m)), dtype=np.float64)

    known = np.array(draw(st.lists(st.booleans(), min_size=m, max_size=m)), dtype=bool)
    ex_ab, ex_ba = floats(), floats()
    cols = {
        "ia": np.array(
            [b if f else a for (a, b), f in zip(chosen, flip, strict=True)], dtype=np.int64
        ),
        "ib": np.array(
            [a if f else b for (a, b), f in zip(chosen, flip, strict=True)], dtype=np.int64
        ),
        "shared": np.arange(m, dtype=np.int64) % 4,
        "a_in_b": floats(),
        "b_in_a": floats(),
        "jaccard": floats(),
        "pa": 100 * floats(),
        "pb": 100 * floats(),
        "exact_ab": np.where(known, ex_ab, np.nan),
        "exact_ba": np.where(known, ex_ba, np.nan),
        "low": np.where(known, np.nan, 10.0),
        "high": np.where(known, np.nan, 90.0),
    }
    return _files(n), cols


@settings(max_examples=300, deadline=None)
@given(_pairs())
def test_table_and_groups_equal_the_object_at_a_time_values(case: Any) -> None:
    files, cols = case
    expected = _one_at_a_time(files, cols)
    taken = dict(cols)
    table = PairTable(files, cols)
    assert len(table) == len(expected)
    assert list(table) == expected
    assert table == tuple(expected)
    # Taking the columns (sif similar's way, each held once) makes the same table.
    assert list(PairTable(files, taken, take=True)) == expected and not taken
    groups = GroupTable(table)
    assert list(groups) == similar_groups(expected)
    if len(groups):
        assert groups[-1] == similar_groups(expected)[-1]


@settings(max_examples=200, deadline=None)
@given(_pairs(), st.integers(1, 7))
def test_the_tables_records_are_the_reports_record_of_each_pair(case: Any, batch: int) -> None:
    from sif.report import _similar_record

    files, cols = case
    table = PairTable(files, cols)
    assert list(table.records(batch)) == [_similar_record(p) for p in table]


def test_an_empty_table_is_an_empty_sequence() -> None:
    files = _files(3)
    empty = {k: np.empty(0) for k in ("ia", "ib", "shared", "a_in_b", "b_in_a", "jaccard")}
    empty |= {k: np.empty(0) for k in ("pa", "pb", "exact_ab", "exact_ba", "low", "high")}
    table = PairTable(files, empty)
    assert table == () and list(GroupTable(table)) == []
