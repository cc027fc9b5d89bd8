"""The winnowing kernel compiled (``sif.core._winnowc``, C), and the drivers it shares with numba's.

numba's form of the kernel (:mod:`sif.core.kernels`) costs about 0.6 s and
~100 MB in each process that loads it (``import numba``, its CPU target, the
cached kernel); the same kernel in C loads in microseconds and runs as fast
(twice as fast where the CPU has AVX-512: eight windows at a time), so
:mod:`sif.fingerprint` uses it whenever it was built (an optional extension:
``setup.py``; without a compiler sif falls back to numba, with the same
fingerprints). :func:`run_many` and :func:`run_one` drive either kernel:
``kernel(data, starts, ends, wws, window, max_period, base, top, room, out,
out_values, counts)`` (see ``kernels._winnow_many``).

Pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.rolling import BASE, U8, U64

try:
    from sif.core import _winnowc  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler when installed): numba's kernel instead
    _winnowc = None

I64 = npt.NDArray[np.int64]
Kernel = Callable[..., None]


def available() -> bool:
    """Whether the compiled kernel was built (then no process needs numba to winnow)."""
    return _winnowc is not None


def _room(m: Any, ww: Any) -> Any:
    # Four times the expected count 2m / (ww + 1): rarely exceeded, a few KB per MB.
    return 8 * m // (ww + 1) + 64


def _top(window: int, base: int) -> np.uint64:
    return np.uint64(pow(base, window - 1, 1 << 64))


def run_many(
    kernel: Kernel,
    data: U8,
    starts: I64,
    ends: I64,
    wws: I64,
    window: int,
    max_period: int,
    base: int,
) -> tuple[I64, U64, I64]:
    """The winnowing of each input ``data[starts[i]:ends[i]]`` (winnowing window
    ``wws[i] <= its windows``) in one ``kernel`` call: (starts, values, counts), the
    results of the inputs one after another, ``counts[i]`` of input ``i``; the
    starts are relative to each input."""
    n = len(starts)
    m = ends - starts - window + 1
    top = _top(window, base)
    room = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.broadcast_to(_room(m, wws), m.shape), out=room[1:])
    out = np.empty(int(room[-1]), dtype=np.int64)
    out_values = np.empty(int(room[-1]), dtype=np.uint64)
    counts = np.empty(n, dtype=np.int64)
    kernel(
        data, starts, ends, wws, window, max_period, np.uint64(base), top, room, out, out_values,
        counts,
    )  # fmt: skip
    fits = counts <= room[1:] - room[:-1]
    if fits.all():
        keep = np.repeat(room[:-1], counts) + (
            np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        return out[keep], out_values[keep], counts
    parts_s, parts_v = [], []
    for i in range(n):  # rare (long decreasing runs): those inputs again, with room
        if fits[i]:
            lo = int(room[i])
            parts_s.append(out[lo : lo + int(counts[i])])
            parts_v.append(out_values[lo : lo + int(counts[i])])
        else:
            s, v = run_one(
                kernel, data[int(starts[i]) : int(ends[i])], window, int(wws[i]), max_period, base
            )
            parts_s.append(s)
            parts_v.append(v)
    return np.concatenate(parts_s), np.concatenate(parts_v), counts


def run_one(
    kernel: Kernel, data: U8, window: int, ww: int, max_period: int, base: int
) -> tuple[I64, U64]:
    """The winnowing of ``data`` (``ww <= windows``) by ``kernel``: (starts, values).

    The output is sized for four times the expected density ``2 / (ww + 1)``;
    an input that keeps more (long decreasing runs) is counted in full and run
    once more with room.
    """
    m = len(data) - window + 1
    top = _top(window, base)
    cap = _room(m, ww)
    bounds = np.array([0, len(data)], dtype=np.int64)
    wws = np.array([ww], dtype=np.int64)
    counts = np.empty(1, dtype=np.int64)
    while True:
        out = np.empty(cap, dtype=np.int64)
        out_values = np.empty(cap, dtype=np.uint64)
        room = np.array([0, cap], dtype=np.int64)
        kernel(
            data, bounds[:1], bounds[1:], wws, window, max_period, np.uint64(base), top, room,
            out, out_values, counts,
        )  # fmt: skip
        n = int(counts[0])
        if n <= cap:
            return out[:n], out_values[:n]
        cap = n


def winnow_many(
    data: U8, starts: I64, ends: I64, wws: I64, window: int, max_period: int, base: int
) -> tuple[I64, U64, I64]:
    """:func:`sif.core.kernels.winnow_many` by the compiled kernel (:func:`available`)."""
    assert _winnowc is not None
    return run_many(
        _winnowc.winnow_many,
        np.ascontiguousarray(data, dtype=np.uint8),
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(ends, dtype=np.int64),
        np.ascontiguousarray(wws, dtype=np.int64),
        window,
        max_period,
        base,
    )


def winnow_select(
    data: U8, window: int, winnow_window: int, max_period: int, base: int = BASE
) -> tuple[I64, U64]:
    """:func:`sif.core.sampling.winnow_select` by the compiled kernel (:func:`available`)."""
    assert _winnowc is not None
    m = len(data) - window + 1
    if m <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    arr = np.ascontiguousarray(data, dtype=np.uint8)
    return run_one(_winnowc.winnow_many, arr, window, min(winnow_window, m), max_period, base)
