"""bench/reindex: a re-index after 1% of the files change, as a share of a full run (issue 4).

    python bench/reindex.py [--corpus DIR] [--runs N] [--in-place]

Copies ``--corpus`` (default: Python's standard library) to a scratch
directory (``--in-place``: uses it as it is, and appends to its files: give
it a copy), indexes it once in process, as ``bench/query.py`` does, then N
times appends a line to a fresh random 1% of its files and re-indexes,
printing each run and the median share.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np

from sif.index import build_index

STDLIB = Path(os.path.dirname(os.__file__))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=STDLIB)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--in-place", action="store_true", help="change the corpus itself")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sif-bench-reindex-", dir=args.work))
    try:
        corpus = args.corpus
        if not args.in_place:
            corpus = work / "corpus"
            shutil.copytree(
                args.corpus,
                corpus,
                ignore=shutil.ignore_patterns("site-packages", "__pycache__"),
                symlinks=True,
            )
        idx = work / "idx"
        full = build_index([corpus], idx)
        print(f"full run: {full.new:,} files, {full.bytes_read / 1e6:.1f} MB, {full.seconds:.2f} s")
        files = sorted(p for p in corpus.rglob("*") if p.is_file() and not p.is_symlink())
        rng = np.random.default_rng(1)
        shares = []
        for run in range(args.runs):
            for i in rng.choice(len(files), max(1, len(files) // 100), replace=False):
                with open(files[i], "ab") as f:
                    f.write(b"\n# changed\n")
            inc = build_index([corpus], idx)
            shares.append(inc.seconds / full.seconds)
            print(
                f"run {run + 1}: {inc.changed} changed, {inc.bytes_read / 1e6:.1f} MB read, "
                f"{inc.seconds:.3f} s = {100 * shares[-1]:.1f}%"
            )
        print(f"median: {100 * statistics.median(shares):.1f}% of a full run")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
