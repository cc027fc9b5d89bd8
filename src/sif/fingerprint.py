"""Approximate fingerprints of byte strings and files (Manber, section 2): the glue.

Three schemes, all over the ``w``-byte windows of the content (``w = 50``):

========  ==========================================  =========================
scheme    selection                                   density on random data
========  ==========================================  =========================
sif94     the paper's: low ``k`` bits of Karp-Rabin   ``1/(w + 2^k - 1)``
          mod ``2^30`` are 0, no overlaps             (1/305 with ``k = 8``)
winnow    winnowing over well-mixed 64-bit values,    ``2/(W + 1) = 2^-k``
          ``W = 2^(k+1) - 1`` (default)               (1/256 with ``k = 8``)
anchors   every occurrence of a learned anchor        measured when learned
========  ==========================================  =========================

``winnow`` guarantees that any shared run of ``w + W - 1`` bytes (560 by
default) holding a non-degenerate window yields a shared fingerprint. See
:mod:`sif.core.sampling` for the definitions, including degenerate windows.

Small files (section 6: "each file needs at least 10-20 fingerprints"): with
``min_fingerprints=N``, ``winnow`` shrinks its winnowing window for a file of
``m`` windows to ``max(1, m // N)`` when that is below ``W``, which guarantees
at least ``min(N, m)`` fingerprints when no window is degenerate; ``sif94``
lowers ``k`` to the largest value whose expected count reaches ``N`` (no
guarantee: mod-sampling has none). As the paper warns, a small file so
sampled may no longer be found contained in a large one. Off by default (0).

Parameters travel as a :class:`FingerprintParams` value, recorded wherever
fingerprints are stored: two values are equal exactly when they give the
same fingerprints.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.anchorfiles import learn_anchors_from_files, load_anchors, save_anchors
from sif.core import winnowc
from sif.core.anchors import AnchorSet, anchor_select
from sif.core.rolling import BASE, MODULUS_BITS, as_bytes_array
from sif.core.sampling import (
    JIT_MIN_BYTES,
    sif94_select,
    want_jit,
    winnow_select,
)
from sif.core.winnowc import available as compiled_winnow
from sif.errors import ConfigError
from sif.fileio import open_regular_file
from sif.fpparams import PARAMS_VERSION, SCHEMES, FingerprintParams, make_params

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "PARAMS_VERSION",
    "SCHEMES",
    "FingerprintParams",
    "Fingerprints",
    "fingerprint",
    "fingerprint_batch",
    "fingerprint_detail",
    "fingerprint_file",
    "fingerprint_file_detail",
    "fingerprint_reader",
    "learn_anchors_from_files",
    "load_anchors",
    "make_params",
    "save_anchors",
    "small_limit",
]

#: Bytes read at a time by :func:`fingerprint_file`.
DEFAULT_BLOCK_SIZE = 1 << 20

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
BytesLike = bytes | bytearray | memoryview | npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Fingerprints:
    """Fingerprint values and the offsets of the windows they come from (ascending)."""

    values: U64
    offsets: I64
    params: FingerprintParams


# --- the one driver for whole inputs and streams ----------------------------------


def _threshold(p: FingerprintParams) -> int:
    """Input length from which the effective parameters are the nominal ones."""
    n = max(1, p.min_fingerprints)
    if p.scheme == "winnow":
        return p.window - 1 + n * int(p.winnow_window or 1)
    if p.scheme == "sif94":
        return p.window - 1 + n * ((1 << int(p.k or 0)) + p.window - 1)
    return p.window


def _effective(p: FingerprintParams, n: int) -> int:
    """The winnowing window (winnow) or ``k`` (sif94) used for an input of ``n`` bytes."""
    m = n - p.window + 1
    if p.scheme == "winnow":
        ww = int(p.winnow_window or 1)
        if p.min_fingerprints:
            ww = min(ww, max(1, m // p.min_fingerprints))
        return max(1, min(ww, m))
    k = int(p.k or 0)
    if p.min_fingerprints:
        # Largest k' <= k whose expected count m / (2^k' + w - 1) reaches N.
        while k > 0 and m < p.min_fingerprints * ((1 << k) + p.window - 1):
            k -= 1
    return k


Fill = Callable[[memoryview], int]


#: Bytes this process fingerprinted with numpy (see :func:`_use_jit`).
_numpy_bytes = 0


def buy_jit() -> None:
    """Use numba from the next input on in this process: bulk work known to be large.

    :func:`sif.index.build_index` calls it in its workers when the files to
    read add up to more than twice :data:`sif.core.sampling.JIT_MIN_BYTES`:
    then paying numba's half second at once beats fingerprinting the first
    8 MiB with numpy first (about 0.5 s more a process).
    """
    global _numpy_bytes
    _numpy_bytes = max(_numpy_bytes, JIT_MIN_BYTES)


def _use_jit(total: int | None) -> bool:
    """numba or numpy for the next block of an input of ``total`` bytes (``None``: unknown).

    numba once its kernels are loaded, or for an input of at least
    :data:`sif.core.sampling.JIT_MIN_BYTES` (then numpy would cost more than
    loading numba), or once numpy has fingerprinted that many bytes in this
    process (rent or buy: bulk work over small files pays at most twice the
    cheaper choice). A query of a few files never imports numba. Either way
    the fingerprints are the same.
    """
    return want_jit(max(total or 0, _numpy_bytes))


def _run(
    p: FingerprintParams,
    anchors: AnchorSet | None,
    fill: Fill,
    block: int,
    size: int,
    total: int | None,
) -> tuple[U64, I64]:
    """Fingerprints of the bytes that ``fill`` writes, ``block`` at most per call.

    ``fill(view)`` writes up to ``len(view)`` bytes into ``view`` and returns
    how many (0 at the end). ``size`` is the input's length, or any length
    from :func:`_threshold` on when the input is at least that long: from
    there the effective parameters no longer depend on it. ``total`` is the
    input's length if known, for :func:`_use_jit`.

    One buffer is reused: the unfinished tail of the previous fill (fewer
    than ``w + W`` bytes) is moved to its front and the next bytes are read
    after it, so there is no copy besides the read. Each scheme consumes the
    windows it has finished with and carries state across (the non-overlap
    point of ``sif94``, the last kept offset of ``winnow``), so the result
    does not depend on how the input is cut. Memory: the buffer plus the
    selection's scratch (see :mod:`sif.core.sampling`).
    """
    w = p.window
    eff = _effective(p, size)
    buf = np.empty(block + w + (eff if p.scheme == "winnow" else 0), dtype=np.uint8)
    carried = 0  # bytes of the previous fill kept at the front of buf
    base = 0  # offset of buf[0] in the input
    next_free = 0  # sif94: first offset not covered by a kept window
    last_kept = -1  # winnow: the last offset kept
    values: list[U64] = []
    offsets: list[I64] = []
    global _numpy_bytes
    while True:
        got = fill(buf.data[carried : carried + block])
        if got == 0:
            break
        view = buf[: carried + got]
        m = len(view) - w + 1
        if m < (eff if p.scheme == "winnow" else 1):
            carried = len(view)
            continue
        fast = p.scheme == "winnow" and compiled_winnow()
        jit = fast or _use_jit(total)
        if not jit:
            _numpy_bytes += len(view)  # a benign race between threads: only a cost estimate
        if p.scheme == "winnow":
            if fast:  # compiled: no numba to load, whatever the size
                starts, vals = winnowc.winnow_select(view, w, eff, int(p.max_period or 0))
            else:
                starts, vals = winnow_select(view, w, eff, int(p.max_period or 0), jit=jit)
            starts += base
            fresh = starts > last_kept
            starts, vals = starts[fresh], vals[fresh]
            if len(starts):
                last_kept = int(starts[-1])
            done = m - eff + 1
        elif p.scheme == "sif94":
            starts, vals = sif94_select(
                view,
                w,
                eff,
                int(p.modulus_bits or MODULUS_BITS),
                first=max(0, next_free - base),
                shift=int(p.k or 0),
            )
            starts += base
            if len(starts):
                next_free = int(starts[-1]) + w
            done = m
        else:
            assert anchors is not None
            starts, vals = anchor_select(view, anchors, w, int(p.max_period or 0), jit=jit)
            starts += base
            done = m
        values.append(vals)
        offsets.append(starts)
        carried = len(view) - done
        buf[:carried] = view[done:].copy()
        base += done
    if not values:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    return np.concatenate(values), np.concatenate(offsets)


def _array_filler(data: npt.NDArray[np.uint8]) -> Fill:
    pos = 0

    def fill(view: memoryview) -> int:
        nonlocal pos
        n = min(len(view), len(data) - pos)
        np.frombuffer(view, dtype=np.uint8)[:n] = data[pos : pos + n]
        pos += n
        return n

    return fill


def _file_filler(f: Any) -> Fill:
    readinto = getattr(f, "readinto", None)

    def fill(view: memoryview) -> int:
        # A raw read may return less than asked: fill the view or reach the end.
        total = 0
        while total < len(view):
            if readinto is not None:
                n = readinto(view[total:])
            else:  # a readable with read() only
                chunk = f.read(len(view) - total)
                n = len(chunk)
                view[total : total + n] = chunk
            if not n:
                break
            total += n
        return total

    return fill


def _known_size(f: Any) -> int | None:
    """The size of ``f`` if it is a regular file on disk, else ``None`` (a stream)."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is a ValueError
        return None
    return st.st_size if st.st_size > 0 else None


