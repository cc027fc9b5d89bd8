"""The numba kernels give exactly what the numpy forms give (winnow, anchors)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus import source
from sif.core.anchors import AnchorSet, find_anchors
from sif.core.kernels import winnow_many
from sif.core.rolling import BASE
from sif.core.sampling import sliding_argmin, winnow_select
from sif.fingerprint import fingerprint, fingerprint_batch, make_params


def arr(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def assert_same_winnow(data: np.ndarray, w: int, ww: int, max_period: int) -> None:
    s_np, v_np = winnow_select(data, w, ww, max_period, jit=False)
    s_jit, v_jit = winnow_select(data, w, ww, max_period, jit=True)
    assert np.array_equal(s_np, s_jit)
    assert np.array_equal(v_np, v_jit)
    assert s_np.dtype == s_jit.dtype and v_np.dtype == v_jit.dtype


# Low entropy: repeated 50-byte windows (ties), runs of one byte, short periods, noise.
def chunk() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(min_size=1, max_size=40),
        st.builds(lambda c, n: bytes([c]) * n, st.integers(0, 255), st.integers(1, 200)),
        st.builds(lambda p, n: p * n, st.binary(min_size=1, max_size=9), st.integers(1, 40)),
        st.lists(st.sampled_from(b"ab \n"), min_size=1, max_size=60).map(bytes),
    )


@st.composite
def repetitive(draw: st.DrawFn) -> bytes:
    pool = draw(st.lists(chunk(), min_size=1, max_size=6))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=60))
    return b"".join(pool[i] for i in picks)


params = (
    st.sampled_from([4, 8, 50]),
    st.sampled_from([1, 2, 3, 16, 31, 127, 511]),
    st.integers(0, 8),
)


@settings(deadline=None, max_examples=200)
@given(repetitive(), *params)
def test_winnow_numpy_equals_numba_on_repetitive_bytes(
    data: bytes, w: int, ww: int, max_period: int
) -> None:
    assert_same_winnow(arr(data), w, ww, min(max_period, w // 2))


@settings(deadline=None, max_examples=80)
@given(st.binary(max_size=4000), *params)
def test_winnow_numpy_equals_numba_on_random_bytes(
    data: bytes, w: int, ww: int, max_period: int
) -> None:
    assert_same_winnow(arr(data), w, ww, min(max_period, w // 2))


@settings(deadline=None, max_examples=80)
@given(st.binary(max_size=120), *params)
def test_winnow_numpy_equals_numba_on_short_inputs(
    data: bytes, w: int, ww: int, max_period: int
) -> None:
    # Fewer windows than W: one winnowing window of all of them; none at all below w bytes.
    assert_same_winnow(arr(data), w, ww, min(max_period, w // 2))


def test_winnow_numpy_equals_numba_on_runs_and_ties() -> None:
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(1, 6000))
        alphabet = int(rng.choice([1, 2, 3, 256]))
        data = rng.integers(0, alphabet, n, dtype=np.uint8)
        runs = rng.integers(0, n, 5)
        for r in runs:  # long runs of one byte inside
            data[r : r + int(rng.integers(50, 700))] = rng.integers(0, 256)
        assert_same_winnow(data, 50, int(rng.choice([1, 7, 511])), int(rng.integers(0, 9)))


def test_winnow_numpy_equals_numba_on_source_text() -> None:
    # Text like code, about 8 MB: 400 generated modules of 2 to 40 KB.
    rng = np.random.default_rng(11)
    for i in range(400):
        assert_same_winnow(arr(source(i, int(rng.integers(2_000, 40_000)))), 50, 511, 8)


def test_winnow_numba_output_grows_when_more_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    data = np.random.default_rng(3).integers(0, 256, 20_000, dtype=np.uint8)
    expected = winnow_select(data, 50, 7, 8, jit=False)
    monkeypatch.setattr("sif.core.winnowc._room", lambda m, ww: 1)
    got = winnow_select(data, 50, 7, 8, jit=True)
    assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1])


def naive_sliding_argmin(values: np.ndarray, ww: int) -> list[int]:
    return [
        max(j for j in range(s, s + ww) if values[j] == values[s : s + ww].min())
        for s in range(len(values) - ww + 1)
    ]


@settings(deadline=None, max_examples=150)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=60), st.integers(1, 70))
def test_sliding_argmin_is_the_rightmost_minimum(values: list[int], ww: int) -> None:
    v = np.array(values, dtype=np.uint64)
    ww = min(ww, len(v))
    assert sliding_argmin(v, ww).tolist() == naive_sliding_argmin(v, ww)


@settings(deadline=None, max_examples=100)
@given(
    st.lists(st.sampled_from(b"abc d"), max_size=3000).map(bytes),
    st.lists(st.lists(st.sampled_from(b"abc d"), min_size=3, max_size=3), min_size=1, max_size=6),
)
def test_find_anchors_numpy_equals_numba(data: bytes, grams: list[list[int]]) -> None:
    anchors = AnchorSet(tuple(sorted({bytes(g) for g in grams})), 3, 0.01)
    got = find_anchors(arr(data), anchors, jit=False)
    assert np.array_equal(got, find_anchors(arr(data), anchors, jit=True))
    expected = [i for i in range(len(data) - 2) if data[i : i + 3] in anchors.anchors]
    assert got.tolist() == expected


@settings(deadline=None, max_examples=60)
@given(st.lists(repetitive(), max_size=12), st.sampled_from([8, 50]), st.integers(0, 20))
def test_fingerprint_batch_is_fingerprint_of_each_input(
    inputs: list[bytes], w: int, min_fingerprints: int
) -> None:
    # One kernel call over many inputs gives each input's own fingerprints.
    p = make_params(
        "winnow", window=w, max_period=min(8, w // 2), min_fingerprints=min_fingerprints
    )
    data = arr(b"".join(inputs))
    lens = np.array([len(x) for x in inputs], dtype=np.int64)
    ends = np.cumsum(lens)
    for jit in (False, True):
        with patch_jit(jit):
            values, counts = fingerprint_batch(p, data, ends - lens, ends)
        assert counts.tolist() == [len(fingerprint(x, p)) for x in inputs]
        assert np.array_equal(values, np.concatenate([fingerprint(x, p) for x in [b"", *inputs]]))


def test_winnow_many_runs_again_an_input_that_outgrows_its_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(4)
    inputs = [rng.integers(0, 256, n, dtype=np.uint8) for n in (20_000, 60, 5_000)]
    expected = [winnow_select(x, 50, 7, 8, jit=False) for x in inputs]
    monkeypatch.setattr("sif.core.winnowc._room", lambda m, ww: 2)
    data = np.concatenate(inputs)
    lens = np.array([len(x) for x in inputs], dtype=np.int64)
    ends = np.cumsum(lens)
    starts, values, counts = winnow_many(data, ends - lens, ends, np.full(3, 7), 50, 8, BASE)
    assert counts.tolist() == [len(e[0]) for e in expected]
    assert np.array_equal(starts, np.concatenate([e[0] for e in expected]))
    assert np.array_equal(values, np.concatenate([e[1] for e in expected]))


@contextlib.contextmanager
def patch_jit(jit: bool) -> Iterator[None]:
    """Force numba (or numpy) for the inputs of a batch, as a bulk run (or a query) picks."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sif.fingerprint._use_jit", lambda total: jit)
        yield


