"""How often `--fast`'s 90% interval holds the exact score, by size of the smaller file.

    sif similar --fast --format json -o fast.json TREE...
    python bench/fast_interval.py fast.json

A script, not a test (it also checks the default mode's scores of two large files,
taken on a window sample). For every pair of the report whose score is an
estimate (``score_exact`` false), both files are read and the exact score,
max(C(A,B), C(B,A)) over all 50-byte windows (:mod:`sif.core.exactsets`, the
default mode's score), is compared with the interval ``score_low`` ..
``score_high`` that `--fast` printed. Printed per class of the smaller
file: pairs, the share inside the interval, the shares above and below it,
the mean of estimate minus exact, and the interval's median half-width.
The interval counts the sampling error of the shared fingerprints only; a
coverage far under 90% says the estimate is biased there. Files are read as
they are now (the tree must not have changed since the report) and in
their raw bytes: run it on a tree without archives or compressed files, as
Linux's sources.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from sif.core import exactsets

CLASSES = [
    ("under 256 B", 0, 256),
    ("256-1024 B", 256, 1024),
    ("1-4 KB", 1024, 4096),
    ("4-16 KB", 4096, 16384),
    ("16-64 KB", 16384, 65536),
    ("64 KB or more", 65536, 1 << 62),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", type=Path, help="a `sif similar --fast --format json` report")
    args = ap.parse_args()
    pairs = []
    with args.report.open() as f:
        for line in f:
            r = json.loads(line)
            if r.get("a") is not None and not r["score_exact"]:
                pairs.append(r)
    sets: dict[str, np.ndarray] = {}

    def window_set(path: str) -> np.ndarray:
        if path not in sets:
            if len(sets) > 4096:
                sets.clear()
            sets[path] = exactsets.window_set_jit(np.fromfile(path, dtype=np.uint8))
        return sets[path]

    rows = []
    for r in sorted(pairs, key=lambda r: (r["a"], r["b"])):
        sa, sb = window_set(r["a"]), window_set(r["b"])
        ab, ba = exactsets.containment(sa, sb, jit=True)
        exact = 100.0 * max(ab, ba)
        rows.append(
            (min(r["size_a"], r["size_b"]), r["score"], exact, r["score_low"], r["score_high"])
        )
    print(f"{args.report}: {len(rows):,} estimated pairs, each compared with its exact score")
    print(
        "| smaller file | pairs | inside the 90% interval | above | below "
        "| estimate - exact | half-width |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, lo, hi in [*CLASSES, ("all", 0, 1 << 62)]:
        sel = [x for x in rows if lo <= x[0] < hi]
        if not sel:
            continue
        n = len(sel)
        inside = sum(1 for _, _, e, a, b in sel if a - 0.01 <= e <= b + 0.01) / n
        above = sum(1 for _, _, e, _, b in sel if e > b + 0.01) / n
        below = sum(1 for _, _, e, a, _ in sel if e < a - 0.01) / n
        bias = statistics.fmean(s - e for _, s, e, _, _ in sel)
        half = statistics.median((b - a) / 2 for _, _, _, a, b in sel)
        print(
            f"| {name} | {n:,} | {inside:.1%} | {above:.1%} | {below:.1%} "
            f"| {bias:+.2f} | {half:.1f} |"
        )


if __name__ == "__main__":
    main()
