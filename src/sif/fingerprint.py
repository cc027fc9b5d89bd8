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

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core import winnowc
from sif.core.anchors import ANCHOR_LENGTH, DENSITY, AnchorSet, anchor_select, learn_anchors
from sif.core.rolling import BASE, MODULUS_BITS, WINDOW, as_bytes_array
from sif.core.sampling import (
    JIT_MIN_BYTES,
    MAX_PERIOD,
    K,
    sif94_density,
    sif94_select,
    want_jit,
    winnow_density,
    winnow_select,
    winnow_window_for,
)
from sif.core.winnowc import available as compiled_winnow
from sif.errors import ConfigError, InputError
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.fileio import open_regular_file

__all__ = [
    "DEFAULT_BLOCK_SIZE",
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

SCHEMES = ("winnow", "sif94", "anchors")
#: Bump when a change of code changes the fingerprints of the same parameters.
PARAMS_VERSION = 1
#: Bytes read at a time by :func:`fingerprint_file`.
DEFAULT_BLOCK_SIZE = 1 << 20

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
BytesLike = bytes | bytearray | memoryview | npt.NDArray[np.uint8]


@dataclass(frozen=True)
class FingerprintParams:
    """What makes fingerprints: a frozen, hashable, canonical value.

    Fields that a scheme does not use are ``None``; defaults are filled in,
    so equal values give equal fingerprints. ``to_dict``/``key`` give a
    stable form to store next to fingerprints; ``from_dict`` reads it back.
    Raises :class:`ConfigError` for a bad value, before any work.

    - ``window``: ``w``, bytes per window (the paper's 50, section 2);
    - ``k``: ``sif94`` only: keep values whose low ``k`` bits are 0 (paper: 8);
    - ``modulus_bits``: ``sif94`` only: ``M = 2^bits`` (paper: 30; 31 or 32
      "if the number of files is very large");
    - ``winnow_window``: ``winnow`` only: ``W`` (default ``2^(k+1) - 1`` for
      ``k = 8``: 511); pass ``k`` to :func:`make_params` to set the density;
    - ``max_period``: ``winnow`` and ``anchors``: windows with a period of at
      most this are degenerate and never kept (default 8; 0 keeps them);
    - ``min_fingerprints``: ``sif94`` and ``winnow``: the small-file floor ``N``
      (default 0, off);
    - ``anchors_digest``: ``anchors`` only: :attr:`AnchorSet.digest`.
    """

    scheme: str = "winnow"
    window: int = WINDOW
    k: int | None = None
    modulus_bits: int | None = None
    winnow_window: int | None = None
    max_period: int | None = None
    min_fingerprints: int = 0
    anchors_digest: str | None = None
    version: int = PARAMS_VERSION

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        def unused(*names: str) -> None:
            for name in names:
                if getattr(self, name) is not None:
                    raise ConfigError(f"{name} does not apply to scheme {self.scheme!r}")

        if self.scheme not in SCHEMES:
            raise ConfigError(f"unknown scheme {self.scheme!r} (choose from {', '.join(SCHEMES)})")
        if self.version != PARAMS_VERSION:
            raise ConfigError(f"fingerprint parameters version {self.version} is not supported")
        _check_int("window", self.window, 2, 1 << 16)
        _check_int("min_fingerprints", self.min_fingerprints, 0, 100_000)
        if self.scheme == "sif94":
            unused("winnow_window", "max_period", "anchors_digest")
            put("k", K if self.k is None else self.k)
            put("modulus_bits", MODULUS_BITS if self.modulus_bits is None else self.modulus_bits)
            _check_int("modulus_bits", self.modulus_bits, 16, 64)
            _check_int("k", self.k, 0, min(24, int(self.modulus_bits or 0) - 1))
        elif self.scheme == "winnow":
            unused("modulus_bits", "anchors_digest")
            if self.k is not None:
                if self.winnow_window is not None:
                    raise ConfigError("give k or winnow_window, not both")
                _check_int("k", self.k, 1, 24)
                put("winnow_window", winnow_window_for(self.k))
                put("k", None)
            put("winnow_window", self.winnow_window or winnow_window_for(K))
            _check_int("winnow_window", self.winnow_window, 1, 1 << 25)
        else:
            unused("k", "modulus_bits", "winnow_window")
            if not self.anchors_digest:
                raise ConfigError("scheme 'anchors' needs an anchor set (--anchors FILE)")
            if self.min_fingerprints:
                raise ConfigError("min_fingerprints is not available with scheme 'anchors'")
        if self.scheme != "sif94":
            put("max_period", MAX_PERIOD if self.max_period is None else self.max_period)
            _check_int("max_period", self.max_period, 0, self.window // 2)

    @property
    def density(self) -> float | None:
        """Expected fingerprints per byte on random data (``None`` for anchors: see the set)."""
        if self.scheme == "sif94":
            return sif94_density(self.window, int(self.k or 0))
        if self.scheme == "winnow":
            return winnow_density(int(self.winnow_window or 1))
        return None

    @property
    def guaranteed_run(self) -> int | None:
        """Length of a shared run that always yields a shared fingerprint (winnow only)."""
        if self.scheme == "winnow":
            return self.window + int(self.winnow_window or 1) - 1
        return None

    def to_dict(self) -> dict[str, Any]:
        """The parameters that apply, as a plain dict with sorted keys."""
        return {k: v for k, v in sorted(asdict(self).items()) if v is not None}

    def key(self) -> str:
        """A stable one-line form: compact JSON of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FingerprintParams:
        """Read :meth:`to_dict`'s output back; ``ConfigError`` on unknown or bad fields."""
        known = {f.name for f in fields(cls)}
        extra = set(data) - known
        if extra:
            raise ConfigError(f"unknown fingerprint parameters: {', '.join(sorted(extra))}")
        return cls(**data)


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


def make_params(
    scheme: str | FingerprintParams = "winnow",
    anchors: AnchorSet | None = None,
    **params: Any,
) -> FingerprintParams:
    """Validated parameters from keyword arguments (or a ready value, then no keywords).

    For ``winnow``, ``k=K`` sets ``W = 2^(K+1) - 1`` (density ``2^-K``).
    Raises :class:`ConfigError` for a bad or missing value, or when
    ``anchors`` does not match ``anchors_digest``.
    """
    if isinstance(scheme, FingerprintParams):
        if params:
            raise ConfigError("give a FingerprintParams or keyword parameters, not both")
        result = scheme
    else:
        if scheme == "anchors" and anchors is not None:
            params.setdefault("anchors_digest", anchors.digest)
        unknown = set(params) - {f.name for f in fields(FingerprintParams)}
        if unknown:
            raise ConfigError(f"unknown fingerprint parameters: {', '.join(sorted(unknown))}")
        result = FingerprintParams(scheme=scheme, **params)
    if result.scheme == "anchors":
        if anchors is None:
            raise ConfigError("scheme 'anchors' needs the anchor set itself (anchors=...)")
        if anchors.digest != result.anchors_digest:
            raise ConfigError("the anchor set does not match the parameters' anchors_digest")
    return result


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


# --- anchor sets on disk ----------------------------------------------------------


def load_anchors(path: str | os.PathLike[str]) -> AnchorSet:
    """Read an anchor file written by :func:`save_anchors`; :class:`InputError` if unusable."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{os.fspath(path)}: cannot read anchor file: {exc}") from exc
    try:
        return AnchorSet.from_json(text)
    except ValueError as exc:
        raise InputError(f"{os.fspath(path)}: not a usable anchor file: {exc}") from exc


def save_anchors(anchors: AnchorSet, path: str | os.PathLike[str]) -> None:
    """Write ``anchors`` to ``path`` (JSON, atomically: a temporary file then a rename)."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(anchors.to_json())
    os.replace(tmp, path)


def learn_anchors_from_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    length: int = ANCHOR_LENGTH,
    density: float = DENSITY,
    sample_bytes: int = 32 << 20,
    per_file: int = 256 << 10,
    on_warning: WarningSink = ignore_warning,
    on_file: Callable[[int], None] | None = None,
) -> AnchorSet:
    """Learn an anchor set from the first ``per_file`` bytes of each of ``paths``.

    Stops after ``sample_bytes`` bytes in all. Files holding a NUL byte in
    their sample are skipped (anchors are for text); unreadable files are
    reported to ``on_warning`` and skipped; ``on_file`` gets the bytes taken
    from each file (for progress). Raises :class:`ConfigError` for bad
    parameters or when the sample gives no anchor. Cost: reading at most
    ``sample_bytes``, then :func:`sif.core.anchors.learn_anchors`.
    """
    if not 2 <= length <= 8:
        raise ConfigError("anchor length must be 2..8 bytes")
    if not 0 < density < 1:
        raise ConfigError("density must be in (0, 1)")
    samples: list[np.ndarray] = []
    total = 0
    for path in paths:
        if total >= sample_bytes:
            break
        try:
            f, _ = open_regular_file(path)  # a FIFO or a device: a warning, not a hang
            with f:
                chunk = f.read(min(per_file, sample_bytes - total))
        except OSError as exc:
            on_warning(ScanWarning(os.fspath(path), exc.strerror or str(exc)))
            continue
        if b"\0" in chunk or len(chunk) < length:
            continue
        samples.append(np.frombuffer(chunk, dtype=np.uint8))
        total += len(chunk)
        if on_file is not None:
            on_file(len(chunk))
    try:
        return learn_anchors(samples, length=length, density=density)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
