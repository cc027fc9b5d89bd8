"""Two large files at one path (sif compare's pass 1) are read a step at a time and
scored on a window sample (sif.compare.large): estimates close to the exact scores.
The tests lower the sizes that make a file large (SAMPLE_FROM, EXACT_BYTES, the step)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sif
from sif.compare import large
from sif.core import exactsets
from textgen import edited, text
from treeutil import write


@pytest.fixture
def small_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of a few KB are large: a sample of 1,024 values at least, steps of 4 KB."""
    monkeypatch.setattr(exactsets, "SAMPLE_FROM", 1024)
    monkeypatch.setattr(exactsets, "STEP_BYTES", 4096)
    monkeypatch.setattr(large, "EXACT_BYTES", 0)


def _exact(x: bytes, y: bytes) -> tuple[float, float]:
    return exactsets.containment(
        exactsets.window_set(x, jit=False), exactsets.window_set(y, jit=False)
    )


@settings(deadline=None, max_examples=80)
@given(st.binary(max_size=5000), st.lists(st.integers(1, 700), min_size=1, max_size=30))
def test_steps_of_any_length_give_the_set_of_the_whole(data: bytes, cuts: list[int]) -> None:
    pieces, at = [], 0
    for n in cuts * (1 + len(data) // max(sum(cuts), 1)):
        pieces.append(data[at : at + n])
        at += n
    pieces.append(data[at:])
    got = exactsets.distinct_of(list(exactsets.step_values(pieces)))
    assert np.array_equal(got, exactsets.window_set(data, jit=False))


def test_two_large_versions_are_estimates_near_the_exact_scores(
    tmp_path: Path, small_large: None
) -> None:
    base = text(31, 60_000)
    write(tmp_path / "a/doc.txt", base)
    write(tmp_path / "b/doc.txt", edited(base, 3, 250))  # about 80% alike
    result = sif.compare_trees(tmp_path / "a", tmp_path / "b", tmp_path / "idx")
    [f] = [f for f in result.files if f.a == "doc.txt"]
    assert (f.status, f.pass_no, f.exact) == ("changed", 1, False)
    ab, ba = _exact(base, edited(base, 3, 250))
    assert f.a_in_b is not None and f.b_in_a is not None
    assert abs(f.a_in_b - ab) < 0.03 and abs(f.b_in_a - ba) < 0.03


def test_a_small_version_in_a_large_one_is_exact_on_its_side(
    tmp_path: Path, small_large: None
) -> None:
    """Under a sample of its own (1 KB here), the small file's set is whole and the large
    file streams past it: C(small, large) exact, C(large, small) on the large's sample."""
    base = text(32, 60_000)
    write(tmp_path / "a/log.txt", base[30_000:31_000])  # held whole by B's
    write(tmp_path / "b/log.txt", base)
    result = sif.compare_trees(tmp_path / "a", tmp_path / "b", tmp_path / "idx")
    [f] = [f for f in result.files if f.a == "log.txt"]
    assert (f.status, f.exact, f.direction) == ("changed", False, "a-in-b")
    ab, ba = _exact(base[30_000:31_000], base)
    assert f.a_in_b == ab == 1.0
    assert f.b_in_a is not None and abs(f.b_in_a - ba) < 0.01


def test_large_files_read_no_more_than_a_step_at_a_time(
    tmp_path: Path, small_large: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = large._pieces

    def counted(f):  # type: ignore[no-untyped-def]
        for piece in real(f):
            reads.append(len(piece))
            yield piece

    monkeypatch.setattr(large, "_pieces", counted)
    base = text(33, 40_000)
    write(tmp_path / "a/x.txt", base)
    write(tmp_path / "b/x.txt", edited(base, 4, 400))
    sif.compare_trees(tmp_path / "a", tmp_path / "b", tmp_path / "idx")
    assert reads and max(reads) <= 4096 and sum(reads) == 80_000


def test_a_file_gone_since_the_walk_is_a_warning(tmp_path: Path, small_large: None) -> None:
    base = text(34, 30_000)
    write(tmp_path / "a/x.txt", base)
    write(tmp_path / "b/x.txt", edited(base, 5, 300))
    warnings: list[sif.ScanWarning] = []
    real = large.large_containments

    def vanish(a, b):  # type: ignore[no-untyped-def]
        Path(b[0]).unlink()
        return real(a, b)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(large, "large_containments", vanish)
        result = sif.compare_trees(
            tmp_path / "a", tmp_path / "b", tmp_path / "idx", on_warning=warnings.append
        )
    [f] = [f for f in result.files if f.a == "x.txt"]
    assert (f.status, f.exact, f.a_in_b) == ("changed", False, None)
    assert any("x.txt" in w.path for w in warnings)


def test_files_of_few_distinct_windows_are_scored_exactly_without_a_whole_read(
    tmp_path: Path, small_large: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sparse file, a log of one line repeated: their samples hold too few values, so
    their whole sets are made a step at a time (few values), and the scores are exact;
    they were read whole (1.7 GB for two such files of 150 MB)."""
    from sif.compare import passes

    def never(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("read whole")

    monkeypatch.setattr(passes, "_read", never)
    line = text(35, 700)
    a = line * 100
    b = line * 99 + text(36, 700)
    write(tmp_path / "a/log.txt", a)
    write(tmp_path / "b/log.txt", b)
    write(tmp_path / "a/sparse.img", bytes(40_000))
    write(tmp_path / "b/sparse.img", bytes(20_000) + b"x" + bytes(19_999))
    result = sif.compare_trees(tmp_path / "a", tmp_path / "b", tmp_path / "idx")
    got = {f.a: f for f in result.files}
    for name, x, y in (
        ("log.txt", a, b),
        ("sparse.img", bytes(40_000), bytes(20_000) + b"x" + bytes(19_999)),
    ):
        f = got[name]
        assert (f.status, f.exact) == ("changed", True), name
        assert (f.a_in_b, f.b_in_a) == pytest.approx(_exact(x, y)), name


def test_a_file_under_one_window_leaves_the_other_unread(
    tmp_path: Path, small_large: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real = large._pieces

    def counted(f):  # type: ignore[no-untyped-def]
        opened.append(f[0])
        yield from real(f)

    monkeypatch.setattr(large, "_pieces", counted)
    write(tmp_path / "a/x.bin", b"tiny")
    write(tmp_path / "b/x.bin", text(37, 40_000))
    result = sif.compare_trees(tmp_path / "a", tmp_path / "b", tmp_path / "idx")
    [f] = [f for f in result.files if f.a == "x.bin"]
    assert (f.status, f.a_in_b, f.b_in_a, f.exact) == ("changed", 0.0, 0.0, True)
    assert opened == []


@pytest.mark.parametrize("streamed", [True, False])
def test_a_file_cut_short_after_the_walk_is_a_warning_not_a_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """Its bytes are not those listed: scored, they gave 'exact' containments of other
    content, with the listed size, and no warning."""
    from sif.compare import passes

    if streamed:
        monkeypatch.setattr(exactsets, "SAMPLE_FROM", 1024)
        monkeypatch.setattr(large, "EXACT_BYTES", 0)
    base = text(38, 30_000)
    write(tmp_path / "a/x.txt", base)
    write(tmp_path / "b/x.txt", edited(base, 6, 300))
    real_large, real_read = large.large_containments, passes._read

    def cut_then(real):  # type: ignore[no-untyped-def]
        def wrapped(*args):  # type: ignore[no-untyped-def]
            os.truncate(tmp_path / "b/x.txt", 1000)
            return real(*args)

        return wrapped

    monkeypatch.setattr(large, "large_containments", cut_then(real_large))
    monkeypatch.setattr(passes, "_read", cut_then(real_read))
    warnings: list[sif.ScanWarning] = []
    result = sif.compare_trees(
        tmp_path / "a", tmp_path / "b", tmp_path / "idx", on_warning=warnings.append
    )
    [f] = [f for f in result.files if f.a == "x.txt"]
    assert (f.status, f.a_in_b, f.exact) == ("changed", None, False)
    assert [w.cause for w in warnings if w.path.endswith("x.txt")] == [
        "changed during the run (1,000 bytes read, 30,000 listed)"
    ]


def test_a_repetitive_file_against_a_varied_one_makes_one_whole_set(
    tmp_path: Path, small_large: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sparse image against the same image filled: only the sparse one's whole set is
    made (few values); the filled one streams past it. Both whole sets took 19 bytes a
    byte of the filled file at their merge's peak."""
    made: list[int] = []
    real = large._whole_set

    def counted(f):  # type: ignore[no-untyped-def]
        out = real(f)
        made.append(len(out))
        return out

    monkeypatch.setattr(large, "_whole_set", counted)
    filled = text(39, 40_000)
    sparse = bytes(20_000) + filled[20_000:21_000] + bytes(19_000)
    write(tmp_path / "a/disk.img", sparse)
    write(tmp_path / "b/disk.img", filled)
    result = sif.compare_trees(tmp_path / "a", tmp_path / "b", tmp_path / "idx")
    [f] = [f for f in result.files if f.a == "disk.img"]
    ab, ba = _exact(sparse, filled)
    assert (f.status, f.exact) == ("changed", False)
    assert f.a_in_b == pytest.approx(ab) and f.b_in_a is not None and abs(f.b_in_a - ba) < 0.01
    assert len(made) == 1 and made[0] < 1100  # the sparse file's few windows only


@settings(max_examples=200)
@given(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5))
def test_changed_since_the_walk(listed: int, opened: int, read: int) -> None:
    """Changed: its size once opened is not the walk's, or it read other than that size;
    a size of 0 that reads otherwise is a file with no size of its content (/proc)."""
    got = large.changed_since(listed, opened, read)
    if listed == opened == 0:
        assert not got
    else:
        assert got == (opened != listed or read != opened)


def test_a_proc_file_is_read_not_called_changed(tmp_path: Path) -> None:
    """/proc's files list size 0 and read their content: pass 1 reads them (they were
    'changed during the run (N bytes read, 0 listed)'); a real file grown since the
    walk is still changed."""
    from sif.compare.passes import _read

    warnings: list[sif.ScanWarning] = []
    proc = "/proc/self/status"  # sif runs on Linux (PR_SET_PDEATHSIG, /proc/self/fd)
    st = os.stat(proc)
    assert st.st_size == 0
    data = _read((proc, (st.st_dev, st.st_ino), 0), proc, warnings.append)
    assert data is not None and b"Name:" in data and warnings == []
    grown = tmp_path / "grown.txt"
    write(grown, b"")
    st = os.stat(grown)
    write(grown, b"now longer")
    assert _read((str(grown), (st.st_dev, st.st_ino), 0), str(grown), warnings.append) is None
    assert [w.cause for w in warnings] == ["changed during the run (10 bytes read, 0 listed)"]
