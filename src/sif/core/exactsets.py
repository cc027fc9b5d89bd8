"""Exact window sets and their intersections: S(X) and |S(A) ∩ S(B)|.

S(X) is the set of distinct ``w``-byte substrings of X, each stood for by
its Karp-Rabin value modulo ``2^64`` (:func:`sif.core.rolling.karp_rabin`:
the same polynomial the fingerprints start from), read as a signed 64-bit
integer and kept sorted as one (numpy sorts ``int64`` with its AVX-512
kernel, twice as fast as ``uint64`` here). C(A,B) = |S(A) ∩ S(B)| /
|S(A)| is the containment that ``sif similar`` and ``sif query`` compare
with the threshold by default.

Two forms, equal value for value (the tests compare them):

- numpy (:func:`window_set`, :func:`intersection_size`): no compilation,
  for a query's few files (``import numba`` alone costs half a second);
- numba (:func:`window_set_jit`, :func:`intersection_size_jit`): the bulk
  form, about 20x faster, for an all-against-all run.

Two 64-bit values of different windows are equal with probability 2^-64
for random text (the polynomial is fixed, so crafted input can collide): a
set of n windows loses about n^2 / 2^65 of them, none in practice.

Pure: arrays in, arrays out, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.rolling import BASE, U8, WINDOW, as_bytes_array, karp_rabin, mix64

I64 = npt.NDArray[np.int64]

#: Inputs of at least this many bytes go to the numba form when :func:`window_set` is
#: asked for ``jit=None`` (the choice made for it) and numba is already loaded.
JIT_BYTES = 1 << 20


#: Bytes of input the numpy form hashes a step (:func:`window_set`): its temporaries
#: (three arrays of 8 bytes a byte) and the power tables it caches (16 bytes an entry,
#: the next power of two above it) stay 8 MB and 16 MB whatever the input. In one step,
#: a 100 MB file took 4.7 GB and 18 s (2 GB of them tables kept for the next call);
#: by steps, a set of 100 M values took 0.8 GB.
STEP_BYTES = (1 << 20) - 1

#: Values of a sorted set made distinct a step at a time (:func:`_distinct_in_place`).
DISTINCT_STEP = 1 << 20


def _distinct_in_place(s: I64) -> I64:
    """The distinct values of the sorted ``s``, moved to its front a step at a time (no
    mask or copy of the whole: a value is written at or before where it was read);
    when that frees an eighth or more of ``s``, ``s`` itself shrunk to them if it owns
    its buffer (the caller keeps no other reference to it), else a copy."""
    n = len(s)
    w = 0
    last = None
    for a in range(0, n, DISTINCT_STEP):
        part = s[a : a + DISTINCT_STEP].copy()
        keep = np.empty(len(part), dtype=bool)
        keep[0] = last is None or part[0] != last
        np.not_equal(part[1:], part[:-1], out=keep[1:])
        last = part[-1]
        kept = part[keep]
        s[w : w + len(kept)] = kept
        w += len(kept)
    if w > n - n // 8:
        return s[:w]
    if s.base is None and s.flags.owndata:
        # Shrunk where it lies (a realloc: a large buffer's tail is unmapped), not copied:
        # the copy held both (a 100 MB query: 800 MB of values, then 640 MB of set).
        # No view of ``s`` is left (each step above was copied): none can dangle.
        s.resize(w, refcheck=False)
        return s
    return s[:w].copy()


def _window_values(arr: U8, window: int, shift: int) -> I64:
    """The Karp-Rabin value of every window of ``arr`` (those in the sample of rate
    ``2^-shift`` only), in order, computed :data:`STEP_BYTES` of input at a time: the
    windows of a step start in it and may end in the next one's first bytes."""
    m = len(arr) - window + 1
    advance = STEP_BYTES - window + 1  # the windows a step of STEP_BYTES bytes holds
    if shift <= 0:
        out = np.empty(m, dtype=np.int64)
        for a in range(0, m, advance):
            out[a : a + advance] = karp_rabin(arr[a : a + STEP_BYTES], window).view(np.int64)
        return out
    parts = []
    for a in range(0, m, advance):
        v = karp_rabin(arr[a : a + STEP_BYTES], window).view(np.int64)
        parts.append(v[in_sample(v, shift)])
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def window_set(
    data: bytes | bytearray | memoryview | U8,
    window: int = WINDOW,
    jit: bool | None = False,
    shift: int = 0,
) -> I64:
    """S(X): the distinct Karp-Rabin values of every ``window``-byte substring, sorted.

    ``jit``: ``True`` for the numba form, ``False`` for numpy, ``None`` to
    choose (numba when it is loaded and the input is large). ``shift``: only
    the values of the sample of rate ``2^-shift`` (:func:`in_sample`; 0: all).
    Cost: O(n log n) for n bytes (a value per window, then a sort of those
    kept); 8 bytes a value kept, and a few MB besides (the numpy form hashes a
    step of :data:`STEP_BYTES` at a time, sorts in place, and keeps the
    distinct values in place).
    """
    arr = as_bytes_array(data)
    if len(arr) < window:
        return np.empty(0, dtype=np.int64)
    if jit is None:
        import sys

        jit = len(arr) >= JIT_BYTES and "numba" in sys.modules
    if jit:
        return window_set_jit(arr, window, shift=shift)
    values = _window_values(arr, window, shift)
    values.sort()
    return _distinct_in_place(values)


