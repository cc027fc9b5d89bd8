"""S(X) of the numpy form made by steps (sif.core.exactsets.window_set): the same set as
all of X's windows at once, whatever the steps' lengths, with or without a sample."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core import exactsets
from sif.core.rolling import karp_rabin


def whole(data: np.ndarray, window: int, shift: int) -> np.ndarray:
    """S(X) in one go: every window's value, the sample, np.unique."""
    if len(data) < window:
        return np.empty(0, dtype=np.int64)
    v = karp_rabin(data, window).view(np.int64)
    return np.unique(v[exactsets.in_sample(v, shift)])


# Few distinct bytes: repeated windows (ties at a step's end), and plain noise.
data_of = st.one_of(
    st.binary(max_size=3000),
    st.lists(st.sampled_from(b"ab"), max_size=3000).map(bytes),
    st.builds(lambda p, n: p * n, st.binary(min_size=1, max_size=7), st.integers(0, 400)),
)


@settings(deadline=None, max_examples=150)
@given(
    data_of,
    st.sampled_from([1, 4, 50]),
    st.sampled_from([0, 0, 1, 3]),
    st.integers(0, 200),
    st.integers(1, 50),
)
def test_steps_give_the_set_of_all_windows(
    data: bytes, window: int, shift: int, extra: int, distinct_step: int
) -> None:
    arr = np.frombuffer(data, dtype=np.uint8)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exactsets, "STEP_BYTES", window + extra)  # a step holds extra + 1 windows
        mp.setattr(exactsets, "DISTINCT_STEP", distinct_step)
        got = exactsets.window_set(arr, window, jit=False, shift=shift)
    want = whole(arr, window, shift)
    assert got.dtype == np.int64 and np.array_equal(got, want)


def _set_and_peak(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """The numpy form's S(arr) and the peak of the memory it traced making it, a whole
    step's power tables made first (they are kept: whatever ran before, they are out)."""
    import tracemalloc

    exactsets.window_set(arr[: 2 << 20], jit=False)
    tracemalloc.start()
    try:
        s = exactsets.window_set(arr, jit=False)
        return s, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_input_keeps_few_bytes_beside_its_set() -> None:
    """8 MB of text: the set's 8 bytes a window, plus a step's temporaries (a few MB);
    in one go it held about 40 bytes a byte (the values, the prefix sums, the products,
    the sort's copy, the mask and the power tables of 16 M entries)."""
    rng = np.random.default_rng(2)
    arr = rng.integers(97, 123, 8 << 20, dtype=np.uint8)
    s, peak = _set_and_peak(arr)
    assert len(s) == len(arr) - exactsets.WINDOW + 1  # random text: every window distinct
    assert peak < 8 * len(arr) + (48 << 20), peak


def test_a_set_of_repeated_windows_is_shrunk_where_it_lies_not_copied() -> None:
    """8 MB of text whose second half repeats the first: its set is half its windows. The
    values were copied to a new array of the set's length (both held at once: 32 MB more
    here, 640 MB for a 100 MB query); the array of the values is now shrunk to it."""
    rng = np.random.default_rng(3)
    half = rng.integers(97, 123, 4 << 20, dtype=np.uint8)
    arr = np.concatenate([half, half])
    s, peak = _set_and_peak(arr)
    assert np.array_equal(s, whole(arr, exactsets.WINDOW, 0))
    assert len(s) < len(arr) // 2 + exactsets.WINDOW  # the repeat's windows: none new
    assert peak < 8 * len(arr) + (32 << 20), peak  # 21 MB over 8 bytes a byte; 45 before


@settings(deadline=None, max_examples=100)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), unique=True, max_size=400), st.integers(0, 4))
def test_a_sample_taken_by_steps_is_the_sample_of_the_whole(values: list[int], shift: int) -> None:
    """sampled and sample_size go a step of values at a time (in_sample's temporaries
    were 8 bytes a value of a 100 MB query's set, 2 GB): the same values, in order."""
    s = np.array(sorted(values), dtype=np.int64)
    want = s[exactsets.in_sample(s, shift)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(exactsets, "DISTINCT_STEP", 7)
        got = exactsets.sampled(s, shift)
        n = exactsets.sample_size(s, shift)
    assert np.array_equal(got, want) and n == len(want) and got.dtype == np.int64