def fingerprint_detail(
    data: BytesLike,
    scheme: str | FingerprintParams = "winnow",
    *,
    anchors: AnchorSet | None = None,
    **params: Any,
) -> Fingerprints:
    """Fingerprints of ``data`` with the offsets of their windows; see :func:`fingerprint`."""
    p = make_params(scheme, anchors, **params)
    arr = as_bytes_array(data)
    # Whole inputs go through the same driver as files, in blocks of bounded scratch.
    block = max(DEFAULT_BLOCK_SIZE, _threshold(p))
    values, offsets = _run(p, anchors, _array_filler(arr), block, len(arr), len(arr))
    return Fingerprints(values, offsets, p)


def fingerprint(
    data: BytesLike,
    scheme: str | FingerprintParams = "winnow",
    *,
    anchors: AnchorSet | None = None,
    **params: Any,
) -> U64:
    """The approximate fingerprints of ``data``, in the order of their windows.

    ``scheme`` is ``"winnow"`` (default), ``"sif94"`` or ``"anchors"`` (then
    ``anchors=`` an :class:`AnchorSet`), or a :class:`FingerprintParams`;
    ``params`` are the fields of :class:`FingerprintParams` (and ``k`` for
    ``winnow``). A fingerprint occurs once per window that yields it, so the
    array is a multiset (the paper's percentage counts multiplicity).
    Raises :class:`ConfigError` for bad parameters. Cost: O(len(data)),
    about 2.5 ns a byte for ``winnow`` on one core (numba; inputs under 8 MiB in a
    process that has not loaded numba use numpy, about 60 ns a byte, and never pay
    the half second of ``import numba``); memory O(len(data) / 64).
    """
    return fingerprint_detail(data, scheme, anchors=anchors, **params).values