def step_values(pieces: Iterable[bytes], window: int = WINDOW) -> Iterator[I64]:
    """The Karp-Rabin value of every window of the concatenation of ``pieces`` (a file
    read a step at a time), a step's at a time, in order: each step's windows are
    those that end in its piece (the last ``window - 1`` bytes before it are kept for
    them). ``window_set`` of the whole is the distinct values of all the steps."""
    carry = b""
    for piece in pieces:
        buf = carry + bytes(piece) if carry else bytes(piece)
        if len(buf) >= window:
            yield karp_rabin(np.frombuffer(buf, dtype=np.uint8), window).view(np.int64)
        carry = buf[len(buf) - (window - 1) :] if window > 1 else b""


def distinct_of(parts: list[I64]) -> I64:
    """The distinct values of ``parts`` (emptied as they are taken), sorted."""
    if not parts:
        return np.empty(0, dtype=np.int64)
    values = np.concatenate(parts)
    parts.clear()
    values.sort()
    return _distinct_in_place(values)


#: The salt of the window sample's hash (:func:`in_sample`): the sample is independent
#: of the values the fingerprints and the small-file pass select by (mix64 of the
#: value itself).
SAMPLE_SALT = 0x9E3779B97F4A7C15


def in_sample(values: I64, shift: int) -> npt.NDArray[np.bool_]:
    """Which window values are in the sample of rate ``2^-shift`` (numpy form).

    A value is kept when the top ``shift`` bits of fmix64(value ^ salt) are
    zero: a choice by value, so that two files keep the same windows of what
    they share, and nested (the sample at ``shift + 1`` is part of the one at
    ``shift``). Then |S_r(A) ∩ S_r(B)| / |S_r(A)| estimates C(A,B) as a
    binomial share of |S_r(A)| values. ``shift`` 0: every value.
    """
    if shift <= 0:
        return np.ones(len(values), dtype=bool)
    y = mix64(values.view(np.uint64) ^ np.uint64(SAMPLE_SALT))
    return (y >> np.uint64(64 - shift)) == 0


#: A pair whose smaller file has at least twice this many windows is scored on a sample
#: of its windows, chosen by value (:func:`in_sample`), of rate ``2^-r`` such that the
#: smaller file keeps at least this many (``sif similar``'s exact pass, ``sif query``):
#: the score is then a binomial share of 65,536 values or more, whose 90% interval is
#: at most ±0.33 points wide (shown with it, as an estimate), and the larger file's set
#: is sampled too. Measured on 1 GB of Linux sources: 513 of 285k pairs (register
#: headers of several MB, against each other) held 1.07 G of the 1.9 G look-ups, and
#: the sets of files of 1 MB or more were sorted 2.4 times each (836 MB of values for
#: 344 MB of files: a set is 8 bytes a byte and the cache could not keep them between
#: the chunks).
SAMPLE_FROM = 1 << 16


