"""The gather that makes a worker's share of the candidates (``_firstc.take``, ``_Table``).

A share sent to a worker is a copy of the walk's columns at its candidates'
rows. The C gather must give exactly what ``map(column.__getitem__, rows)``
gives, for every column type the walk has, and refuse what indexing a list
would refuse (a row out of range, a row that is no int) without returning a
half-made column.
"""

from __future__ import annotations

import pickle
from array import array

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sif.exact import table as table_mod
from sif.records import RecordColumns


def take(column: object, rows: object) -> object:
    """``_firstc.take``, which this test run requires to be built (as test_first.py does)."""
    assert table_mod._c_take is not None, "sif.exact._firstc is not built"
    return table_mod._c_take(column, rows)


COLUMNS = ("dir_of", "dev", "ino", "size", "mtime_ns", "ctime_ns", "symlink")


def columns(n: int, seed: int) -> RecordColumns:
    """Walk-like columns of ``n`` rows, values across each type's range."""
    cols = RecordColumns()
    cols.dirs = ["/a/", "/b/c/", "", "/d/é/"]
    for i in range(n):
        k = (i * 2654435761 + seed) & 0xFFFFFFFFFFFFFFFF
        cols.dir_of.append(k % len(cols.dirs))
        cols.dev.append(k)
        cols.ino.append(k ^ 0xFFFFFFFFFFFFFFFF)
        cols.size.append((k >> 1) - (1 << 62))
        cols.mtime_ns.append(-(k >> 2))
        cols.ctime_ns.append(k >> 3)
        cols.symlink.append(k & 1)
        cols.nlink.append(1)
    cols.names = [f"n{i}\udcff" if i % 7 == 0 else f"n{i}" for i in range(n)]
    return cols


@given(
    n=st.integers(1, 300),
    seed=st.integers(0, 2**32),
    picks=st.lists(st.integers(0, 10**6), max_size=400),
)
def test_a_table_gathered_in_c_equals_one_mapped_in_python(
    n: int, seed: int, picks: list[int]
) -> None:
    cols = columns(n, seed)
    rows = [p % n for p in picks]  # repeats and any order, as the shares' rows can be
    got = table_mod._Table(cols, rows)
    for name in COLUMNS:
        col = getattr(got, name)
        want = getattr(cols, name)
        assert isinstance(col, array) and col.typecode == want.typecode, name
        assert col.tolist() == [want[r] for r in rows], name
    assert got.names == [cols.names[r] for r in rows]
    assert [got.path(k) for k in range(len(rows))] == [cols.path(r) for r in rows]
    back = pickle.loads(pickle.dumps(got))  # as a worker gets it
    assert [back.path(k) for k in range(len(rows))] == [cols.path(r) for r in rows]
    assert back.size.tolist() == got.size.tolist()


def test_without_the_extension_the_table_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    cols = columns(50, 3)
    rows = [49, 0, 7, 7, 13]
    fast = table_mod._Table(cols, rows)
    monkeypatch.setattr(table_mod, "_c_take", None)
    slow = table_mod._Table(cols, rows)
    for name in (*COLUMNS, "names"):
        assert getattr(fast, name) == getattr(slow, name), name


@pytest.mark.parametrize("code", ["B", "H", "I", "Q", "q", "d"])
def test_take_gathers_items_of_every_width(code: str) -> None:
    col = array(code, [1, 2, 3, 250])
    out = array(code)
    out.frombytes(take(col, [3, 0, 0, 2]))
    assert out.tolist() == [250, 1, 1, 3]
    assert take(col, []) == b""


@pytest.mark.parametrize("column", [array("q", [5, 6, 7]), ["a", "b", "c"]])
@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([3], IndexError),
        ([0, -1], IndexError),  # never a count from the end: no walk row is negative
        ([0, "1"], TypeError),
        ([1.0], TypeError),
        ([2**70], OverflowError),
        (5, TypeError),  # not a sequence
    ],
)
def test_take_refuses_a_bad_row(column: object, rows: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        take(column, rows)


def test_take_refuses_a_column_it_cannot_gather() -> None:
    with pytest.raises(TypeError):
        take(object(), [0])  # no buffer, no list
    with pytest.raises(TypeError):
        take(np.zeros(4, dtype="S3"), [0])  # 3 bytes an item


def test_take_reads_rows_of_any_sequence() -> None:
    assert take(["a", "b", "c"], (2, 1)) == ["c", "b"]
    assert take(array("I", [9, 8, 7]), range(3)) == array("I", [9, 8, 7]).tobytes()
