"""sif94 and winnowing against brute-force references, and their invariants."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sif.core.rolling import BASE
from sif.core.sampling import (
    degenerate_at,
    degenerate_mask,
    sif94_density,
    sif94_select,
    winnow_density,
    winnow_select,
    winnow_window_for,
)

M64 = (1 << 64) - 1


def arr(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def naive_kr(window: bytes, modulus: int = 1 << 64) -> int:
    value = 0
    for byte in window:
        value = (value * BASE + byte) % modulus
    return value


def naive_mix(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    x ^= x >> 33
    return min(x, M64 - 1)


def naive_degenerate(window: bytes, max_period: int) -> bool:
    return any(
        all(window[j] == window[j + q] for j in range(len(window) - q))
        for q in range(1, max_period + 1)
    )


def naive_winnow(data: bytes, w: int, ww: int, max_period: int) -> list[tuple[int, int]]:
    m = len(data) - w + 1
    if m <= 0:
        return []
    ww = min(ww, m)
    h = [
        M64
        if naive_degenerate(data[i : i + w], max_period)
        else naive_mix(naive_kr(data[i : i + w]))
        for i in range(m)
    ]
    kept = set()
    for k in range(m - ww + 1):
        low = min(h[k : k + ww])
        if low != M64:
            kept.add(max(j for j in range(k, k + ww) if h[j] == low))
    return [(j, h[j]) for j in sorted(kept)]


def naive_sif94(data: bytes, w: int, k: int, bits: int) -> list[tuple[int, int]]:
    out = []
    i = 0
    while i + w <= len(data):
        f = naive_kr(data[i : i + w], 1 << bits)
        if f % (1 << k) == 0:
            out.append((i, f >> k))
            i += w  # "once a fingerprint is identified, the text is shifted to the end of it"
        else:
            i += 1
    return out


# Text with ties and degenerate runs: few letters, runs, short periods.
def chunk() -> st.SearchStrategy[bytes]:
    letters = st.sampled_from(b"ab_ \n")
    return st.one_of(
        st.binary(min_size=1, max_size=30),
        st.builds(lambda c, n: bytes([c]) * n, letters, st.integers(1, 80)),
        st.builds(lambda p, n: p * n, st.binary(min_size=1, max_size=6), st.integers(1, 20)),
        st.lists(letters, min_size=1, max_size=30).map(bytes),
    )


texts = st.lists(chunk(), max_size=12).map(b"".join)


@settings(deadline=None, max_examples=150)
@given(texts, st.sampled_from([4, 8, 50]), st.sampled_from([1, 2, 5, 31]), st.integers(0, 4))
def test_winnow_equals_brute_force(data: bytes, w: int, ww: int, max_period: int) -> None:
    max_period = min(max_period, w // 2)
    starts, values = winnow_select(arr(data), w, ww, max_period)
    assert list(zip(starts.tolist(), values.tolist(), strict=True)) == naive_winnow(
        data, w, ww, max_period
    )


@settings(deadline=None, max_examples=60)
@given(texts, st.sampled_from([4, 8, 50]), st.integers(0, 4), st.sampled_from([30, 31, 32]))
def test_sif94_equals_the_paper_scan(data: bytes, w: int, k: int, bits: int) -> None:
    starts, values = sif94_select(arr(data), w, k, bits)
    assert list(zip(starts.tolist(), values.tolist(), strict=True)) == naive_sif94(data, w, k, bits)


@settings(deadline=None, max_examples=60)
@given(texts, st.sampled_from([4, 8, 50]), st.integers(0, 4))
def test_degenerate_mask_matches_the_definition(data: bytes, w: int, max_period: int) -> None:
    max_period = min(max_period, w // 2)
    mask = degenerate_mask(arr(data), w, max_period)
    expected = [naive_degenerate(data[i : i + w], max_period) for i in range(len(data) - w + 1)]
    assert mask.tolist() == expected
    starts = np.arange(len(expected), dtype=np.int64)
    assert degenerate_at(arr(data), starts, w, max_period).tolist() == expected


@settings(deadline=None, max_examples=60)
@given(texts, st.sampled_from([4, 8, 50]), st.integers(0, 8))
def test_sif94_never_overlaps(data: bytes, w: int, k: int) -> None:
    starts, _ = sif94_select(arr(data), w, k)
    assert (np.diff(starts) >= w).all()


def test_sif94_keeps_one_of_70_underscores() -> None:
    # Section 2: 70 underscores must not give 21 duplicate fingerprints. k = 0 keeps any window.
    starts, _ = sif94_select(arr(b"_" * 70), 50, 0)
    assert starts.tolist() == [0]


def test_winnow_never_keeps_a_run_of_one_byte() -> None:
    rng = np.random.default_rng(7)
    parts = []
    for _ in range(200):
        parts.append(rng.integers(0, 256, 100, dtype=np.uint8).tobytes())
        parts.append(bytes([int(rng.integers(0, 256))]) * 300)
    data = b"".join(parts)
    starts, _ = winnow_select(arr(data), 50, 31, 8)
    assert not degenerate_at(arr(data), starts, 50, 8).any()
    assert len(starts) > 0


@settings(deadline=None, max_examples=40)
@given(
    st.binary(min_size=20, max_size=20),
    st.binary(max_size=60),
    st.binary(max_size=60),
    st.binary(max_size=60),
    st.binary(max_size=60),
)
def test_winnow_guarantee_shared_run_gives_shared_fingerprint(
    shared: bytes, a1: bytes, a2: bytes, b1: bytes, b2: bytes
) -> None:
    w, ww = 8, 13  # any shared run of w + ww - 1 = 20 bytes
    assume(not degenerate_mask(arr(shared), w, 2).all())
    _, va = winnow_select(arr(a1 + shared + a2), w, ww, 2)
    _, vb = winnow_select(arr(b1 + shared + b2), w, ww, 2)
    assert set(va.tolist()) & set(vb.tolist())


@settings(deadline=None, max_examples=40)
@given(texts, st.binary(max_size=80), st.binary(max_size=80), st.binary(max_size=80))
def test_winnow_is_shift_invariant(
    shared: bytes, before_a: bytes, before_b: bytes, after: bytes
) -> None:
    # Every winnowing window inside the shared run keeps the same window wherever it sits.
    w, ww = 8, 13
    assume(len(shared) >= w + ww - 1)
    inner = winnow_select(arr(shared), w, ww, 3)
    for before in (before_a, before_b):
        starts, values = winnow_select(arr(before + shared + after), w, ww, 3)
        found = set(zip((starts - len(before)).tolist(), values.tolist(), strict=True))
        assert set(zip(inner[0].tolist(), inner[1].tolist(), strict=True)) <= found


@settings(deadline=None, max_examples=40)
@given(texts, st.binary(max_size=80), st.binary(max_size=80))
def test_sif94_synchronises_inside_a_shared_run(
    shared: bytes, before_a: bytes, before_b: bytes
) -> None:
    # Candidates depend only on the window; after a window both keep, both keep the same ones.
    w, k = 8, 2
    picks = []
    for before in (before_a, before_b):
        starts, values = sif94_select(arr(before + shared), w, k)
        rel = starts - len(before)
        inside = rel >= 0
        picks.append(dict(zip(rel[inside].tolist(), values[inside].tolist(), strict=True)))
    common = set(picks[0]) & set(picks[1])
    if common:
        first = min(common)
        a = {s: v for s, v in picks[0].items() if s >= first}
        b = {s: v for s, v in picks[1].items() if s >= first}
        assert a == b


def test_density_on_random_data_is_within_ten_percent() -> None:
    data = np.random.default_rng(1994).integers(0, 256, 4 << 20, dtype=np.uint8)
    ww = winnow_window_for(8)
    assert ww == 511
    starts, _ = winnow_select(data, 50, ww, 8)
    assert abs(len(starts) / len(data) / winnow_density(ww) - 1) < 0.1
    assert winnow_density(ww) == 1 / 256
    starts, _ = sif94_select(data, 50, 8, 30)
    assert abs(len(starts) / len(data) / sif94_density(50, 8) - 1) < 0.1
    assert round(1 / sif94_density(50, 8)) == 305
