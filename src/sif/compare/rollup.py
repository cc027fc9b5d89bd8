"""The directory roll-up of ``sif compare``: how much of each directory the other side holds.

For each directory of A (recursively, ``.`` the root), its bytes, the bytes
of them present anywhere in B (identical or similar: each file's size
weighted by its containment in its partner), and the B directory that holds
most of it: the deepest one holding over half of what B holds of it. The
same for B. Cost: one step per file and ancestor on each side, and per
partner's ancestor.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterator, Sequence

from sif.compare.model import DirectoryShare, FileComparison


def ancestors(rel: str) -> Iterator[str]:
    """The directories holding ``rel``, deepest first, ending with ``.`` (the root)."""
    d = posixpath.dirname(rel)
    while d:
        yield d
        d = posixpath.dirname(d)
    yield "."


def _side(records: Sequence[FileComparison], side: str) -> tuple[DirectoryShare, ...]:
    total: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    present: dict[str, float] = defaultdict(float)
    held: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    sizes: dict[str, int] = {}
    parts: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for r in records:
        own, other = (r.a, r.b) if side == "a" else (r.b, r.a)
        if own is None:
            continue
        sizes[own] = (r.size_a if side == "a" else r.size_b) or 0
        share = r.share_a if side == "a" else r.share_b
        if other is not None and share > 0:
            parts[own].append((other, share))
    for own, size in sizes.items():
        for d in ancestors(own):
            total[d] += size
            count[d] += 1
        # A file named by several records (a file of B holding one of A and another
        # appended to it): the shares add up, to at most the whole file.
        left = 1.0
        for other, share in sorted(parts.get(own, ()), key=lambda p: -p[1]):
            share = min(share, left)
            left -= share
            if share <= 0:
                break
            w = size * share
            others = list(ancestors(other))
            for d in ancestors(own):
                present[d] += w
                h = held[d]
                for e in others:
                    h[e] += w
    out = []
    for d in sorted(total):
        best = None
        if present[d] > 0:
            half = present[d] / 2
            depth = -1
            for e, v in held[d].items():
                n = 0 if e == "." else e.count("/") + 1
                if v > half and (n > depth or (n == depth and best is not None and e < best)):
                    best, depth = e, n
        out.append(DirectoryShare(side, d, count[d], total[d], present[d], best))
    return tuple(out)


def rollup(records: Sequence[FileComparison]) -> tuple[DirectoryShare, ...]:
    """Every directory of A, then every directory of B, with its share on the other side."""
    return _side(records, "a") + _side(records, "b")
