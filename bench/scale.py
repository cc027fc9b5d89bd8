"""Scale benchmark (issue 15): `sif dupes`, `sif index`, `sif similar` at 100 k and 1 M files.

A script, not a timed test. Two parts:

``generate``  a deterministic tree of real-looking files: slices of real texts
              shipped on this machine (/usr/share/doc, this Python's standard
              library, and the Linux sources if given), each slice edited (a few
              lines replaced by lines of other texts), 10 files per directory,
              each named as its source text. About 2% of the files are exact copies
              of an earlier file, 1% verbatim copies of one of 200 common texts
              (licences, READMEs: the large replica groups), and 5% are
              near-duplicates (an earlier file with a few lines edited). The
              same sources, seed and count give the same bytes; a digest of the
              pool is kept in the tree's ``.scale.json``.
``run``       times each command on a tree (warm: every file of the tree is
              read with ``cat`` before each command; ``--cold`` empties the page
              cache before each command instead, for a ratio between a tree the
              cache holds and one it cannot): ``sif dupes``, ``sif index`` (fresh index),
              an incremental ``sif index`` after 1% of the files changed (a line
              appended to every 100th file; the files are truncated back after),
              and ``sif similar`` (fresh index of its own: the whole job). For
              each: wall and CPU seconds (user+sys of the whole process tree,
              from wait4), and the peak memory, polled every 10 ms from /proc:
              the largest sum of RSS over the process tree (``rss_sum``: counts
              pages a forked worker shares with its parent twice), the same with
              PSS (``pss_sum``: shared pages divided among their users; read
              every 0.1 s, as it costs the tool: ``dupes.PSS_EVERY``), and the
              largest single process's VmHWM. The target (issue 15) is read on
              ``rss_sum``, the stricter of the two.

    python bench/scale.py generate --files 100000 --root /work/scale/100k \\
        --linux bench/data/similar/linux/linux-source-6.1
    python bench/scale.py run --root /work/scale/100k
    python bench/scale.py compare /work/scale/100k /work/scale/1m   # the ratios, from run's JSON

The trees and indexes live outside the repository (``--root``); each run's
figures go to ``ROOT.run.json`` beside the tree, or with ``--work DIR`` (the
indexes and outputs there) beside ``DIR``. ``--commands index-full`` times a
fresh index only and leaves the tree untouched; ``index`` also appends to 1% of
the files for the incremental run (and truncates them back).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dupes import Sample, run_measured, sif_binary

FILES_PER_DIR = 10
POOL_FILES = 6000
"""Source texts drawn into the pool (the rest of the machine's texts are not read)."""
COMMON = 200
"""Texts of the pool that are copied verbatim (licences, READMEs: big replica groups)."""
MAX_SOURCE = 256 * 1024
SHARE_COPY, SHARE_COMMON, SHARE_NEAR = 0.02, 0.01, 0.05
CHANGED_EVERY = 100
"""The incremental run changes every 100th file: 1%."""
CHANGE = b"\n/* changed for the incremental run */\n"


# ---------------------------------------------------------------------------
# generate


def _texts(dirs: list[Path], suffixes: tuple[str, ...] | None) -> list[Path]:
    out = []
    for top in dirs:
        for dirpath, dirnames, files in os.walk(top):
            dirnames.sort()
            for f in sorted(files):
                p = Path(dirpath, f)
                if suffixes is None or p.suffix in suffixes:
                    out.append(p)
    return out


def source_pool(seed: int, linux: Path | None) -> tuple[list[list[bytes]], list[str], str]:
    """``POOL_FILES`` real texts as lists of lines, drawn with ``seed``; their names and digest."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    cands = _texts([Path("/usr/share/doc")], (".txt", ".md", ".rst", ""))
    cands += _texts([stdlib], (".py",))
    if linux is not None:
        cands += _texts([linux], (".c", ".h", ".txt", ".rst"))
    rng = random.Random(seed)
    rng.shuffle(cands)
    pool: list[list[bytes]] = []
    names: list[str] = []
    h = hashlib.sha256()
    for p in cands:
        if len(pool) >= POOL_FILES:
            break
        try:
            if p.is_symlink() or not p.is_file() or not 64 <= p.stat().st_size <= MAX_SOURCE:
                continue
            data = p.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:4096]:
            continue  # not text
        lines = data.splitlines(keepends=True)
        if len(lines) < 3:
            continue
        pool.append(lines)
        names.append(p.name)
        h.update(p.name.encode("utf-8", "surrogateescape") + b"\0" + data)
    if len(pool) < COMMON * 2:
        raise SystemExit(f"only {len(pool)} texts found for the pool")
    return pool, names, h.hexdigest()


def leaf_dir(root: Path, j: int, depth: int) -> Path:
    """Directory ``j`` of the tree: its decimal digits as nested directory names."""
    digits = str(j).zfill(depth)
    return root.joinpath(*(f"p{d}" for d in digits))


class Tape:
    """The pool's texts read once each, in turn, then again under another letter cipher.

    A unique file is the next run of lines of the tape, so two unique files
    share no passage (beyond lines that are the same in many texts): the tree
    holds as many similar pairs a file at 1 M files as at 100 k. Once the
    whole pool has been read, the next pass maps every letter through a new
    seeded permutation of a-z (the same for A-Z): the texts keep their lines,
    words, indentation and punctuation, and their bytes are new. (Version 2
    of the tree cut each file at a random place of a random text: at 100 k
    files each text was cut ~16 times, at 1 M ~160 times, and the similar
    pairs grew with the square of the tree; ``--dense`` makes that tree.)
    """

    def __init__(self, pool: list[list[bytes]], seed: int):
        self.pool, self.seed = pool, seed
        self.k, self.i, self.round = COMMON, 0, 0
        self.table = bytes(range(256))

    def _next_round(self) -> None:
        self.round += 1
        letters = list("abcdefghijklmnopqrstuvwxyz")
        random.Random(self.seed * 1_000_003 + self.round).shuffle(letters)
        lower = "".join(letters)
        self.table = bytes.maketrans(
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
            (lower + lower.upper()).encode(),
        )

    def take(self, want: int) -> tuple[list[bytes], int]:
        """The next lines of the tape, about ``want`` bytes, and the text they began in."""
        out: list[bytes] = []
        first, size = self.k, 0
        while size < want:
            src = self.pool[self.k]
            if self.i >= len(src):
                self.k, self.i = self.k + 1, 0
                if self.k >= len(self.pool):
                    self.k = COMMON
                    self._next_round()
                continue
            line = src[self.i].translate(self.table) if self.round else src[self.i]
            out.append(line)
            size += len(line)
            self.i += 1
        return out, first


def _slice(rng: random.Random, pool: list[list[bytes]]) -> tuple[list[bytes], int]:
    """Lines of a real text, about a log-normal size (median ~2.5 KB), and its index."""
    k = rng.randrange(COMMON, len(pool))
    src = pool[k]
    want = min(int(rng.lognormvariate(7.8, 1.1)) + 40, MAX_SOURCE)
    start = rng.randrange(len(src))
    out: list[bytes] = []
    size = 0
    i = start
    while size < want:
        if i >= len(src):  # the text ran out: carry on in another
            src, i = pool[rng.randrange(COMMON, len(pool))], 0
        out.append(src[i])
        size += len(src[i])
        i += 1
    return out, k


def _edit(rng: random.Random, lines: list[bytes], pool: list[list[bytes]], n: int) -> None:
    """Replace or insert ``n`` lines with lines of other texts, in place."""
    for _ in range(n):
        other = pool[rng.randrange(len(pool))]
        line = other[rng.randrange(len(other))]
        pos = rng.randrange(len(lines) + 1)
        if pos < len(lines) and rng.random() < 0.7:
            lines[pos] = line
        else:
            lines.insert(pos, line)


def generate(root: Path, files: int, seed: int, linux: Path | None, dense: bool = False) -> None:
    pool, src_names, pool_digest = source_pool(seed, linux)
    params = {"files": files, "seed": seed, "pool": pool_digest, "version": 2 if dense else 3}
    tape = Tape(pool, seed)
    marker = root / ".scale.json"
    if marker.exists() and json.loads(marker.read_text()) == params:
        print(f"{root}: up to date")
        return
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rng = random.Random(seed)
    n_dirs = (files + FILES_PER_DIR - 1) // FILES_PER_DIR
    depth = len(str(max(n_dirs - 1, 1)))
    t0 = time.monotonic()
    kinds = {"unique": 0, "copy": 0, "common": 0, "near": 0}
    total = 0
    for j in range(n_dirs):
        d = leaf_dir(root, j, depth)
        d.mkdir(parents=True, exist_ok=True)
        used: set[str] = set()
        for i in range(j * FILES_PER_DIR, min(files, (j + 1) * FILES_PER_DIR)):
            x = rng.random()
            if i > 0 and x < SHARE_COPY:
                kind = "copy"
                path = _earlier(root, rng, i, depth)
                data, name = path.read_bytes(), path.name
            elif x < SHARE_COPY + SHARE_COMMON:
                kind = "common"
                k = rng.randrange(COMMON)
                data = b"".join(pool[k])
                name = src_names[k]
            elif i > 0 and x < SHARE_COPY + SHARE_COMMON + SHARE_NEAR:
                kind = "near"
                path = _earlier(root, rng, i, depth)
                lines = path.read_bytes().splitlines(keepends=True)
                _edit(rng, lines, pool, 1 + rng.randrange(3))
                data, name = b"".join(lines), path.name
            else:
                kind = "unique"
                if dense:
                    lines, k = _slice(rng, pool)
                else:
                    want = min(int(rng.lognormvariate(7.8, 1.1)) + 40, MAX_SOURCE)
                    lines, k = tape.take(want)
                _edit(rng, lines, pool, 1 + rng.randrange(3))
                data = b"".join(lines)
                name = src_names[k]
            kinds[kind] += 1
            base, n = name, 1
            while name in used:
                n += 1
                stem, dot, ext = base.rpartition(".")
                name = f"{stem}-{n}.{ext}" if dot and stem else f"{base}-{n}"
            used.add(name)
            with open(d / name, "wb") as f:
                f.write(data)
            total += len(data)
        if (j + 1) % 10000 == 0:
            done = (j + 1) * FILES_PER_DIR
            rate = done / (time.monotonic() - t0)
            print(f"  {done:,} files, {total / 1e6:.0f} MB, {rate:,.0f} files/s", flush=True)
    marker.write_text(json.dumps(params))
    print(
        f"{root}: {files:,} files in {n_dirs:,} directories, {total / 1e6:.1f} MB, "
        f"{kinds} ({time.monotonic() - t0:.0f} s)"
    )


def _earlier(root: Path, rng: random.Random, i: int, depth: int) -> Path:
    """A file written before file ``i``, chosen with ``rng``."""
    while True:
        j = rng.randrange(i)
        d = leaf_dir(root, j // FILES_PER_DIR, depth)
        names = sorted(os.listdir(d))
        if names:
            return d / names[j % len(names)]


# ---------------------------------------------------------------------------
# run


def changed_files(root: Path) -> list[Path]:
    """Every ``CHANGED_EVERY``-th file of the tree, in walk order (sorted)."""
    out = []
    k = 0
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for f in sorted(files):
            if f.startswith(".scale"):
                continue
            if k % CHANGED_EVERY == CHANGED_EVERY // 3:
                out.append(Path(dirpath, f))
            k += 1
    return out


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def drop_caches() -> None:
    """Empty the page cache (root only): each command then reads the tree from disk.

    For a fair ratio between a tree that stays cached and one that cannot: on a
    machine that pages out cache unused for a few seconds (DAMON reclaim), a
    4.6 GB tree read first to warm it is read from disk again by the command.
    """
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        raise SystemExit(
            f"--cold: cannot drop the page cache ({exc.strerror}; needs root)"
        ) from None


def warm(root: Path) -> None:
    """Every file under ``root`` read into the page cache (and its inodes into the
    inode cache), before every warm run: this VM's reclaim (DAMON) drops page cache
    unused for seconds, and runs after other work read part of the tree from disk
    (a fresh index of 1 M files: 51-59 s so, 43.8-43.9 s after a ``cat``)."""
    find = subprocess.Popen(["find", str(root), "-type", "f", "-print0"], stdout=subprocess.PIPE)
    subprocess.run(
        ["xargs", "-0", "cat"], stdin=find.stdout, stdout=subprocess.DEVNULL, check=False
    )
    assert find.stdout is not None
    find.stdout.close()
    find.wait()


def measure(
    name: str, argv: list[str], work: Path, cold: bool = False, root: Path | None = None
) -> dict[str, object]:
    out, err = work / f"{name}.stdout", work / f"{name}.stderr"
    if cold:
        drop_caches()
    elif root is not None:
        warm(root)
    s: Sample = run_measured(argv, out, err)
    row: dict[str, object] = {
        "command": name,
        "argv": argv,
        **asdict(s),
        "load": _load(),
        "cache": "cold" if cold else "warm",
    }
    if s.rc not in (0, 1):
        row["error"] = err.read_text(errors="replace")[-2000:]
    print(
        f"  {name:18s} wall {s.wall:8.2f} s  cpu {s.cpu:8.2f} s  rss_sum {s.rss_sum / 1e6:7.1f} MB"
        f"  pss_sum {s.pss_sum / 1e6:7.1f} MB  maxrss {s.maxrss / 1e6:6.1f} MB  rc {s.rc}"
        f"  load {row['load']}",
        flush=True,
    )
    return row


def run(root: Path, commands: list[str], work: Path | None = None, cold: bool = False) -> None:
    root = root.resolve()
    if not (root / ".scale.json").exists():
        raise SystemExit(f"{root}: no generated tree (run generate first)")
    params = json.loads((root / ".scale.json").read_text())
    if work is None:
        work = root.parent / f"{root.name}.work"
    work = work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    sif = sif_binary()
    import compileall

    import sif as sif_pkg

    compileall.compile_dir(os.path.dirname(sif_pkg.__file__), quiet=1)
    print(f"{root}: {params['files']:,} files; load {_load()}")
    rows = []
    index = work / "index"
    if "dupes" in commands:
        rows.append(
            measure(
                "dupes",
                [sif, "dupes", "-q", "--format", "fdupes", str(root)],
                work,
                cold,
                root,
            )
        )
    if "index" in commands or "index-full" in commands:
        rows.append(
            measure(
                "index",
                [sif, "index", "-q", "--index", str(index), str(root)],
                work,
                cold,
                root,
            )
        )
    if "index" in commands:  # the incremental run changes the tree (and puts it back)
        changed = changed_files(root)
        sizes = []
        for p in changed:
            sizes.append(p.stat().st_size)
            with open(p, "ab") as f:
                f.write(CHANGE)
        try:
            row = measure(
                "index (1% changed)",
                [sif, "index", "-q", "--index", str(index), str(root)],
                work,
                cold,
                root,
            )
            row["changed"] = len(changed)
            rows.append(row)
        finally:
            for p, size in zip(changed, sizes, strict=True):
                os.truncate(p, size)
    if "similar" in commands:
        argv = [sif, "similar", "-q", "--index", str(work / "index-similar"), str(root)]
        rows.append(measure("similar", argv, work, cold, root))
    out = work.parent / f"{root.name}.run.json"
    if out.exists():  # keep the figures of the commands not run this time
        old = json.loads(out.read_text())
        if old.get("params") == params:
            ran = {r["command"] for r in rows}
            rows = [r for r in old["rows"] if r["command"] not in ran] + rows
    out.write_text(json.dumps({"root": str(root), "params": params, "rows": rows}, indent=1))
    print(f"figures: {out}")


def compare(small: Path, large: Path) -> None:
    """The issue's targets from two runs' JSON: time ratio, memory, incremental share."""
    runs = [tree.parent / f"{tree.name}.run.json" for tree in (small, large)]
    for run_json in runs:
        if not run_json.exists():
            raise SystemExit(f"{run_json}: no figures (give the trees, as to run, not --work)")
    a, b = (json.loads(run_json.read_text()) for run_json in runs)
    fa, fb = a["params"]["files"], b["params"]["files"]
    ra = {r["command"]: r for r in a["rows"]}
    print(f"{fa:,} -> {fb:,} files (x{fb / fa:.0f})")
    for name, rb in ((r["command"], r) for r in b["rows"]):
        line = f"  {name:18s} rss_sum {rb['rss_sum'] / 1e6:7.1f} MB"
        line += " PASS" if rb["rss_sum"] <= 500e6 else " FAIL"
        if name in ra:
            r = rb["wall"] / ra[name]["wall"]
            line += f"  wall x{r:5.1f} ({'PASS' if r <= 11 else 'FAIL'} <= 11)"
        print(line)
    for run_ in (a, b):
        rs = {r["command"]: r for r in run_["rows"]}
        if "index" in rs and "index (1% changed)" in rs:
            share = rs["index (1% changed)"]["wall"] / rs["index"]["wall"]
            print(
                f"  incremental at {run_['params']['files']:,}: {share:.1%} of the full index "
                f"({'PASS' if share <= 0.05 else 'FAIL'} <= 5%)"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--root", type=Path, required=True)
    g.add_argument("--files", type=int, default=100_000)
    g.add_argument("--seed", type=int, default=15)
    g.add_argument("--linux", type=Path, help="the Linux sources, to draw texts from too")
    g.add_argument(
        "--dense",
        action="store_true",
        help="version 2: cut files at random places of the texts (pairs grow with the square)",
    )
    r = sub.add_parser("run")
    r.add_argument("--root", type=Path, required=True)
    r.add_argument(
        "--commands",
        default="dupes,index,similar",
        help="index-full: the full index only (the tree is left untouched)",
    )
    r.add_argument(
        "--work",
        type=Path,
        help="where the indexes, outputs and figures go (default ROOT.work beside the tree)",
    )
    r.add_argument(
        "--cold",
        action="store_true",
        help="empty the page cache before each command (root): both trees read from disk",
    )
    c = sub.add_parser("compare")
    c.add_argument("small", type=Path)
    c.add_argument("large", type=Path)
    args = ap.parse_args(argv)
    if args.what == "generate":
        generate(args.root.resolve(), args.files, args.seed, args.linux, args.dense)
    elif args.what == "run":
        run(args.root, [c for c in args.commands.split(",") if c], args.work, args.cold)
    else:
        compare(args.small.resolve(), args.large.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