def fingerprint_file_detail(
    path: str | os.PathLike[str],
    scheme: str | FingerprintParams = "winnow",
    *,
    anchors: AnchorSet | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    **params: Any,
) -> Fingerprints:
    """Fingerprints of the file at ``path`` with their offsets; see :func:`fingerprint_file`."""
    p = make_params(scheme, anchors, **params)
    if block_size < 1:
        raise ConfigError("block_size must be positive")
    # From the threshold on, effective parameters no longer depend on the size.
    block = max(block_size, _threshold(p))
    f, st = open_regular_file(path, buffering=0)  # a FIFO or a device is refused, not read
    with f:
        size = st.st_size
        if size < block:  # small: read it whole, its actual length decides
            arr = np.frombuffer(f.read(), dtype=np.uint8)
            values, offsets = _run(p, anchors, _array_filler(arr), block, len(arr), len(arr))
        else:
            values, offsets = _run(p, anchors, _file_filler(f), block, block, size)
    return Fingerprints(values, offsets, p)


def fingerprint_file(
    path: str | os.PathLike[str],
    scheme: str | FingerprintParams = "winnow",
    *,
    anchors: AnchorSet | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    **params: Any,
) -> U64:
    """The fingerprints of the file at ``path``, equal to ``fingerprint(whole content)``.

    The file is read in blocks of ``block_size`` bytes (raised to the
    small-file threshold when ``min_fingerprints`` needs it); windows that
    cross a block boundary are carried over, so the result is exactly that
    of the whole file read at once. Memory: O(block_size), whatever the file
    size. Raises ``OSError`` when the file cannot be read or is not a regular
    file (:class:`sif.fileio.NotRegularFile`) and :class:`ConfigError` for
    bad parameters.
    """
    return fingerprint_file_detail(
        path, scheme, anchors=anchors, block_size=block_size, **params
    ).values