def sample_shift(windows: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The shift ``r`` of the window sample for a smaller file of ``windows`` windows:
    the largest with ``windows / 2^r >= SAMPLE_FROM`` (0 under ``2 * SAMPLE_FROM``)."""
    w = np.maximum(np.asarray(windows, dtype=np.int64), 1)
    r = np.floor(np.log2(w / SAMPLE_FROM)).astype(np.int64)
    return np.clip(r, 0, 48)


def _value_steps(s: I64) -> list[I64]:
    """``s`` as views of :data:`DISTINCT_STEP` values (one, possibly empty, at least)."""
    return [s[a : a + DISTINCT_STEP] for a in range(0, max(len(s), 1), DISTINCT_STEP)]


def sampled(s: I64, shift: int, jit: bool = False) -> I64:
    """The values of the sorted set ``s`` in the sample of rate ``2^-shift``, sorted (a copy)."""
    if shift <= 0:
        return s
    if not jit:  # a step of values at a time: in_sample's temporaries are 8 bytes a value
        parts = [p[in_sample(p, shift)] for p in _value_steps(s)]
        return np.concatenate(parts) if len(parts) != 1 else parts[0]
    out = s.copy()
    return out[: int(_compiled()["sample_keep"](out, shift))]


def sample_size(s: I64, shift: int, jit: bool = False) -> int:
    """How many values of ``s`` are in the sample of rate ``2^-shift``."""
    if shift <= 0:
        return len(s)
    if not jit:
        return sum(int(np.count_nonzero(in_sample(p, shift))) for p in _value_steps(s))
    return int(_compiled()["sample_count"](s, shift))


def intersection_size(sa: I64, sb: I64) -> int:
    """|A ∩ B| of two sorted arrays of distinct values (numpy: a binary search of the smaller)."""
    if len(sa) == 0 or len(sb) == 0:
        return 0
    few, many = (sa, sb) if len(sa) <= len(sb) else (sb, sa)
    pos = np.minimum(np.searchsorted(many, few), len(many) - 1)
    return int(np.count_nonzero(many[pos] == few))


def containment(sa: I64, sb: I64, jit: bool = False) -> tuple[float, float]:
    """(C(A,B), C(B,A)) = |S(A) ∩ S(B)| / |S(A)|, / |S(B)|, from sorted distinct sets."""
    if len(sa) == 0 or len(sb) == 0:
        return 0.0, 0.0
    inter = intersection_size_jit(sa, sb) if jit else intersection_size(sa, sb)
    return inter / len(sa), inter / len(sb)


# --- numba -------------------------------------------------------------------------

_kernels: dict[str, Any] = {}


def _compiled() -> dict[str, Any]:
    """The numba kernels, compiled (or loaded from the cache) on first use."""
    if not _kernels:
        from sif.core import exactkernels

        _kernels["values"] = exactkernels.window_values
        _kernels["distinct"] = exactkernels.distinct_sorted
        _kernels["inter"] = exactkernels.intersection_size
        _kernels["offsets"] = exactkernels.bucket_offsets
        _kernels["count_in"] = exactkernels.count_in
        _kernels["filter"] = exactkernels.bit_filter
        _kernels["probe"] = exactkernels.probe_hits
        _kernels["probe_files"] = exactkernels.probe_files
        _kernels["sample_keep"] = exactkernels.sample_keep
        _kernels["sample_count"] = exactkernels.sample_count
        _kernels["radix_sort"] = exactkernels.radix_sort
        _kernels["bucket_sort"] = exactkernels.bucket_sort
    return _kernels


def window_set_jit(data: U8, window: int = WINDOW, base: int = BASE, shift: int = 0) -> I64:
    """:func:`window_set` by the numba kernels: a rolling hash, the sample, a sort, a mask."""
    arr = as_bytes_array(data)
    if len(arr) < window:
        return np.empty(0, dtype=np.int64)
    k = _compiled()
    out = np.empty(len(arr) - window + 1, dtype=np.uint64)
    values = k["values"](arr, window, np.uint64(base), _top_power(base, window), out).view(np.int64)
    if shift > 0:
        kept = int(k["sample_keep"](values, shift))
        values = values[:kept].copy() if kept < len(values) // 8 else values[:kept]
    sort_values(values)
    n = int(k["distinct"](values))  # in place: the distinct values first
    return values[:n] if n > len(values) - len(values) // 8 else values[:n].copy()


#: Window values sorted by the bucket kernel from this many (numpy's sort is as fast on
#: fewer: 2.1 against 2.2 us for 300 values, one core)...
BUCKET_MIN = 256
#: ... up to this many, by the radix kernel past that (the bucket kernel's counts, 8
#: bytes a bucket, leave the cache). Random values (one core, ns a value): 1,000: 5.4
#: bucket, 10.2 radix, 12.2 numpy; 4,600: 5.2, 9.0, 20.7; 20,000: 9.0, 8.7, 30.8.
BUCKET_MAX = 1 << 13
#: ... and by the radix kernel up to this many (its scratch array, 8 bytes a value,
#: beside the values: 32 MB). Rolling-hash values of real files (one core): 100 k
#: 1.2 ms against 3.7 ms for ``np.sort``, 1 M 13 ms against 50 ms. The sort was 29% of
#: the samples of a ``sif similar`` of 100 k files (py-spy, both processes), 24% of the
#: exact pass's with the radix kernel from 2,048 values.
RADIX_MAX = 1 << 22


def sort_values(values: I64) -> None:
    """Sort window values in place: the numba bucket kernel from :data:`BUCKET_MIN` values,
    the radix kernel past :data:`BUCKET_MAX` up to :data:`RADIX_MAX`, ``np.sort``
    otherwise (the same order each way)."""
    n = len(values)
    if BUCKET_MIN <= n <= BUCKET_MAX:
        _compiled()["bucket_sort"](values, np.empty_like(values))
    elif BUCKET_MAX < n <= RADIX_MAX:
        _compiled()["radix_sort"](values, np.empty_like(values))
    else:
        values.sort()


def intersection_size_jit(sa: I64, sb: I64) -> int:
    """:func:`intersection_size` by the numba kernel (a merge, or galloping when unequal)."""
    if len(sa) == 0 or len(sb) == 0:
        return 0
    return int(_compiled()["inter"](sa, sb))


class IndexedSet:
    """A sorted window set with a bucket index over its high bits, for many lookups (numba).

    For sets of fewer than 2^31 values (a file of up to 2 GB; larger ones are
    compared by a merge).

    Built in O(n) from the sorted set (about 3 ns a value); then
    :meth:`shared` with another set costs O(len(other)) lookups, where a merge
    costs O(n + len(other)): the way to compare one large file with many
    smaller ones. The Karp-Rabin values' high bits are well mixed, so a bucket
    holds about one value. A filter of 8-16 bits a value in front
    (:func:`sif.core.exactkernels.bit_filter`: two bits of one word a value)
    turns away most absent values without touching the set: on a set of 10^6
    values (past the cache), 16 ns a lookup instead of 32 with a one-bit
    bitmap (most partners share few windows), and with two bits about 2-6% of
    absent values get past it instead of 6-12%. About 11 to 14 bytes a value
    with the index and the filter.

    ``filter_bits``: the filter's size over the bucket index's, in bits (4:
    8-16 bits a value). The values may repeat (a table of several owners'
    windows, :mod:`sif.similar.smallpass`): the buckets and the filter hold.
    """

    __slots__ = ("bits", "fbits", "filter", "offsets", "values")

    def __init__(self, values: I64, filter_bits: int = 4) -> None:
        self.values = values
        self.bits = max(1, min(30, len(values).bit_length() - 1))
        self.fbits = min(34, self.bits + filter_bits)
        k = _compiled()
        self.offsets = k["offsets"](values, self.bits)
        self.filter = k["filter"](values, self.fbits)

    @classmethod
    def of_arrays(
        cls, values: I64, offsets: npt.NDArray[Any], filt: npt.NDArray[Any], bits: int, fbits: int
    ) -> IndexedSet:
        """The set made earlier (its arrays, e.g. mapped from files), without building again."""
        self = cls.__new__(cls)
        self.values, self.offsets, self.filter, self.bits, self.fbits = (
            values,
            offsets,
            filt,
            bits,
            fbits,
        )
        return self

    def __len__(self) -> int:
        return len(self.values)

    def shared(self, other: I64) -> int:
        """|self ∩ other| (``other``: distinct values, in any order)."""
        if len(other) == 0 or len(self.values) == 0:
            return 0
        k = _compiled()["count_in"]
        return int(k(self.values, self.offsets, self.bits, self.filter, self.fbits, other))


def _top_power(base: int, window: int) -> np.uint64:
    """``base^(window-1) mod 2^64``: the weight of the byte that leaves the window."""
    return np.uint64(pow(base, window - 1, 1 << 64))


__all__ = [
    "JIT_BYTES",
    "IndexedSet",
    "containment",
    "in_sample",
    "intersection_size",
    "intersection_size_jit",
    "sample_size",
    "sampled",
    "window_set",
    "window_set_jit",
]
