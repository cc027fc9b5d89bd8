"""Karp-Rabin hashes of every w-byte window of a byte string, vectorised.

Manber, section 2: the fingerprint of the window ``t_i .. t_{i+w-1}`` is

    F_i = (t_i * p^(w-1) + t_{i+1} * p^(w-2) + ... + t_{i+w-1}) mod M

with ``p`` prime, ``M = 2^30`` and ``w = 50``. Every modulus used here is a
power of two, and ``2^b`` divides ``2^64``, so all hashes are computed once
modulo ``2^64`` (numpy's wrapping ``uint64`` arithmetic) and reduced by a
mask: ``F mod 2^b == (F mod 2^64) & (2^b - 1)``.

The polynomial hash modulo ``2^64`` is fine for equality but its low bits
are poorly mixed (bit 0 is the parity of the window's bytes), so sampling
schemes that select by value use :func:`mix64` of it, a bijection: equal
windows still give equal values, and different windows collide exactly when
their Karp-Rabin values do.

Everything here is pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

#: The paper's window length ``w`` (section 2: "a fixed number of characters, say 50").
WINDOW = 50
#: The paper's modulus ``M = 2^30`` (section 2), as a number of bits.
MODULUS_BITS = 30
#: The paper's base ``p``: it asks only for a prime. This one is the 64-bit
#: FNV prime 2^40 + 2^8 + 0xb3, odd, hence invertible modulo 2^64.
BASE = 1099511628211

U64 = npt.NDArray[np.uint64]
U8 = npt.NDArray[np.uint8]
_MASK64 = (1 << 64) - 1
#: fmix64, the finaliser of MurmurHash3: a bijection of 64-bit integers with full avalanche.
FMIX_C1 = 0xFF51AFD7ED558CCD
FMIX_C2 = 0xC4CEB9FE1A85EC53


def as_bytes_array(data: bytes | bytearray | memoryview | npt.NDArray[np.uint8]) -> U8:
    """A read-only ``uint8`` view of ``data`` (no copy for bytes-like inputs)."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError("expected a one-dimensional uint8 array")
        return data
    return np.frombuffer(data, dtype=np.uint8)


def _inverse_mod_2_64(a: int) -> int:
    # Newton's iteration doubles the correct low bits each step: 3 (a*a = 1 mod 8) -> 96.
    x = a
    for _ in range(6):
        x = (x * (2 - a * x)) & _MASK64
    if (a * x) & _MASK64 != 1:
        raise ValueError("base must be odd to be invertible modulo 2^64")
    return x


@lru_cache(maxsize=8)
def _powers(base: int, size: int) -> tuple[U64, U64]:
    """``(p^j, p^-j) mod 2^64`` for ``j < size``; cached because blocks reuse them."""
    inv = _inverse_mod_2_64(base)
    with np.errstate(over="ignore"):
        fwd = np.empty(size, dtype=np.uint64)
        bwd = np.empty(size, dtype=np.uint64)
        fwd[0] = bwd[0] = 1
        if size > 1:
            np.cumprod(np.full(size - 1, base, dtype=np.uint64), out=fwd[1:])
            np.cumprod(np.full(size - 1, inv, dtype=np.uint64), out=bwd[1:])
    fwd.flags.writeable = False
    bwd.flags.writeable = False
    return fwd, bwd


def _bucket(n: int) -> int:
    # Power-of-two sizes so that blocks of varying length share one cached table.
    return 1 << max(10, (n - 1).bit_length())


def karp_rabin(data: U8, window: int = WINDOW, base: int = BASE) -> U64:
    """Karp-Rabin hashes modulo ``2^64`` of every ``window``-byte window of ``data``.

    Element ``i`` is ``sum(data[i + j] * base^(window-1-j)) mod 2^64``; there
    are ``max(0, len(data) - window + 1)`` of them. Reduce modulo ``2^b`` with
    ``& (2^b - 1)``.

    Vectorised with prefix sums instead of the rolling update: with
    ``S_k = sum_{j<k} t_j p^-j``, the window at ``i`` is ``p^(i+w-1) (S_{i+w} - S_i)``
    (``p`` is odd, hence invertible modulo ``2^64``). Cost: O(n), about six
    passes over ``uint64`` arrays of a step of :data:`KR_STEP` bytes at most
    (a longer input is done a step at a time into the output: its 8 bytes a
    window are all it holds), and two cached power tables of the next power of
    two above a step (16 bytes per entry). In one go a 100 MB query held about
    30 bytes a byte, 2 GB of them tables kept.
    """
    n = len(data)
    m = n - window + 1
    if window < 1:
        raise ValueError("window must be positive")
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    if n > KR_STEP and window <= KR_STEP // 2:  # else steps of few windows: one go
        out = np.empty(m, dtype=np.uint64)
        advance = KR_STEP - window + 1  # the windows a step of KR_STEP bytes holds
        for a in range(0, m, advance):
            out[a : a + advance] = _karp_rabin_step(data[a : a + KR_STEP], window, base)
        return out
    return _karp_rabin_step(data, window, base)


#: Bytes :func:`karp_rabin` hashes in one go (its temporaries, 24 bytes a byte, and power
#: tables of 16 MB at most).
KR_STEP = (1 << 20) - 1


def _karp_rabin_step(data: U8, window: int, base: int) -> U64:
    n = len(data)
    m = n - window + 1
    fwd, bwd = _powers(base, _bucket(n + 1))
    with np.errstate(over="ignore"):
        prefix = np.empty(n + 1, dtype=np.uint64)
        prefix[0] = 0
        np.cumsum(data * bwd[:n], out=prefix[1:])
        out = prefix[window:] - prefix[:m]
        out *= fwd[window - 1 : window - 1 + m]
    return out


def karp_rabin_at(
    data: U8, starts: npt.NDArray[np.int64], window: int = WINDOW, base: int = BASE
) -> U64:
    """Karp-Rabin hashes modulo ``2^64`` of the windows starting at ``starts`` only.

    Each ``start + window`` must be at most ``len(data)``. Horner's rule over
    the ``window`` columns of a gathered matrix. Cost: O(len(starts) * window)
    time and memory; cheap when the starts are sparse (anchors).
    """
    h = np.zeros(len(starts), dtype=np.uint64)
    if len(starts) == 0:
        return h
    b = np.uint64(base)
    with np.errstate(over="ignore"):
        for j in range(window):
            h *= b
            h += data[starts + j]
    return h


def mix64(x: U64) -> U64:
    """fmix64 of each element, with ``2^64 - 1`` moved to ``2^64 - 2``.

    A bijection apart from that one value, which is reserved by the sampling
    schemes to mean "no window here" (degenerate). Cost: O(n), seven passes.
    """
    with np.errstate(over="ignore"):
        y = x ^ (x >> np.uint64(33))
        y *= np.uint64(FMIX_C1)
        y ^= y >> np.uint64(33)
        y *= np.uint64(FMIX_C2)
        y ^= y >> np.uint64(33)
    y[y == np.uint64(_MASK64)] = np.uint64(_MASK64 - 1)
    return y


def window_hashes(data: U8, window: int = WINDOW, base: int = BASE) -> U64:
    """The well-mixed 64-bit value of every window: ``mix64(karp_rabin(...))``.

    These are the values that ``winnow`` and ``anchors`` store. Cost: O(n).
    """
    return mix64(karp_rabin(data, window, base))