def fingerprint_reader(
    f: Any,
    scheme: str | FingerprintParams = "winnow",
    *,
    anchors: AnchorSet | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    on_block: Callable[[memoryview], None] | None = None,
    **params: Any,
) -> Fingerprints:
    """Fingerprints of an open binary readable ``f``: a raw file, or any stream.

    ``f`` needs ``readinto`` or ``read``; a file on disk
    (``open(path, "rb", buffering=0)``) gives the same result as
    :func:`fingerprint_file_detail` on its path; a stream without a file
    descriptor (a decompressed archive member, ``io.BytesIO``) is read the
    same way, its length found by reading. Every block read is also handed to
    ``on_block`` (in order, exactly once per byte, before the buffer is
    reused), so that a caller computes other things over the content (a
    digest, a sample) in the same single pass. ``on_block`` must not keep
    the view. Raises ``OSError`` on a read error and :class:`ConfigError`
    for bad parameters. Memory: O(block_size), whatever the length of ``f``.
    """
    p = make_params(scheme, anchors, **params)
    if block_size < 1:
        raise ConfigError("block_size must be positive")
    block = max(block_size, _threshold(p))
    read = _file_filler(f)
    size = _known_size(f)
    head: bytes | None = None
    if size is None:
        # Unknown length: one block tells a small input (read whole) from a long one.
        buf = bytearray(block)
        head = bytes(memoryview(buf)[: read(memoryview(buf))])
        if len(head) < block:
            size = len(head)
    if size is not None and size < block:  # small: read it whole, its actual length decides
        data = _read_rest(read, size) if head is None else head
        if on_block is not None and data:
            on_block(memoryview(data))
        arr = np.frombuffer(data, dtype=np.uint8)
        values, offsets = _run(p, anchors, _array_filler(arr), block, len(arr), len(arr))
        return Fingerprints(values, offsets, p)
    pending = memoryview(head or b"")

    def fill(view: memoryview) -> int:
        nonlocal pending
        if pending:  # the block read to learn the length comes first
            n = min(len(view), len(pending))
            view[:n] = pending[:n]
            pending = pending[n:]
        else:
            n = read(view)
        if n and on_block is not None:
            on_block(view[:n])
        return n

    values, offsets = _run(p, anchors, fill, block, block, size)
    return Fingerprints(values, offsets, p)


def fingerprint_batch(
    params: FingerprintParams,
    data: npt.NDArray[np.uint8],
    starts: I64,
    ends: I64,
    anchors: AnchorSet | None = None,
) -> tuple[U64, I64]:
    """Fingerprints of each whole input ``data[starts[i]:ends[i]]``: (values, counts).

    The values of the inputs follow each other, ``counts[i]`` of input ``i``;
    each input's are exactly :func:`fingerprint` of it (every input shorter
    than :func:`small_limit`, as a small file read whole). With ``winnow``
    and numba in use (:func:`_use_jit`) the batch is one kernel call;
    otherwise one call per input. Cost: as :func:`fingerprint` of the bytes,
    without the per-input Python work (~20 us an input) when batched.
    """
    global _numpy_bytes
    n = len(starts)
    lens = ends - starts
    if n and int(lens.max()) >= small_limit(params):
        raise ValueError("fingerprint_batch takes inputs shorter than small_limit(params)")
    counts = np.zeros(n, dtype=np.int64)
    w = params.window
    fast = compiled_winnow()
    if params.scheme == "winnow" and n and (fast or _use_jit(int(lens.max()))):
        if fast:
            winnow_many = winnowc.winnow_many
        else:
            from sif.core.kernels import winnow_many

        m = lens - w + 1
        ww = np.full(n, int(params.winnow_window or 1), dtype=np.int64)
        if params.min_fingerprints:
            np.minimum(ww, np.maximum(1, m // params.min_fingerprints), out=ww)
        ww = np.maximum(1, np.minimum(ww, m))
        live = np.flatnonzero(m > 0)
        _, values, got = winnow_many(
            data, starts[live], ends[live], ww[live], w, int(params.max_period or 0), BASE
        )
        counts[live] = got
        return values, counts
    block = small_limit(params)
    parts: list[U64] = []
    for i in range(n):
        arr = data[int(starts[i]) : int(ends[i])]
        values, _ = _run(params, anchors, _array_filler(arr), block, len(arr), len(arr))
        parts.append(values)
        counts[i] = len(values)
    return (np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)), counts


def small_limit(params: FingerprintParams, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """Inputs shorter than this are read whole by :func:`fingerprint_reader` (longer: streamed)."""
    return max(block_size, _threshold(params))


def _read_rest(read: Fill, hint: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """Everything ``read`` gives until its end; ``hint``: the expected length.

    The buffer is sized by the hint (plus one byte, to see the end in one
    read): a fresh 1 MiB buffer for each small file cost more than its
    fingerprints.
    """
    parts = []
    buf = bytearray(max(hint + 1, 4096))
    while n := read(memoryview(buf)):
        parts.append(bytes(buf[:n]))
    return b"".join(parts)
