"""The compiled column work of ``sif dupes``: grouping by size, and the gather of a share.

``_firstc.size_groups`` (stage 1) must give exactly the groups of the Python
code it replaces, in the same order. A share sent to a worker is a copy of
the walk's columns at its candidates' rows. The C gather must give exactly
what ``map(column.__getitem__, rows)`` gives, for every column type the walk
has, and refuse what indexing a list would refuse (a row out of range, a row
that is no int) without returning a half-made column.
"""

from __future__ import annotations

import pickle
from array import array

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sif.exact import pipeline
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


SIZES = st.sampled_from([0, 1, 1000, 6000, 2**31, 2**62, 2**63 - 1, -1, -(2**63)])


@given(
    sizes=st.lists(SIZES, max_size=300),
    inos=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 5), max_size=300),
)
def test_size_groups_in_c_equal_those_made_in_python(sizes: list[int], inos: list[int]) -> None:
    """Few sizes and few inodes, so that groups, inode ties and one-row sizes all occur;
    sizes across the signed range and inodes across the unsigned one (the orders are
    signed and unsigned)."""
    n = min(len(sizes), len(inos))
    cols = RecordColumns()
    cols.size.extend(sizes[:n])
    cols.ino.extend(inos[:n])
    assert pipeline._c_size_groups is not None, "sif.exact._firstc is not built"
    fast = pipeline._c_size_groups(cols.size, cols.ino)
    flat = sorted(range(n), key=lambda i: (cols.size[i], cols.ino[i], i))
    counts = {s: cols.size.tolist().count(s) for s in set(cols.size)}
    want_flat = [i for i in flat if counts[cols.size[i]] > 1]
    shared = sorted(s for s, c in counts.items() if c > 1)
    assert fast == (want_flat, shared, [counts[s] for s in shared])


def test_grouping_by_size_is_the_same_without_the_extension(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cols = columns(400, 11)
    cols.size = array("q", [i % 37 if i % 5 else 10**12 + i for i in range(400)])
    finder = pipeline.ReplicaFinder(jobs=1)
    fast = finder.group_by_size(cols)
    monkeypatch.setattr(pipeline, "_c_size_groups", None)
    slow = finder.group_by_size(cols)
    assert (fast.flat, fast.sizes, fast.lengths) == (slow.flat, slow.sizes, slow.lengths)
    assert len(fast.flat) == 320  # the 80 rows of sizes 10**12 + i are alone


def test_size_groups_refuses_columns_it_cannot_read() -> None:
    assert pipeline._c_size_groups is not None
    with pytest.raises(ValueError, match="differ in length"):
        pipeline._c_size_groups(array("q", [1, 1]), array("Q", [1]))
    with pytest.raises(TypeError, match="8-byte"):
        pipeline._c_size_groups(array("i", [1, 1]), array("Q", [1, 2]))
    with pytest.raises(TypeError, match="size must be"):  # unsigned sizes: the order differs
        pipeline._c_size_groups(array("Q", [1, 1]), array("Q", [1, 2]))
    with pytest.raises(TypeError, match="ino must be"):  # signed inodes: the order differs
        pipeline._c_size_groups(array("q", [1, 1]), array("q", [1, 2]))
    assert pipeline._c_size_groups(array("q"), array("Q")) == ([], [], [])


def test_a_gathered_table_is_read_by_the_compiled_loop() -> None:
    """A worker's share must still take the C read loop (``_compiled_fits``), as made and
    as the worker unpickles it."""
    from sif.exact.first import _compiled_fits

    cols = columns(20, 5)
    table = table_mod._Table(cols, [3, 1, 4, 1, 5])
    assert _compiled_fits(table)
    assert _compiled_fits(pickle.loads(pickle.dumps(table)))


def test_take_survives_a_finalizer_that_changes_the_rows() -> None:
    """Making the result may run the garbage collector; a finalizer that empties and
    refills the list of rows meanwhile must not make ``take`` read freed memory (it
    crashed when the rows were read after the allocation). In a child: it sets the
    collector's thresholds."""
    import subprocess
    import sys

    script = """
import gc
from sif.exact.table import _c_take as take
column = [f"v{i}" for i in range(1000)]
rows = list(range(1000))
class Bomb:
    def __del__(self):
        rows.clear()
        rows.extend(range(100000, 105000))
def arm():
    b = Bomb()
    b.self = b
gc.disable()
hold = [[] for _ in range(200)]  # no list left to reuse: PyList_New allocates
arm()
gc.set_threshold(1)
gc.enable()
out = take(column, rows)
gc.disable()
print(len(out), out[0], out[-1], len(rows))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1000", "v0", "v999", "5000"]  # the finalizer ran


HALF_MADE = """
import gc
from array import array
from sif.exact.table import _c_take as take
from sif._treec import decode_names
func, args, n = {func}, {args}, {n}  # made before the collector is set off
found = []
class Bomb:
    def __del__(self):
        for o in gc.get_objects():
            if type(o) is list and len(o) == n:
                found.append(o)
def arm():
    b = Bomb(); b.self = b
gc.disable()
arm()
gc.set_threshold(1)
try:
    raise KeyError  # raised while another is handled: the error object is made at once
except KeyError:
    gc.enable()
    try:
        func(*args)
    except (IndexError, ValueError):
        pass
    gc.disable()
for o in found:
    print(o[n - 2], flush=True)  # a slot not filled yet, were the result still alive
"""


@pytest.mark.parametrize(
    ("func", "args", "n"),
    [
        ("take", "([object() for _ in range(10)], [0, 1, 2, 99, 4, 5, 6])", 7),
        ("decode_names", '(b"abcdefgh", array("q", [0, 1, 2, 3, 9, 5]))', 5),
    ],
    ids=["take", "decode_names"],
)
def test_no_half_made_result_outlives_an_error(func: str, args: str, n: int) -> None:
    """``take`` and ``decode_names`` fill a list made whole; on an error they free it
    before the error is made, whose allocation may run the collector: a finalizer that
    walks ``gc.get_objects()`` then never meets their list with empty slots (it crashed
    on one, SIGSEGV, when the error came first). In a child: it sets the collector's
    thresholds (from the review's reproducer)."""
    import subprocess
    import sys

    script = HALF_MADE.format(func=func, args=args, n=n)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


def test_size_groups_reads_an_unaligned_view() -> None:
    """A view that starts one byte into its buffer: the items are copied, not cast."""
    assert pipeline._c_size_groups is not None
    size = memoryview(bytearray(b"\0" + array("q", [5, 7, 5, 7]).tobytes()))[1:].cast("q")
    ino = memoryview(bytearray(b"\0" + array("Q", [4, 3, 2, 1]).tobytes()))[1:].cast("Q")
    assert pipeline._c_size_groups(size, ino) == ([2, 0, 3, 1], [5, 7], [2, 2])
