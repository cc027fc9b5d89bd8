"""The containments of two large files at one path (``sif compare``'s pass 1), read a
step at a time.

Pass 1 scores a ``changed`` file by the exact window sets of both sides, read
whole: 9 bytes a byte of each (the file, then 8 bytes a window), so two
4 GB versions of a disk image would need 72 GB. From :data:`EXACT_BYTES` of
sets, the files are read :data:`sif.core.exactsets.STEP_BYTES` at a time
instead and scored as ``sif similar`` and ``sif query`` score two large
files: on the window sample of :func:`sif.core.exactsets.sample_shift` (the
smaller file keeps at least 65,536 values), both sides' sets a few MB, the
record an estimate (``exact: false``, shown ``~``). When the smaller file is
too small for a sample (under 131,072 windows), its whole set is kept, the
larger one is streamed past it (C(small, large) exact), and the larger's
distinct windows are counted on its own sample (C(large, small) an
estimate). A file whose content repeats itself beyond its sample (under a
quarter of 65,536 values kept: a sparse file, a log of one line) has few
distinct windows: its whole set is made a step at a time, each step's
values made distinct as it comes; two such files are scored exactly, and
one against a file of many windows as a small file is (that file streams
past it). A file under one window holds none, and the other is not read. A
file whose size is not the walk's once read changed meanwhile:
:class:`Changed`.
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

#: A file: its path, (device, inode) and size as the walk saw them.
Listed = tuple[str, tuple[int, int], int]


class Changed(Exception):
    """The file's size, once read, is not the walk's: it changed during the run."""

    def __init__(self, path: str, listed: int, read: int) -> None:
        super().__init__(f"changed during the run ({read:,} bytes read, {listed:,} listed)")
        self.path = path


def changed_since(listed: int, opened: int, read: int) -> bool:
    """Whether a file listed at ``listed`` bytes, ``opened`` by fstat once opened, of which
    ``read`` bytes were read, changed since the walk. A file of size 0 that reads
    otherwise (``/proc``, ``/sys``: no size of their content) did not."""
    return opened != listed or (read != opened and opened != 0)


def _pieces(f: Listed) -> Iterator[bytes]:
    fh, st = open_regular_file(f[0], expect=f[1], buffering=0)
    read = 0
    with fh:
        while piece := fh.read(exactsets.STEP_BYTES):
            read += len(piece)
            yield piece
    if changed_since(f[2], st.st_size, read):
        raise Changed(f[0], f[2], read)


def _sampled_set(f: Listed, shift: int) -> I64:
    parts = [v[in_sample(v, shift)] for v in step_values(_pieces(f))]
    return exactsets.distinct_of(parts)


def _whole_set(f: Listed) -> I64:
    """S(f) a step at a time, each step's values made distinct as they come, and the
    steps merged whenever they hold as many values as the set so far: memory about
    twice the set's (for a file of few distinct windows, which is when it is made)."""
    held: I64 = np.empty(0, dtype=np.int64)
    parts: list[I64] = []
    waiting = 0
    for v in step_values(_pieces(f)):
        part = exactsets.distinct_of([v])
        parts.append(part)
        waiting += len(part)
        if waiting >= max(len(held), exactsets.DISTINCT_STEP):
            held = exactsets.distinct_of([held, *parts])
            parts, waiting = [], 0
    return exactsets.distinct_of([held, *parts])


def _streamed_past(ss: I64, f: Listed, shift: int) -> tuple[int, float, bool]:
    """``f`` read a step at a time past the sorted set ``ss``: |ss ∩ S(f)| exactly, and
    |S(f)|, counted on f's sample of rate ``2^-shift`` (an estimate: ``False``), or
    whole (``True``) when ``shift`` is 0 or the sample holds too few values (then its
    distinct windows are few)."""
    found = np.zeros(len(ss), dtype=bool)
    parts: list[I64] = []
    for v in step_values(_pieces(f)):
        hit = in_sorted(v, ss)
        if hit.any():
            found[np.searchsorted(ss, v[hit])] = True
        if shift:
            parts.append(v[in_sample(v, shift)])
    inter = int(np.count_nonzero(found))
    if shift:
        sample = exactsets.distinct_of(parts)
        if len(sample) >= exactsets.SAMPLE_FROM // 4:
            return inter, len(sample) * 2.0**shift, False
    return inter, float(len(_whole_set(f))), True


def large_containments(a: Listed, b: Listed) -> tuple[float, float, bool]:
    """(C(A,B), C(B,A), whether both are exact) of the files ``a`` and ``b``, read a step
    at a time. Raises :class:`Changed`, and ``OSError`` as reading does."""
    window = exactsets.WINDOW
    if min(a[2], b[2]) < window:  # one holds no window: nothing in common, nothing to read
        return 0.0, 0.0, True
    wins = [a[2] - window + 1, b[2] - window + 1]
    least = exactsets.SAMPLE_FROM // 4
    r = int(sample_shift(min(wins)))
    if r:
        sa = _sampled_set(a, r)
        sb = _sampled_set(b, r)
        few_a, few_b = len(sa) < least, len(sb) < least
        if not few_a and not few_b:
            ab, ba = exactsets.containment(sa, sb)
            return ab, ba, False
        if few_a and few_b:
            return (*exactsets.containment(_whole_set(a), _whole_set(b)), True)
        # One file repeats itself (a sparse image against the same image filled): its
        # whole set is few values; the other streams past it, counted on its sample.
        small, other, shift = (a, b, r) if few_a else (b, a, r)
    else:  # the smaller file is too small for a sample: its whole set, 1 MB at most
        small, other = (a, b) if wins[0] <= wins[1] else (b, a)
        shift = int(sample_shift(max(wins)))
    ss = _whole_set(small)
    inter, n_other, exact = _streamed_past(ss, other, shift)
    small_in, other_in = inter / max(len(ss), 1), min(1.0, inter / max(n_other, 1.0))
    return (small_in, other_in, exact) if small is a else (other_in, small_in, exact)
