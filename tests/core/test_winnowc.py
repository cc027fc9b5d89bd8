"""The compiled winnowing kernel gives exactly what numba's and numpy's give."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core import (
    _winnowc,  # type: ignore[attr-defined]
    kernels,
    winnowc,
)
from sif.core.rolling import BASE
from sif.core.sampling import winnow_select
from sif.fingerprint import fingerprint_batch, make_params


def arr(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


# Low entropy, as in test_kernels: ties, runs of one byte, short periods, noise.
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


def test_the_compiled_kernel_is_built() -> None:
    # setup.py builds it (optional=True only spares an install without a compiler).
    assert winnowc.available()


#: The kernel's forms this CPU runs (AVX-512: the fast path and the rescan; AVX2: the
#: rescan; plain C): each must give numba's fingerprints.
VARIANTS = _winnowc.variants()


@contextlib.contextmanager
def using(variant: str) -> Iterator[None]:
    _winnowc.use(variant)
    try:
        yield
    finally:
        _winnowc.use(VARIANTS[0])  # the module's own choice


def assert_same(data: np.ndarray, w: int, ww: int, max_period: int) -> None:
    s_jit, v_jit = winnow_select(data, w, ww, max_period, jit=True)
    for variant in VARIANTS:
        with using(variant):
            s_c, v_c = winnowc.winnow_select(data, w, ww, max_period)
        assert np.array_equal(s_c, s_jit) and np.array_equal(v_c, v_jit), variant
        assert s_c.dtype == s_jit.dtype and v_c.dtype == v_jit.dtype


def test_the_module_runs_the_best_rescan_this_cpu_has() -> None:
    assert VARIANTS[-1] == "plain"
    flags = open("/proc/cpuinfo").read().split()  # noqa: SIM115
    avx512 = "avx512f" in flags and "avx512dq" in flags  # the fast path's 64-bit multiplies
    expected = "avx512" if avx512 else "avx2" if "avx2" in flags else "plain"
    assert VARIANTS[0] == expected
    with pytest.raises(ValueError):
        _winnowc.use("sse9")


def test_every_rescan_agrees_where_the_window_wraps_the_ring() -> None:
    # Text with a fresh minimum rarely: rescans over windows that wrap the ring, with
    # ties (a period of the window's length repeats each value) and a tail under a lane.
    rng = np.random.default_rng(11)
    for ww in (5, 8, 9, 16, 17, 100, 511, 512):
        for _ in range(4):
            n = int(rng.integers(10 * ww + 100, 40 * ww + 200))
            data = rng.integers(0, 256, n, dtype=np.uint8)
            data[n // 3 : n // 3 + 3 * ww] = np.tile(data[:ww], 3)[: 3 * ww]
            assert_same(data, 50, ww, 0)


@settings(deadline=None, max_examples=200)
@given(repetitive(), *params)
def test_compiled_equals_numba_on_repetitive_bytes(
    data: bytes, w: int, ww: int, max_period: int
) -> None:
    assert_same(arr(data), w, ww, min(max_period, w // 2))


@settings(deadline=None, max_examples=60)
@given(st.binary(max_size=4000), *params)
def test_compiled_equals_numba_on_random_bytes(
    data: bytes, w: int, ww: int, max_period: int
) -> None:
    assert_same(arr(data), w, ww, min(max_period, w // 2))


def test_compiled_equals_numba_on_runs_and_ties() -> None:
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(1, 6000))
        data = rng.integers(0, int(rng.choice([1, 2, 3, 256])), n, dtype=np.uint8)
        for r in rng.integers(0, n, 5):
            data[r : r + int(rng.integers(50, 700))] = rng.integers(0, 256)
        assert_same(data, 50, int(rng.choice([1, 7, 511])), int(rng.integers(0, 9)))


def test_compiled_many_equals_numba_many_and_grows_its_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(4)
    inputs = [rng.integers(0, 256, n, dtype=np.uint8) for n in (20_000, 60, 5_000, 50)]
    data = np.concatenate(inputs)
    lens = np.array([len(x) for x in inputs], dtype=np.int64)
    ends = np.cumsum(lens)
    wws = np.array([7, 11, 511, 1], dtype=np.int64)
    expected = kernels.winnow_many(data, ends - lens, ends, wws, 50, 8, BASE)
    monkeypatch.setattr("sif.core.winnowc._room", lambda m, ww: 2)  # every input outgrows it
    got = winnowc.winnow_many(data, ends - lens, ends, wws, 50, 8, BASE)
    for a, b in zip(got, expected, strict=True):
        assert np.array_equal(a, b)


def test_compiled_kernel_refuses_inputs_out_of_bounds() -> None:
    # A wrong call is a ValueError, never a read outside the buffers.
    from sif.core import _winnowc  # type: ignore[attr-defined]

    data = np.zeros(100, dtype=np.uint8)
    one = np.array([0], dtype=np.int64)
    room = np.array([0, 10], dtype=np.int64)
    out, vals, counts = np.empty(10, np.int64), np.empty(10, np.uint64), np.empty(1, np.int64)
    for end, ww in ((200, 1), (100, 52), (30, 1)):  # past the data; ww > windows; < window
        with pytest.raises(ValueError):
            _winnowc.winnow_many(
                data, one, np.array([end]), np.array([ww]), 50, 8, BASE, 1, room, out, vals, counts
            )


def test_fingerprint_batch_uses_no_numba_in_a_fresh_process() -> None:
    # The point of the compiled kernel: a worker fingerprints without importing numba.
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from sif.fingerprint import fingerprint_batch, make_params, fingerprint_file\n"
        "p = make_params('winnow', min_fingerprints=20)\n"
        "d = np.frombuffer(bytes(range(256)) * 400, dtype=np.uint8)\n"
        "v, c = fingerprint_batch(p, d, np.array([0, 5000]), np.array([5000, 9000]))\n"
        "assert c.sum() == len(v) > 0\n"
        "print('numba' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_fingerprint_batch_compiled_equals_numba() -> None:
    p = make_params("winnow", min_fingerprints=20)
    rng = np.random.default_rng(9)
    inputs = [rng.integers(0, 4, int(n), dtype=np.uint8) for n in rng.integers(10, 9000, 50)]
    data = np.concatenate(inputs)
    lens = np.array([len(x) for x in inputs], dtype=np.int64)
    ends = np.cumsum(lens)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sif.fingerprint.compiled_winnow", lambda: False)
        mp.setattr("sif.fingerprint._use_jit", lambda total: True)
        v_jit, c_jit = fingerprint_batch(p, data, ends - lens, ends)
    v_c, c_c = fingerprint_batch(p, data, ends - lens, ends)
    assert np.array_equal(c_c, c_jit) and np.array_equal(v_c, v_jit)
