"""bench/index: `sif index` against `ssdeep -r` and TLSH on the same trees (issue 15).

    python bench/index.py [--linux DIR] [--tree DIR ...] [--reps 3] [--work DIR]

Trees (default): Linux's `fs/` and `drivers/net/` from bench/similar.py's
unpacked linux-source (7,773 files, 172 MB; ``--linux`` names the unpacked
``linux-source-X`` directory), /usr/share/doc (4,800 files, a third of them
gzip'ed: sif indexes their decompressed content), and a tree of small files
made here (``small/``: 20,000 pieces of 200 B - 4 KB cut from the Linux
sources, 50 per directory; deterministic). Warm page cache; sif's modules
compiled to bytecode first (PYTHONDONTWRITEBYTECODE may be set); the tree is read
again (``cat``) before every run. Each
repetition runs every tool once, in a rotating order, from a fresh index:
`sif index -j 1`, `sif index -j 2`, `ssdeep -r` (one core, Debian's binary),
and TLSH (py-tlsh, one core, reading each file). Printed per tool: median
wall and CPU seconds (user+sys of the process tree), MB/s and files/s of
wall time, the throughput ratio to ssdeep and TLSH, the 1-minute load; for
sif the index's size as a share of the tree (every file the index keeps),
split into fingerprint rows, per-file records and paths, and the catalog.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from similar import SIF, default_linux, files_of

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

SMALL_FILES = 20_000
PER_DIR = 50


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (children's user+sys) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    # sif's 1: done, with warnings (an unreadable file); any other tool's (a Python
    # traceback: py-tlsh not installed) is a failure, not a 0.01 s run.
    if done.returncode not in ((0, 1) if cmd[0] == SIF else (0,)):
        raise SystemExit(f"{cmd[0]}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def small_tree(root: Path, sources: list[str]) -> Path:
    """``root/small``: SMALL_FILES pieces of real source text, 200 B to 4 KB (made once)."""
    out = root / "small"
    done = root / "small.done"
    if done.exists():
        return out
    n = 0
    for path in sources:
        data = Path(path).read_bytes()
        pos, k = 0, 0
        while pos < len(data) and n < SMALL_FILES:
            size = 200 + (n * 2654435761 + k) % 3800
            piece = data[pos : pos + size]
            pos += size
            k += 1
            if len(piece) < 200:
                break
            d = out / f"d{n // PER_DIR:04d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{n % PER_DIR:02d}.c").write_bytes(piece)
            n += 1
        if n >= SMALL_FILES:
            break
    done.write_bytes(b"")
    return out


def index_parts(idx: Path) -> dict[str, int]:
    """Bytes the index keeps, by what they hold."""
    parts = {"fingerprint rows": 0, "file records + paths": 0, "catalog": 0, "other": 0}
    for f in idx.rglob("*"):
        if not f.is_file():
            continue
        size = f.stat().st_size
        if f.name in ("fp.npy", "fid.npy", "offsets.npy"):
            parts["fingerprint rows"] += size
        elif f.parent.parent.name == "segments":
            parts["file records + paths"] += size
        elif f.name.startswith("catalog"):
            parts["catalog"] += size
        else:
            parts["other"] += size
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--linux", type=Path, help="the unpacked linux-source-X directory")
    ap.add_argument("--tree", type=Path, nargs="+", action="append")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (the small tree)")
    args = ap.parse_args()
    import sif

    compileall.compile_dir(os.path.dirname(sif.__file__), quiet=1)
    top = args.linux or default_linux()[0].parent
    linux = [top / "fs", top / "drivers" / "net"]
    work = Path(args.work or tempfile.gettempdir()) / "sif-bench-index"
    work.mkdir(parents=True, exist_ok=True)
    small = small_tree(work, files_of(top / "fs"))
    trees = args.tree or [linux, [Path("/usr/share/doc")], [small]]
    for roots in trees:
        files = [p for r in roots for p in files_of(r)]
        size = sum(os.path.getsize(p) for p in files)

        def warm(files: list[str] = files) -> None:
            """The tree read into the page cache, before every run: this VM's reclaim
            (DAMON) drops page cache unused for seconds, and a tree warmed only once
            was partly read from disk by later runs (sif -j 2 on the Linux files: 0.82
            s, then 1.13 s with 1.72 CPU s against 1.30)."""
            for i in range(0, len(files), 2000):
                subprocess.run(
                    ["cat", *files[i : i + 2000]], stdout=subprocess.DEVNULL, check=False
                )

        print(f"\n== {[str(r) for r in roots]}: {len(files):,} files, {size / 1e6:.1f} MB")
        with tempfile.TemporaryDirectory() as tmp:
            tools = {
                "sif index -j 1": [SIF, "index", "-q", "-j", "1", "--index", f"{tmp}/i1"],
                "sif index -j 2": [SIF, "index", "-q", "-j", "2", "--index", f"{tmp}/i2"],
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
                    warm()
                    runs[name].append(timed([*tools[name], *map(str, roots)]))
                    loads.append(os.getloadavg()[0])
                    if name == "sif index -j 2":  # the next tool's turn removes it
                        parts = index_parts(Path(f"{tmp}/i2"))
        index_bytes = sum(parts.values())
        ref = statistics.median(w for w, _ in runs["ssdeep -r"])
        tlsh = statistics.median(w for w, _ in runs["TLSH (py-tlsh)"])
        print(f"load (1 min) {min(loads):.2f}-{max(loads):.2f}")
        print("| tool | wall s | CPU s | MB/s | files/s | throughput vs ssdeep | vs TLSH |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, rs in runs.items():
            wall = statistics.median(w for w, _ in rs)
            cpu = statistics.median(c for _, c in rs)
            print(
                f"| {name} | {wall:.2f} | {cpu:.2f} | {size / 1e6 / wall:.1f} | "
                f"{len(files) / wall:,.0f} | {ref / wall:.2f}x | {tlsh / wall:.2f}x |"
            )
        split = ", ".join(f"{k} {100 * v / size:.2f}%" for k, v in parts.items() if v)
        print(
            f"sif's index: {index_bytes / 1e6:.2f} MB, {100 * index_bytes / size:.2f}% of the "
            f"tree ({split})"
        )


if __name__ == "__main__":
    main()
