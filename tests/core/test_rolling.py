"""Karp-Rabin hashes against the paper's formula computed naively, window by window."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core.rolling import (
    BASE,
    FMIX_C1,
    FMIX_C2,
    karp_rabin,
    karp_rabin_at,
    mix64,
    window_hashes,
)

M64 = (1 << 64) - 1


def naive_kr(window: bytes, modulus: int = 1 << 64, base: int = BASE) -> int:
    # Section 2: F = (t1 p^(w-1) + ... + tw) mod M, by Horner's rule.
    value = 0
    for byte in window:
        value = (value * base + byte) % modulus
    return value


def naive_mix(x: int) -> int:
    x ^= x >> 33
    x = (x * FMIX_C1) & M64
    x ^= x >> 33
    x = (x * FMIX_C2) & M64
    x ^= x >> 33
    return min(x, M64 - 1)


def arr(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


@settings(deadline=None, max_examples=60)
@given(st.binary(max_size=300), st.sampled_from([1, 2, 3, 8, 50]))
def test_every_window_matches_the_naive_hash(data: bytes, window: int) -> None:
    got = karp_rabin(arr(data), window)
    expected = [naive_kr(data[i : i + window]) for i in range(len(data) - window + 1)]
    assert got.dtype == np.uint64
    assert [int(v) for v in got] == expected


@settings(deadline=None, max_examples=30)
@given(st.binary(min_size=50, max_size=200), st.sampled_from([30, 31, 32]))
def test_paper_modulus_is_a_mask_of_the_64_bit_hash(data: bytes, bits: int) -> None:
    got = karp_rabin(arr(data), 50) & np.uint64((1 << bits) - 1)
    expected = [naive_kr(data[i : i + 50], 1 << bits) for i in range(len(data) - 49)]
    assert [int(v) for v in got] == expected


def test_short_input_has_no_window() -> None:
    assert len(karp_rabin(arr(b"x" * 49), 50)) == 0
    assert len(karp_rabin(arr(b""), 50)) == 0
    assert len(karp_rabin(arr(b"x" * 50), 50)) == 1


def test_even_base_is_refused() -> None:
    with pytest.raises(ValueError):
        karp_rabin(arr(b"abc"), 2, base=10)


@settings(deadline=None, max_examples=30)
@given(st.binary(min_size=8, max_size=200), st.data())
def test_hash_at_chosen_starts_equals_rolling_hash(data: bytes, draw: st.DataObject) -> None:
    starts = draw.draw(st.lists(st.integers(0, len(data) - 8), max_size=10))
    idx = np.array(starts, dtype=np.int64)
    assert np.array_equal(karp_rabin_at(arr(data), idx, 8), karp_rabin(arr(data), 8)[idx])


def test_mix64_is_fmix64_and_reserves_the_top_value() -> None:
    xs = [0, 1, 2, 12345, M64, 1 << 63]
    got = mix64(np.array(xs, dtype=np.uint64))
    assert [int(v) for v in got] == [naive_mix(x) for x in xs]
    assert int(got.max()) < M64
    values = np.arange(100_000, dtype=np.uint64)
    assert len(np.unique(mix64(values))) == len(values)  # a bijection


def test_window_hashes_are_mixed_karp_rabin() -> None:
    data = arr(b"the quick brown fox jumps over the lazy dog" * 3)
    assert np.array_equal(window_hashes(data, 10), mix64(karp_rabin(data, 10)))


@settings(deadline=None, max_examples=150)
@given(st.binary(max_size=3000), st.sampled_from([1, 4, 50]), st.integers(0, 300))
def test_karp_rabin_by_steps_is_karp_rabin_in_one_go(data: bytes, window: int, extra: int) -> None:
    """A long input is hashed a step at a time (its memory: the output, and a step's
    temporaries and tables); the values are those of one go, at every step's edge."""
    from sif.core import rolling

    arr = np.frombuffer(data, dtype=np.uint8)
    whole = rolling.karp_rabin(arr, window)  # shorter than a step: one go
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rolling, "KR_STEP", window + extra)  # extra + 1 windows a step
        stepped = rolling.karp_rabin(arr, window)
    assert stepped.dtype == np.uint64 and np.array_equal(stepped, whole)
