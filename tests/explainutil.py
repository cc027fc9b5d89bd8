"""Constructed pairs with known shared passages, for the tests of sif explain."""

from __future__ import annotations

from pathlib import Path

import sif
from textgen import text

W = 50


def spliced(tmp: Path) -> tuple[Path, Path, list[tuple[int, int, int]]]:
    """A: a real text. B: another text with two passages of A spliced in at known offsets,
    P1 twice, P2 (from later in A) before P1: (a_start, b_start, length) of each."""
    a = text(101, 40_000)
    other = text(202, 30_000)
    p1 = a[4_000:6_500]  # 2,500 bytes
    p2 = a[20_000:21_200]  # 1,200 bytes, placed before P1 in B: reordered
    b = other[:3_000] + p2 + other[3_000:9_000] + p1 + other[9_000:15_000] + p1 + other[15_000:]
    o2 = 3_000
    o1 = o2 + len(p2) + 6_000
    o1b = o1 + len(p1) + 6_000
    (tmp / "a.txt").write_bytes(a)
    (tmp / "b.txt").write_bytes(b)
    expected = [(4_000, o1, len(p1)), (4_000, o1b, len(p1)), (20_000, o2, len(p2))]
    return tmp / "a.txt", tmp / "b.txt", expected


def close(p: sif.Passage, want: tuple[int, int, int]) -> bool:
    a, b, n = want
    return (
        abs(p.a_start - a) < W
        and abs(p.b_start - b) < W
        and abs(p.a_end - (a + n)) < W
        and abs(p.b_end - (b + n)) < W
    )