def _clustered(rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
    """``n`` values in groups of 1 to 80 that share their top 21 bits (their bucket in
    the bucket sort, which takes at most 20): buckets on both sides of its insertion's
    limit (BUCKET_INSERTION_MAX)."""
    sizes = rng.integers(1, 80, n + 1)
    tops = rng.integers(-(2**20), 2**20, n + 1, dtype=np.int64) << 43
    top = np.repeat(tops, sizes)[:n]
    return top | rng.integers(0, 2**43, n, dtype=np.int64)


@settings(deadline=None, max_examples=80)
@given(
    st.integers(0, 12_000),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["full", "small", "negative", "one byte", "constant", "clustered"]),
)
def test_sort_kernels_are_numpys_sort(n: int, seed: int, spread: str) -> None:
    """The window values' radix and bucket sorts give np.sort's order, whatever the values:
    both signs, duplicates, bytes that never change (radix passes skipped), buckets of
    one value, of a few (insertion) and of many (radix inside the bucket sort), around
    BUCKET_MIN and BUCKET_MAX."""
    from sif.core.exactsets import _compiled, sort_values

    rng = np.random.default_rng(seed)
    values = {
        "full": lambda: rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True),
        "small": lambda: rng.integers(0, 300, n, dtype=np.int64),  # duplicates, one bucket
        "negative": lambda: rng.integers(-(2**40), 0, n, dtype=np.int64),
        "one byte": lambda: rng.integers(0, 256, n, dtype=np.int64) << 40,  # one pass only
        "constant": lambda: np.full(n, -7, dtype=np.int64),
        "clustered": lambda: _clustered(rng, n),
    }[spread]()
    want = np.sort(values)
    for kernel in ("radix_sort", "bucket_sort"):
        got = values.copy()
        _compiled()[kernel](got, np.empty(n + 5, dtype=np.int64))  # scratch may be longer
        assert np.array_equal(got, want), kernel
    got = values.copy()
    sort_values(got)
    assert np.array_equal(got, want)


def test_radix_sort_at_its_largest_and_beyond() -> None:
    """sort_values at RADIX_MAX values (the radix kernel's last size) and one more (numpy's
    sort), with both signs and duplicates: np.sort's order both times."""
    from sif.core.exactsets import RADIX_MAX, sort_values

    rng = np.random.default_rng(5)
    for n in (RADIX_MAX, RADIX_MAX + 1):
        values = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
        values[::1000] = values[0]
        want = np.sort(values)
        sort_values(values)
        assert np.array_equal(values, want)


def test_window_sets_sorted_by_the_kernels_are_those_sorted_by_numpy() -> None:
    """window_set_jit (the bucket sort from BUCKET_MIN values, the radix past BUCKET_MAX)
    against the numpy form, on real text about both thresholds, and on text that repeats
    (a run of one byte, a block again and again: buckets past the insertion's limit)."""
    from sif.core import exactsets

    text = arr(source(7, 200_000))
    for size in (exactsets.BUCKET_MIN + 48, 1500, 3000, exactsets.BUCKET_MAX + 49, 60_000, 200_000):
        data = text[:size]
        assert np.array_equal(exactsets.window_set_jit(data), exactsets.window_set(data, jit=False))
    # A run of one byte (one value), a 3 KB block four times (each value four times), and
    # 700 distinct bytes repeated: buckets of many equal values, sorted by the radix.
    block = text[:3000]
    for data in (
        np.full(5000, 0x20, dtype=np.uint8),
        np.concatenate([block] * 4),
        np.tile(text[:700], 9),
    ):
        assert np.array_equal(exactsets.window_set_jit(data), exactsets.window_set(data, jit=False))
