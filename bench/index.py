"""bench/index: `sif index` against `ssdeep -r` and TLSH on the same trees (issue 15).

    python bench/index.py [--tree DIR ...] [--reps 3]

Trees (default): Linux's `fs/` and `drivers/net/` from bench/similar.py's
unpacked linux-source (7,773 files, 182 MB), and /usr/share/doc (many small
files). Warm page cache; each repetition runs every tool once, in a rotating
order, from a fresh index: `sif index -j 1`, `sif index -j 2`, `ssdeep -r`
(one core, Debian's binary), and TLSH (py-tlsh, one core, reading each
file). Printed per tool: median wall and CPU seconds (user+sys of the
process tree), MB/s and files/s of wall time, the ratio to ssdeep, and for
sif the index's size as a share of the tree (every file the index keeps).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from similar import default_linux, files_of

TLSH = """
import os, sys, tlsh
for root in sys.argv[1:]:
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, 'rb') as f:
                    tlsh.hash(f.read())
"""


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (children's user+sys) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1):  # 1: done, with warnings (an unreadable file)
        raise SystemExit(f"{cmd[0]}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, nargs="+", action="append")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    linux = [d for d in default_linux() if d.name == "fs"]
    linux.append(linux[0].parent / "drivers" / "net")
    trees = args.tree or [linux, [Path("/usr/share/doc")]]
    for roots in trees:
        files = [p for r in roots for p in files_of(r)]
        size = sum(os.path.getsize(p) for p in files)
        for i in range(0, len(files), 2000):  # warm the page cache
            subprocess.run(["cat", *files[i : i + 2000]], stdout=subprocess.DEVNULL, check=False)
        print(f"\n== {[str(r) for r in roots]}: {len(files):,} files, {size / 1e6:.1f} MB")
        with tempfile.TemporaryDirectory() as tmp:
            tools = {
                "sif index -j 1": ["sif", "index", "-q", "-j", "1", "--index", f"{tmp}/i1"],
                "sif index -j 2": ["sif", "index", "-q", "-j", "2", "--index", f"{tmp}/i2"],
                "ssdeep -r": ["ssdeep", "-r"],
                "TLSH (py-tlsh)": [sys.executable, "-c", TLSH],
            }
            runs: dict[str, list[tuple[float, float]]] = {k: [] for k in tools}
            loads = []
            for rep in range(args.reps):
                names = list(tools)
                names = names[rep % len(names) :] + names[: rep % len(names)]
                for name in names:
                    for k in ("i1", "i2"):
                        subprocess.run(["rm", "-rf", f"{tmp}/{k}"], check=True)
                    runs[name].append(timed([*tools[name], *map(str, roots)]))
                loads.append(os.getloadavg()[0])
            index_bytes = sum(f.stat().st_size for f in Path(f"{tmp}/i2").rglob("*") if f.is_file())
        ref = statistics.median(w for w, _ in runs["ssdeep -r"])
        print(f"load {min(loads):.2f}-{max(loads):.2f}")
        print("| tool | wall s | CPU s | MB/s | files/s | wall vs ssdeep |")
        print("| --- | --- | --- | --- | --- | --- |")
        for name, rs in runs.items():
            wall = statistics.median(w for w, _ in rs)
            cpu = statistics.median(c for _, c in rs)
            print(
                f"| {name} | {wall:.2f} | {cpu:.2f} | {size / 1e6 / wall:.1f} | "
                f"{len(files) / wall:,.0f} | {wall / ref:.2f}x |"
            )
        print(
            f"sif's index: {index_bytes / 1e6:.1f} MB, {100 * index_bytes / size:.2f}% of the tree"
        )


if __name__ == "__main__":
    main()
