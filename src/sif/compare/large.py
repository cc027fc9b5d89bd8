"""The containments of two large files at one path (``sif compare``'s pass 1), read a
step at a time.

Pass 1 scores a ``changed`` file by the exact window sets of both sides, read
whole: 9 bytes a byte of each (the file, then 8 bytes a window), so two
4 GB versions of a disk image would need 72 GB. From :data:`EXACT_BYTES` of
sets, the files are read :data:`sif.core.exactsets.STEP_BYTES` at a time
instead and scored as ``sif similar`` and ``sif query`` score two large
files: on the window sample of :func:`sif.core.exactsets.sample_shift` (the
smaller file keeps at least 65,536 values), both sides' sets a few MB. When
the smaller file is too small for a sample (under 131,072 windows), its
whole set is kept, the larger one is streamed past it (C(small, large)
exact), and the larger's distinct windows are counted on its own sample
(C(large, small) an estimate). Either way the record is an estimate
(``exact: false``, shown ``~``). A file whose content repeats itself beyond
its sample (under a quarter of 65,536 values kept) is scored exactly as
before: few distinct windows make a small set.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from sif.core import exactsets
from sif.core.exactsets import I64, in_sample, sample_shift, step_values
from sif.core.windows import in_sorted
from sif.fileio import open_regular_file

#: Window sets of two files at one path above this many bytes together (8 bytes a
#: window: two files of 16 MB) are taken a step at a time, on a sample.
EXACT_BYTES = 256 << 20


def _pieces(path: str, expect: tuple[int, int]) -> Iterator[bytes]:
    fh, _ = open_regular_file(path, expect=expect, buffering=0)
    with fh:
        while piece := fh.read(exactsets.STEP_BYTES):
            yield piece


def _sampled_set(path: str, expect: tuple[int, int], shift: int) -> I64:
    parts = [v[in_sample(v, shift)] for v in step_values(_pieces(path, expect))]
    return exactsets.distinct_of(parts)


def large_containments(
    a: tuple[str, tuple[int, int], int], b: tuple[str, tuple[int, int], int]
) -> tuple[float, float] | None:
    """(C(A,B), C(B,A)) of the files ``a`` and ``b`` (each its path, (device, inode)
    and size), read a step at a time; estimates. ``None`` where a sample holds too
    few values to tell (the caller scores the pair exactly: its sets are small).
    Raises ``OSError`` as reading does."""
    window = exactsets.WINDOW
    wins = [max(a[2] - window + 1, 1), max(b[2] - window + 1, 1)]
    least = exactsets.SAMPLE_FROM // 4
    r = int(sample_shift(min(wins)))
    if r:
        sa = _sampled_set(a[0], a[1], r)
        sb = _sampled_set(b[0], b[1], r)
        if min(len(sa), len(sb)) < least:
            return None
        return exactsets.containment(sa, sb)
    small, large = (a, b) if wins[0] <= wins[1] else (b, a)
    rl = int(sample_shift(max(wins)))
    fh, _ = open_regular_file(small[0], expect=small[1])
    with fh:
        ss = exactsets.window_set(fh.read(), window, jit=False)
    found = np.zeros(len(ss), dtype=bool)
    parts: list[I64] = []
    for v in step_values(_pieces(large[0], large[1])):
        hit = in_sorted(v, ss)
        if hit.any():
            found[np.searchsorted(ss, v[hit])] = True
        parts.append(v[in_sample(v, rl)] if rl else v)
    sl = exactsets.distinct_of(parts)
    if len(ss) == 0 or len(sl) < (least if rl else 1):
        return None
    inter = int(np.count_nonzero(found))
    small_in_large = inter / len(ss)
    large_in_small = min(1.0, inter / (len(sl) * 2.0**rl))
    return (small_in_large, large_in_small) if small is a else (large_in_small, small_in_large)
