"""bench/query_scores: how far `sif query` scores are from the exact containment (issue 11).

    python bench/query_scores.py [--tree DIR ...] [--per-class 200] [--runs 5]

The tree (default: Linux's `sound/` and `net/` from bench/similar.py's
unpacked linux-source) is indexed once; then, for ``--per-class`` random
files of each size class (256-1024 B, 1-4 KB, 4-16 KB, larger), one `sif
query --format json -t 1 --by containment` process each (the default, exact,
and `--fast`), and every score it shows is compared with the exact
containment max(C(Q,B), C(B,Q)) over all 50-byte windows, computed here from
the files (numpy, :func:`sif.core.exactsets.window_set`). Printed per class:
matches shown, mean error, mean |error| and the share more than 10 points
off. Then the whole-process latency of `sif query` for a 30 KB file of the
tree (median of ``--runs``, warm cache), default and `--fast`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sif.core.exactsets import intersection_size, window_set
from similar import SIF, default_linux, files_of

CLASSES = ((256, 1024), (1024, 4096), (4096, 16384), (16384, 1 << 40))


def query(index: Path, path: str, *extra: str) -> list[dict[str, object]]:
    cmd = [SIF, "query", "--index", str(index), "--format", "json", "-t", "1"]
    out = subprocess.run(
        [*cmd, "--by", "containment", *extra, path], capture_output=True, text=True, check=False
    )
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr)
    return [json.loads(x) for x in out.stdout.splitlines()]


def truth(a: str, b: str, cache: dict[str, np.ndarray]) -> float:
    for p in (a, b):
        if p not in cache:
            cache[p] = window_set(Path(p).read_bytes())
    sa, sb = cache[a], cache[b]
    if not len(sa) or not len(sb):
        return 100.0 if Path(a).read_bytes() == Path(b).read_bytes() else 0.0
    inter = intersection_size(sa, sb)
    return 100.0 * max(inter / len(sa), inter / len(sb))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, nargs="+")
    ap.add_argument("--per-class", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    trees = args.tree or [d for d in default_linux() if d.name in ("sound", "net")]
    files = [p for t in trees for p in files_of(t)]
    size = {p: os.path.getsize(p) for p in files}
    print(f"tree: {[str(t) for t in trees]}: {len(files):,} files, load {os.getloadavg()[0]:.2f}")
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "idx"
        t0 = time.perf_counter()
        subprocess.run([SIF, "index", "-q", "--index", str(index), *map(str, trees)], check=True)
        print(f"index: {time.perf_counter() - t0:.1f} s")
        cache: dict[str, np.ndarray] = {}
        print("| mode | smaller file | queries | matches | mean error | mean abs | > 10 off |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for lo, hi in CLASSES:
            pool = [p for p in files if lo <= size[p] < hi]
            picked = rng.sample(pool, min(args.per_class, len(pool)))
            for mode, extra in (("default", []), ("--fast", ["--fast"])):
                errors = []
                for q in picked:
                    for r in query(index, q, *extra):
                        if "!/" in str(r["path"]):
                            continue  # an archive member
                        small = min(size[q], int(r["size"]))
                        if not lo <= small < hi:
                            continue  # counted in the class of its smaller file
                        errors.append(float(r["score"]) - truth(q, str(r["path"]), cache))
                e = np.array(errors)
                if len(e):
                    print(
                        f"| {mode} | {lo}-{hi if hi < 1 << 40 else 'inf'} B | {len(picked)} | "
                        f"{len(e):,} | {e.mean():+.2f} | {np.abs(e).mean():.2f} | "
                        f"{100 * (np.abs(e) > 10).mean():.1f}% |"
                    )
            cache.clear()
        q30 = min(files, key=lambda p: abs(size[p] - 30_000))
        for mode, extra in (("default", []), ("--fast", ["--fast"])):
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                query(index, q30, "-t", "50", *extra)
                times.append(time.perf_counter() - t0)
            print(
                f"sif query {mode} of {q30} ({size[q30]:,} B): median "
                f"{1000 * statistics.median(times):.0f} ms whole process "
                f"({', '.join(f'{1000 * t:.0f}' for t in times)})"
            )


if __name__ == "__main__":
    main()
