"""Front coding of a segment's paths (from :mod:`sif.index.segments`).

A segment stores its files' paths in ``paths.bin`` front-coded: each path
without the first ``lcp`` bytes it shares with the path before it (``lcp`` in
``paths_lcp.npy``, one ``uint8`` a path), every :data:`PATH_BLOCK`-th path
whole, so that one path is rebuilt from at most that many suffixes
(:meth:`sif.index.segments.Segment.path`). Files of one directory follow each
other, so a path costs its name plus a few bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

try:
    from sif.index import _frontc
except ImportError:  # not built: the Python loop (_front_code_py)
    _frontc = None

__all__ = ["MAX_LCP", "PATH_BLOCK", "front_code"]

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

#: Every this many paths of a segment one is stored whole (front coding restarts).
PATH_BLOCK = 64
#: Longest shared prefix that front coding records (it fits a ``uint8``).
MAX_LCP = 255


def front_code(paths: bytes, offsets: I64) -> tuple[bytes, U8, npt.NDArray[Any]]:
    """Front-code the paths ``paths[offsets[i]:offsets[i + 1]]``: (suffixes, lcp, offsets).

    ``lcp[i]`` bytes of path ``i`` are those of path ``i - 1`` (0 for every
    :data:`PATH_BLOCK`-th path; at most :data:`MAX_LCP`); the suffixes follow
    each other, their offsets as ``uint32`` when they fit. Cost: one pass in C
    (``sif.index._frontc``, 2-3 ms for 100 k paths) where it is built, else
    :func:`_front_code_py` (~80 ms: a Python slice or two a path).
    """
    if _frontc is None:
        return _front_code_py(paths, offsets)
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    suffixes, lcp_bytes = _frontc.front_code(paths, offs, PATH_BLOCK, MAX_LCP)
    lcp = np.frombuffer(lcp_bytes, dtype=np.uint8)
    out = np.zeros(len(lcp) + 1, dtype=np.int64)
    np.cumsum(np.diff(offs) - lcp, out=out[1:])
    if out[-1] < 1 << 32:
        return suffixes, lcp, out.astype(np.uint32)
    return suffixes, lcp, out


def _front_code_py(paths: bytes, offsets: I64) -> tuple[bytes, U8, npt.NDArray[Any]]:
    """:func:`front_code` without the extension: a compare of the first
    :data:`MAX_LCP` bytes of neighbours (numpy, in chunks of 64k paths), a join of
    the suffixes."""
    n = len(offsets) - 1
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    lens = np.diff(np.asarray(offsets, dtype=np.int64))
    items = [paths[a:b] for a, b in zip(starts.tolist(), offsets[1:].tolist(), strict=True)]
    lcp = np.zeros(n, dtype=np.int64)
    chunk = 1 << 16
    for lo in range(1, n, chunk):
        part = items[lo - 1 : lo + chunk]
        m = np.frombuffer(
            b"".join(p[:MAX_LCP].ljust(MAX_LCP, b"\0") for p in part), dtype=np.uint8
        ).reshape(-1, MAX_LCP)
        eq = m[1:] == m[:-1]
        first = np.where(eq.all(axis=1), MAX_LCP, eq.argmin(axis=1))
        cap = np.minimum(lens[lo - 1 : lo - 1 + len(first)], lens[lo : lo + len(first)])
        lcp[lo : lo + len(first)] = np.minimum(first, cap)
    lcp[::PATH_BLOCK] = 0
    suffixes = b"".join(p[k:] for p, k in zip(items, lcp.tolist(), strict=True))
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens - lcp, out=out[1:])
    if out[-1] < 1 << 32:
        return suffixes, lcp.astype(np.uint8), out.astype(np.uint32)
    return suffixes, lcp.astype(np.uint8), out
