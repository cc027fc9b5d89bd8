"""``sif compare`` against ``diff -rq`` and ``rsync -rcn --delete`` on two real trees.

A real tree (default: the ``fs/`` subtree of the Linux sources under
``bench/data/similar/linux``) is copied to ``A``, and ``A`` to ``B`` with
known changes, drawn with a fixed seed: renames, moves into another
directory, light edits in place, edits plus a move, deletions, and added
files. Then each tool compares A with B: the wall time, and how many files
each calls different, against sif's statuses and the changes made.

``diff -rq`` and ``rsync -rcn`` go by name: a rename is one file "only in
A" and one "only in B" (rsync: sent, and deleted), an edit is "differ";
sif says ``moved``, ``changed``, ``moved+changed``. sif runs twice on one
index: cold (both trees fingerprinted), then warm (nothing changed: only a
stat walk, the digests and the queries).

    python bench/compare.py [--source DIR] [--work DIR] [--changes 25]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE / "data" / "similar" / "linux" / "linux-source-6.1" / "fs"


def make_trees(source: Path, work: Path, n: int, seed: int) -> tuple[Path, Path, Counter[str]]:
    """A (a copy of ``source``) and B (A with ``n`` changes of each kind); what was done."""
    a, b = work / "A", work / "B"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copytree(source, a, symlinks=True)
    shutil.copytree(a, b, symlinks=True)
    rng = random.Random(seed)
    files = sorted(
        p for p in b.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size > 2000
    )
    rng.shuffle(files)
    dirs = sorted({p.parent for p in files})
    done: Counter[str] = Counter()
    pick = iter(files)

    def edit(data: bytes) -> bytes:
        at = data.find(b"\n", len(data) // 2) + 1
        return data[:at] + b"/* edited by bench/compare.py */\n" + data[at:]

    for _ in range(n):
        p = next(pick)
        p.rename(p.with_name("renamed_" + p.name))
        done["rename"] += 1
        p = next(pick)
        p.rename(rng.choice([d for d in dirs if d != p.parent]) / ("moved_" + p.name))
        done["move"] += 1
        p = next(pick)
        p.write_bytes(edit(p.read_bytes()))
        done["edit"] += 1
        p = next(pick)
        data = p.read_bytes()
        p.unlink()
        (rng.choice(dirs) / ("edited_" + p.name)).write_bytes(edit(data))
        done["edit+move"] += 1
        p = next(pick)
        p.unlink()
        done["delete"] += 1
        lines = [f"added line {rng.getrandbits(64):x} {i}\n" for i in range(rng.randint(50, 400))]
        (rng.choice(dirs) / f"added_{done['add']}.txt").write_text("".join(lines))
        done["add"] += 1
    return a, b, done


def timed(cmd: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, errors="surrogateescape")
    if p.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({p.returncode}): {p.stderr.strip()[:300]}")
    return time.perf_counter() - t, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sif-bench-compare"))
    ap.add_argument("--changes", type=int, default=25, help="changes of each kind")
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    if not args.source.is_dir():
        sys.exit(f"bench/compare.py: {args.source}: not a directory (give --source)")
    a, b, done = make_trees(args.source, args.work, args.changes, args.seed)
    n_a = sum(1 for p in a.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in a.rglob("*") if p.is_file())
    print(f"A: {args.source} ({n_a:,} files, {size / 1e6:.1f} MB); B: A with {dict(done)}")
    print(f"load before: {os.getloadavg()}")

    rows = []
    t, out = timed(["diff", "-rq", str(a), str(b)])
    lines = out.splitlines()
    differ = sum(1 for x in lines if x.startswith("Files ") and x.endswith(" differ"))
    only_a = sum(1 for x in lines if x.startswith(f"Only in {a}"))
    only_b = sum(1 for x in lines if x.startswith(f"Only in {b}"))
    rows.append(("diff -rq", t, f"{differ} differ, {only_a} only in A, {only_b} only in B"))

    t, out = timed(["rsync", "-rcn", "--delete", "--out-format=%n", f"{a}/", f"{b}/"])
    lines = [x for x in out.splitlines() if x and not x.endswith("/")]
    deleting = sum(1 for x in lines if x.startswith("deleting "))
    rows.append(("rsync -rcn --delete", t, f"{len(lines) - deleting} sent, {deleting} deleted"))

    index = args.work / "index"
    sif = [sys.executable, "-m", "sif", "compare", "--index", str(index), "--format", "json", "-q"]
    for run in ("cold", "warm"):
        t, out = timed([*sif, str(a), str(b)])
        recs = [json.loads(x) for x in out.splitlines()]
        c = Counter(r["status"] for r in recs if r["record"] == "file")
        c.pop("same", None)
        rows.append(
            (f"sif compare ({run})", t, ", ".join(f"{v} {k}" for k, v in sorted(c.items())))
        )
    print(f"load after: {os.getloadavg()}")
    print()
    print("| tool | wall s | files called different |")
    print("| --- | --- | --- |")
    for name, t, what in rows:
        print(f"| {name} | {t:.2f} | {what} |")


if __name__ == "__main__":
    main()
