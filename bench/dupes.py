"""Benchmark `sif dupes` against jdupes, rdfind, fdupes and rmlint (issue 2).

A script, not a timed test. Three cases, one per case of seed 3:

  tree      files that fit in memory: two `npm install` trees and a copy of
            the Python standard library (~105k files), plus `edge/` (hardlinks,
            hidden files, empty files, symlinks) to show each tool's defaults
  large     files that do not: 100-300 MiB of random data (fixed seed), exact
            copies and copies that differ only in the first, a middle or the
            last byte
  onegroup  most files in one replica group: N plain copies of one file

and two trees of mostly unique files (issue 15), read in place, never written:

  usr       /usr itself (--usr-root; ~120k files, a few percent replicas)
  linux     the unpacked Debian linux-source (--linux-root; ~79k files)

`sif` (its default jobs, one per core) and `sif-j1` (`-j 1`, one process)
both run; each gets its wall and CPU ratios against every peer. The peers
are single-threaded: a wall-time win of `sif` (two cores) over them is a
two-cores-against-one win, which `sif-j1` shows apart.

    python bench/dupes.py --prepare            # build bench/data/ (git-ignored)
    python bench/dupes.py                      # warm-up + 5 interleaved repetitions
    python bench/dupes.py --cases tree --reps 3 --tools sif,jdupes

Every tool runs under one bash wrapper that prints its own /proc/$$/io after
the tool exits: Linux adds a reaped child's I/O counters to its parent, so
`rchar` covers every process of the run. CPU time is user+sys from wait4 of
the wrapper (all reaped descendants). Peak RSS is the maximum over time of
the RSS summed over the process tree, polled from /proc every ~10 ms; the
largest VmHWM seen (the peak of the largest single process) is reported
beside it (ru_maxrss is useless here: a forked child inherits the harness's).

The minimum bytes read (the issue's definition) come from a naive ground
truth: every candidate (a file sharing its size with another inode) is read
in the block schedule below and hashed with sha256 per block; a file that
becomes alone in its group after block k needed the bytes up to the end of
block k, a file in a replica group needed all its bytes, once per inode.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from sif.exact.pipeline import FIRST_BLOCK, GROWTH, MAX_BLOCK

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "data"
RESULTS = BENCH / "results"
CASES = ("tree", "large", "onegroup", "usr", "linux")
UNIQUE_CASES = ("usr", "linux")
"""Trees of mostly unique files, read in place (their roots are options)."""
ROOTS: dict[str, Path] = {
    "usr": Path("/usr"),
    "linux": DATA / "similar" / "linux" / "linux-source-6.1",
}
"""The roots of the in-place cases; --usr-root and --linux-root change them."""
MiB = 1 << 20

# Pinned top-level versions; the lock files next to this script pin the rest.
NPM_PROJECTS: dict[str, dict[str, str]] = {
    "npm1": {
        "@babel/core": "8.1.3",
        "@mui/material": "9.5.0",
        "date-fns": "4.1.0",
        "eslint": "10.15.0",
        "express": "5.3.0",
        "jest": "30.5.2",
        "lodash": "4.18.1",
        "next": "16.4.6",
        "prettier": "3.10.1",
        "react": "19.3.1",
        "rollup": "4.68.8",
        "typescript": "7.0.2",
        "vite": "8.4.0",
        "webpack": "5.113.0",
    },
    "npm2": {
        "@babel/core": "7.29.13",
        "@mui/icons-material": "5.18.0",
        "@mui/material": "5.18.0",
        "date-fns": "3.6.0",
        "eslint": "8.57.1",
        "express": "4.22.3",
        "jest": "29.7.0",
        "lodash": "4.17.21",
        "next": "14.2.35",
        "prettier": "2.8.8",
        "react": "18.3.1",
        "rollup": "3.30.0",
        "rxjs": "7.8.2",
        "typescript": "5.9.3",
        "vite": "5.4.21",
        "webpack": "4.47.0",
    },
}
NPM_FLAGS = ["--ignore-scripts", "--no-audit", "--no-fund", "--legacy-peer-deps"]
NPM_FLAGS += ["--loglevel=error"]


# ---------------------------------------------------------------------------
# prepare


def _random_bytes(seed: int, size: int) -> Iterator[bytes]:
    """Yield `size` pseudo-random bytes in chunks; the same seed, the same bytes."""
    rng = np.random.Generator(np.random.SFC64(seed))
    left = size
    while left > 0:
        n = min(left, 8 * MiB)
        words = rng.integers(0, 2**64, size=(n + 7) // 8, dtype=np.uint64)
        yield words.tobytes()[:n]
        left -= n


def _write_random(path: Path, seed: int, size: int) -> None:
    with path.open("wb") as f:
        for chunk in _random_bytes(seed, size):
            f.write(chunk)


def _copy_flipped(src: Path, dst: Path, offset: int) -> None:
    """Plain copy of `src` with the byte at `offset` inverted."""
    shutil.copyfile(src, dst)
    with dst.open("r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _last_byte(path: Path) -> int:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)[0]


def _marker_ok(root: Path, params: dict[str, object]) -> bool:
    marker = root / ".prepared.json"
    return marker.exists() and json.loads(marker.read_text()) == params


def _mark(root: Path, params: dict[str, object]) -> None:
    (root / ".prepared.json").write_text(json.dumps(params, sort_keys=True))


def prepare_tree(root: Path) -> None:
    """npm trees (pinned), a copy of the stdlib without site-packages, and edge/."""
    import sysconfig

    params: dict[str, object] = {"npm": NPM_PROJECTS, "python": platform.python_version()}
    if _marker_ok(root, params):
        print(f"tree: up to date in {root}")
        return
    root.mkdir(parents=True, exist_ok=True)
    for name, deps in NPM_PROJECTS.items():
        proj = root / name
        proj.mkdir(exist_ok=True)
        pkg = {"name": f"sif-bench-{name}", "version": "1.0.0", "private": True}
        pkg["dependencies"] = deps  # type: ignore[assignment]
        (proj / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
        lock = BENCH / f"dupes_{name}.package-lock.json"
        if lock.exists():
            shutil.copyfile(lock, proj / "package-lock.json")
            cmd = ["npm", "ci", *NPM_FLAGS]
        else:
            cmd = ["npm", "install", *NPM_FLAGS]
        print(f"tree: {' '.join(cmd)} in {proj}", flush=True)
        subprocess.run(cmd, cwd=proj, check=True)
        if not lock.exists():
            shutil.copyfile(proj / "package-lock.json", lock)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    dst = root / "stdlib"
    if dst.exists():
        shutil.rmtree(dst)
    print(f"tree: copying {stdlib} (without site-packages) to {dst}", flush=True)
    shutil.copytree(stdlib, dst, symlinks=True, ignore=shutil.ignore_patterns("site-packages"))
    prepare_edge(root / "edge")
    _mark(root, params)


def prepare_edge(edge: Path) -> None:
    """Small cases where the tools' defaults differ: hardlinks, hidden, empty, symlinks."""
    if edge.exists():
        shutil.rmtree(edge)
    for sub in ("hl", ".hidden", "sym"):
        (edge / sub).mkdir(parents=True)
    _write_random(edge / "hl/a.txt", 101, 5000)
    os.link(edge / "hl/a.txt", edge / "hl/a.link.txt")
    shutil.copyfile(edge / "hl/a.txt", edge / "hl/a.copy.txt")
    _write_random(edge / "hl/b.txt", 102, 6000)  # hardlinks only: no replica
    os.link(edge / "hl/b.txt", edge / "hl/b.link.txt")
    _write_random(edge / "c.txt", 103, 7000)
    shutil.copyfile(edge / "c.txt", edge / ".hidden/c.txt")
    shutil.copyfile(edge / "c.txt", edge / ".c.dot.txt")
    _write_random(edge / ".hidden/e.txt", 104, 7100)  # replicas seen only with hidden files
    shutil.copyfile(edge / ".hidden/e.txt", edge / ".e.dot.txt")
    (edge / "empty1.txt").write_bytes(b"")
    (edge / "empty2.txt").write_bytes(b"")
    _write_random(edge / "sym/d.txt", 105, 8000)
    os.symlink("../hl/a.txt", edge / "sym/s1")
    os.symlink("../hl/a.txt", edge / "sym/s2")
    os.symlink("d.txt", edge / "sym/s3")


def large_layout(scale: float) -> list[tuple[str, str, int, int]]:
    """(name, how, seed or source, offset): how is 'random', 'copy', 'flip', 'link'."""

    def mib(n: int) -> int:
        return max(64 * 1024, int(n * MiB * scale)) + 123  # not block-aligned

    a, b, c, d, e = mib(256), mib(192), mib(128), mib(100), mib(300)
    return [
        ("a.bin", "random", 1, a),
        ("a.copy1.bin", "copy", 0, 0),
        ("a.copy2.bin", "copy", 0, 0),
        ("a.first.bin", "flip", 0, 0),
        ("a.middle.bin", "flip", 0, a // 2),
        ("a.last.bin", "flip", 0, a - 1),
        ("b.bin", "random", 2, b),
        ("b.copy.bin", "copy", 0, 0),
        ("b.middle.bin", "flip", 0, b // 2),
        ("b.middle.copy.bin", "copy", 0, 0),
        ("c.bin", "random", 3, c),
        ("c.copy.bin", "copy", 0, 0),
        ("c.hardlink.bin", "link", 0, 0),
        ("d.bin", "random", 4, d),
        ("e.bin", "random", 5, e),
        ("e.last.bin", "flip", 0, e - 1),
    ]


def prepare_large(root: Path, scale: float) -> None:
    params: dict[str, object] = {"scale": scale, "layout": large_layout(scale)}
    if _marker_ok(root, params):
        print(f"large: up to date in {root}")
        return
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    base = root
    for name, how, seed, arg in large_layout(scale):
        path = root / name
        print(f"large: {name}", flush=True)
        if how == "random":
            base = path
            _write_random(path, seed, arg)
        elif how == "copy":
            src = root / "b.middle.bin" if name == "b.middle.copy.bin" else base
            shutil.copyfile(src, path)
        elif how == "flip":
            _copy_flipped(base, path, arg)
        elif how == "link":
            os.link(base, path)
    _mark(root, params)


def prepare_onegroup(root: Path, count: int, size: int, variants: int) -> None:
    """`count` plain copies of one file (one replica group) and `variants` files
    that differ from it only in the last byte (each one distinct)."""
    params: dict[str, object] = {"count": count, "size": size, "variants": variants}
    if _marker_ok(root, params):
        print(f"onegroup: up to date in {root}")
        return
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    master = root / "d000" / "f0000.bin"
    master.parent.mkdir()
    _write_random(master, 7, size)
    print(f"onegroup: {count} copies of {size} bytes", flush=True)
    for i in range(1, count):
        path = root / f"d{i // 100:03d}" / f"f{i:04d}.bin"
        path.parent.mkdir(exist_ok=True)
        shutil.copyfile(master, path)
    last = _last_byte(master)
    for j in range(variants):
        path = root / "variants" / f"v{j:03d}.bin"
        path.parent.mkdir(exist_ok=True)
        shutil.copyfile(master, path)
        with path.open("r+b") as f:
            f.seek(size - 1)
            f.write(bytes([(last + 1 + j) % 256]))  # distinct from the master and each other
    _mark(root, params)


# ---------------------------------------------------------------------------
# ground truth and the minimum bytes read


@dataclass(frozen=True)
class Entry:
    """One name found by the walk: regular files and symlinks (never followed)."""

    path: str
    dev: int
    ino: int
    size: int
    nlink: int
    is_link: bool


def walk(roots: Iterable[Path]) -> list[Entry]:
    """Every regular file and symlink under `roots`, hidden ones included."""
    out: list[Entry] = []
    stack = [str(r) for r in roots]
    while stack:
        top = stack.pop()
        with os.scandir(top) as it:
            for de in it:
                if de.is_dir(follow_symlinks=False):
                    stack.append(de.path)
                    continue
                st = de.stat(follow_symlinks=False)
                is_link = de.is_symlink()
                if is_link or de.is_file(follow_symlinks=False):
                    out.append(
                        Entry(de.path, st.st_dev, st.st_ino, st.st_size, st.st_nlink, is_link)
                    )
    return out


def block_ends(size: int, first: int, growth: int, cap: int) -> list[int]:
    """End offsets of the blocks of a file of `size` bytes: first, first*growth, ... cap."""
    ends, pos, block = [], 0, first
    while pos < size:
        pos = min(size, pos + block)
        ends.append(pos)
        block = min(cap, block * growth)
    return ends


@dataclass
class Truth:
    groups: list[frozenset[tuple[int, int]]]  # replica groups as sets of (dev, ino)
    files: int  # regular files (names)
    inodes: int
    bytes: int  # sum of sizes of distinct inodes
    candidates: int  # inodes sharing their size with another inode (empty ones excluded)
    minimum: int  # the minimum bytes read
    schedule: tuple[int, int, int]
    read_full: int = 0  # bytes of the candidates (what a naive full hash reads)


def compute_truth(entries: list[Entry], schedule: tuple[int, int, int]) -> Truth:
    """Naive replica groups of non-empty regular files by size and per-block sha256,
    and the issue's minimum bytes: replicas in full once, others to the end of the
    block in which they became alone."""
    first, growth, cap = schedule
    inodes: dict[tuple[int, int], Entry] = {}
    for e in entries:
        if not e.is_link:
            inodes.setdefault((e.dev, e.ino), e)
    by_size: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key, e in inodes.items():
        if e.size > 0:
            by_size[e.size].append(key)
    groups: list[frozenset[tuple[int, int]]] = []
    minimum = read_full = candidates = 0
    for size, keys in by_size.items():
        if len(keys) < 2:
            continue
        candidates += len(keys)
        read_full += size * len(keys)
        ends = block_ends(size, first, growth, cap)
        digests = {k: _block_digests(inodes[k].path, ends) for k in keys}
        pending = [keys]
        for b, end in enumerate(ends):
            nxt = []
            for grp in pending:
                split: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
                for k in grp:
                    split[digests[k][b]].append(k)
                for part in split.values():
                    if len(part) == 1:
                        minimum += end
                    else:
                        nxt.append(part)
            pending = nxt
        for grp in pending:
            minimum += size * len(grp)
            groups.append(frozenset(grp))
    return Truth(
        groups=groups,
        files=sum(1 for e in entries if not e.is_link),
        inodes=len(inodes),
        bytes=sum(e.size for e in inodes.values()),
        candidates=candidates,
        minimum=minimum,
        schedule=schedule,
        read_full=read_full,
    )


def _block_digests(path: str, ends: list[int]) -> list[bytes]:
    out, pos = [], 0
    with open(path, "rb", buffering=0) as f:
        for end in ends:
            out.append(hashlib.sha256(f.read(end - pos)).digest())
            pos = end
    return out


def load_truth(case: str, entries: list[Entry], schedule: tuple[int, int, int]) -> Truth:
    """The ground truth of a case, cached in bench/data/ while no file changed."""
    h = hashlib.sha256(repr(schedule).encode())
    for e in sorted(entries, key=lambda e: e.path):
        h.update(f"{e.path}\0{e.dev}\0{e.ino}\0{e.size}\0{e.is_link}\n".encode())
    stamp = h.hexdigest()
    cache = DATA / f"{case}.truth.json"
    DATA.mkdir(parents=True, exist_ok=True)
    if cache.exists():
        raw = json.loads(cache.read_text())
        if raw.get("stamp") == stamp:
            raw["truth"]["groups"] = [frozenset(map(tuple, g)) for g in raw["truth"]["groups"]]
            raw["truth"]["schedule"] = tuple(raw["truth"]["schedule"])
            return Truth(**raw["truth"])
    print(f"{case}: computing the ground truth (reads every candidate once)", flush=True)
    truth = compute_truth(entries, schedule)
    raw = asdict(truth)
    raw["groups"] = [sorted(g) for g in truth.groups]
    cache.write_text(json.dumps({"stamp": stamp, "truth": raw}))
    return truth


# ---------------------------------------------------------------------------
# measurement

# Prints the wrapper's /proc/$$/io after the tool exits: it includes the reaped tool's tree.
WRAPPER = (
    'o=$1; e=$2; shift 2; "$@" >"$o" 2>"$e"; rc=$?; '
    'while IFS= read -r l; do printf "%s\\n" "$l"; done </proc/$$/io >&2; exit $rc'
)


@dataclass
class Sample:
    wall: float  # s
    cpu: float  # s, user+sys of the whole tree
    rss_sum: int  # bytes, max over time of the RSS summed over the process tree
    pss_sum: int  # bytes, the same with PSS (shared pages divided among users), every 0.1 s
    maxrss: int  # bytes, the largest VmHWM seen: the peak of the largest single process
    rchar: int  # bytes, read() syscalls of the whole tree
    rc: int


#: PSS is read every this many polls only: ``smaps_rollup`` walks a process's page
#: tables under its mmap lock, 2.1 ms of CPU a poll for a process of 330 MB (17% of a
#: core at 10 ms polls, taken from the tool measured on a 2-core machine: an incremental
#: ``sif index`` of 1 M files took 3.9-4.2 s polled so, 2.8-3.4 s unpolled). VmRSS, from
#: ``status``, is read every poll: the targets are on its sum.
PSS_EVERY = 10


class TreeWatcher:
    """Polls the RSS of a process and its descendants from /proc (and PSS, less often)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.tree = {root}
        self.others: set[int] = set()
        self.peak = 0
        self.hwm = 0  # the largest VmHWM seen: the peak of one process
        self.pss_peak = 0
        self.polls = 0

    def poll(self) -> None:
        self.polls += 1
        with_pss = self.polls % PSS_EVERY == 1
        # Pids grow, so a descendant has a larger pid than the root (barring wrap-around).
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid <= self.root or pid in self.tree or pid in self.others:
                continue
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            (self.tree if ppid in self.tree else self.others).add(pid)
        total = pss = 0
        for pid in list(self.tree):
            try:
                with open(f"/proc/{pid}/status", "rb") as f:
                    status = f.read()
            except OSError:
                self.tree.discard(pid)
                continue
            for line in status.splitlines():
                if line.startswith(b"VmRSS:"):
                    total += int(line.split()[1]) * 1024
                elif line.startswith(b"VmHWM:"):
                    self.hwm = max(self.hwm, int(line.split()[1]) * 1024)
            if not with_pss:
                continue
            try:  # PSS splits a forked pool's shared copy-on-write pages among its users
                with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                    for line in f.read().splitlines():
                        if line.startswith(b"Pss:"):
                            pss += int(line.split()[1]) * 1024
                            break
            except OSError:
                pass
        self.peak = max(self.peak, total)
        self.pss_peak = max(self.pss_peak, pss)


def run_measured(argv: Sequence[str], out: Path, err: Path, interval: float = 0.01) -> Sample:
    """Run `argv` under the io wrapper with stdout to `out`; measure the whole tree."""
    cmd = ["bash", "-c", WRAPPER, "wrapper", str(out), str(err), *argv]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watcher = TreeWatcher(proc.pid)
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        watcher.poll()
        time.sleep(interval)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.stderr is not None
    io = dict(line.split(": ") for line in proc.stderr.read().decode().splitlines() if ": " in line)
    proc.stderr.close()
    if "rchar" not in io:
        raise RuntimeError(f"no /proc io from the wrapper for {argv}")
    return Sample(
        wall=wall,
        cpu=ru.ru_utime + ru.ru_stime,
        rss_sum=watcher.peak,
        pss_sum=watcher.pss_peak,
        maxrss=watcher.hwm,
        rchar=int(io["rchar"]),
        rc=proc.returncode,
    )


# ---------------------------------------------------------------------------
# tools

Groups = list[list[str]]


def parse_fdupes(path: Path) -> Groups:
    """fdupes layout: one path a line, groups separated by a blank line."""
    groups: Groups = [[]]
    for line in path.read_text(errors="surrogateescape").splitlines():
        if line:
            groups[-1].append(line)
        elif groups[-1]:
            groups.append([])
    return [g for g in groups if g]


def parse_rdfind(path: Path) -> Groups:
    """rdfind results.txt: `duptype id depth size device inode priority name`;
    a group shares |id| (the first occurrence has +id, the others -id)."""
    groups: dict[int, list[str]] = defaultdict(list)
    for line in path.read_text(errors="surrogateescape").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split(" ", 7)
        groups[abs(int(fields[1]))].append(fields[7])
    return list(groups.values())


def parse_rmlint(path: Path) -> Groups:
    """rmlint json: consecutive duplicate_file entries; a group starts at an original
    or where (checksum, size) changes."""
    groups: Groups = []
    key = None
    for d in json.loads(path.read_text(errors="surrogateescape"))[1:-1]:
        if d.get("type") != "duplicate_file":
            continue
        k = (d.get("checksum"), d["size"])
        if d.get("is_original") or k != key or not groups:
            groups.append([])
        key = k
        groups[-1].append(d["path"])
    return groups


@dataclass
class Tool:
    name: str
    binary: str
    matched: Callable[[list[str], str], list[str]]  # (roots, result file) -> argv
    defaults: Callable[[list[str], str], list[str]]
    parse: Callable[[Path], Groups]
    result_in_file: bool  # the result goes to a file named in argv, not to stdout
    notes: dict[str, str] = field(default_factory=dict)  # difference feature -> explanation


def sif_binary() -> str:
    # The real entry point, not the pyenv shim (a bash script that costs ~50 ms).
    cand = Path(sys.executable).parent / "sif"
    return str(cand) if cand.exists() else (shutil.which("sif") or "sif")


def sif_ready(binary: str) -> tuple[bool, str]:
    try:
        r = subprocess.run([binary, "dupes", "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    text = (r.stdout + r.stderr).lower()
    if r.returncode != 0 or "not yet" in text or "in progress" in text:
        return False, (r.stdout + r.stderr).strip().splitlines()[-1] if text else "no output"
    return True, ""


def make_tools() -> dict[str, Tool]:
    sif = sif_binary()
    return {
        "sif": Tool(
            "sif",
            sif,
            lambda p, o: [sif, "dupes", "--format", "fdupes", "-q", *p],
            lambda p, o: [sif, "dupes", "--format", "fdupes", "-q", *p],
            parse_fdupes,
            False,
            {},
        ),
        "sif-j1": Tool(
            "sif-j1",
            sif,
            lambda p, o: [sif, "dupes", "-j", "1", "--format", "fdupes", "-q", *p],
            lambda p, o: [sif, "dupes", "-j", "1", "--format", "fdupes", "-q", *p],
            parse_fdupes,
            False,
            {},
        ),
        "jdupes": Tool(
            "jdupes",
            "jdupes",
            lambda p, o: ["jdupes", "-r", "-q", *p],
            lambda p, o: ["jdupes", "-r", "-q", *p],
            parse_fdupes,
            False,
            {
                "empty": "jdupes leaves out empty files by default (-z includes them)",
                "single_inode": "jdupes -H counts hardlinks of one inode as duplicates",
            },
        ),
        "fdupes": Tool(
            "fdupes",
            "fdupes",
            lambda p, o: ["fdupes", "-r", "-n", "-q", *p],
            lambda p, o: ["fdupes", "-r", "-q", *p],
            parse_fdupes,
            False,
            {
                "empty": "fdupes groups empty files by default (-n/--noempty leaves them out)",
                "single_inode": "fdupes -H counts hardlinks of one inode as duplicates",
            },
        ),
        "rdfind": Tool(
            "rdfind",
            "rdfind",
            lambda p, o: ["rdfind", "-ignoreempty", "true", "-outputname", o, *p],
            lambda p, o: ["rdfind", "-outputname", o, *p],
            parse_rdfind,
            True,
            {
                "empty": "rdfind -ignoreempty false groups empty files (default true)",
            },
        ),
        "rmlint": Tool(
            "rmlint",
            "rmlint",
            lambda p, o: ["rmlint", "-T", "df", "--hidden", "-F", "-L", "-o", f"json:{o}", *p],
            lambda p, o: ["rmlint", "-T", "df", "-o", f"json:{o}", *p],
            parse_rmlint,
            True,
            {
                "hidden": "rmlint skips hidden files and directories by default "
                "(-R/--no-hidden; --hidden includes them)",
                "single_inode": "rmlint reports hardlinks of one inode as duplicates by "
                "default (--hardlinked; -L/--no-hardlinked considers one name per inode)",
                "symlink": "rmlint sees symlinks as small files holding their target path "
                "by default (-@; -F ignores them)",
                "empty": "rmlint -T df never groups empty files (they are 'emptyfiles' lint; "
                "--size 0 includes them)",
            },
        ),
    }


# What every tool is asked to do under the matched flags, and what its defaults are.
FLAG_NOTES = {
    "sif-j1": "as sif, with -j 1: one process, no workers",
    "sif": "recursion always; empty files out (--empty); hidden in; symlinks not followed; "
    "one inode is one file, all its names listed; byte-exact",
    "jdupes": "-r; its defaults already match: empty out (-z), hidden in (-A), symlinks not "
    "followed (-s), hardlinks not duplicates (-H), byte-exact",
    "fdupes": "-r -n (default groups empty files); hidden in (-A), symlinks not followed (-s), "
    "hardlinks not duplicates (-H); md5 then byte-exact",
    "rdfind": "-ignoreempty true (default); always recursive and hidden in; "
    "-followsymlinks false and -removeidentinode true (defaults: one name per inode); "
    "sha1, no byte comparison",
    "rmlint": "-T df --hidden -F -L (defaults: hidden out, symlinks seen as files, hardlinks "
    "duplicates); empty out (--size 1 default); blake2b, no byte comparison",
}


# ---------------------------------------------------------------------------
# agreement

Inode = tuple[int, int]


@dataclass
class Index:
    """Names and inodes of the walk, to compare groups on inode sets."""

    roots: list[Path]
    by_path: dict[str, Entry]
    names: dict[Inode, list[Entry]]

    @classmethod
    def build(cls, roots: list[Path], entries: list[Entry]) -> Index:
        names: dict[Inode, list[Entry]] = defaultdict(list)
        for e in entries:
            names[(e.dev, e.ino)].append(e)
        return cls(roots, {e.path: e for e in entries}, names)

    def inode(self, path: str) -> Inode:
        e = self.by_path.get(path) or self.by_path.get(os.path.abspath(path))
        if e is not None:
            return (e.dev, e.ino)
        st = os.lstat(path)
        return (st.st_dev, st.st_ino)

    def features(self, inodes: Iterable[Inode], whole: frozenset[Inode]) -> list[str]:
        entries = [e for i in inodes for e in self.names.get(i, [])]
        out = []
        if len(whole) == 1:
            out.append("single_inode")
        if any(e.is_link for e in entries):
            out.append("symlink")
        if any(e.size == 0 and not e.is_link for e in entries):
            out.append("empty")
        if any(self._hidden(e.path) for e in entries):
            out.append("hidden")
        return out

    def _hidden(self, path: str) -> bool:
        for r in self.roots:
            rel = os.path.relpath(path, r)
            if not rel.startswith(".."):
                return any(part.startswith(".") for part in Path(rel).parts)
        return False


@dataclass
class Difference:
    kind: str  # "missing" (in the truth, not in the tool) or "extra"
    paths: list[str]
    features: list[str]
    explanation: str


def compare(tool: Tool, groups: Groups, truth: Truth, index: Index) -> list[Difference]:
    """Differences between a tool's groups and the truth, on sets of inodes.

    Tools differ in whether they list every name of a hardlinked inode, so a group
    is the set of its inodes; a tool group that is a subset of a truth group it
    missed (it did not see some members) is reported as one difference."""
    got = {frozenset(index.inode(p) for p in g) for g in groups}
    want = set(truth.groups)
    diffs = []
    extra = got - want
    for g in sorted(want - got, key=sorted):
        parts = [t for t in extra if t < g]
        extra -= set(parts)
        seen = frozenset().union(*parts) if parts else frozenset()
        feats = index.features(g - seen, g)
        diffs.append(Difference("missing", _names(index, g), feats, _explain(tool, feats)))
    for g in sorted(extra, key=sorted):
        feats = index.features(g, g)
        diffs.append(Difference("extra", _names(index, g), feats, _explain(tool, feats)))
    return diffs


def _names(index: Index, inodes: Iterable[Inode]) -> list[str]:
    return sorted(e.path for i in inodes for e in index.names.get(i, []))


def _explain(tool: Tool, feats: list[str]) -> str:
    known = [tool.notes[f] for f in feats if f in tool.notes]
    return "; ".join(known) if known else "UNEXPLAINED"


# ---------------------------------------------------------------------------
# run and report


def case_roots(case: str) -> list[Path]:
    if case in ROOTS:
        return [ROOTS[case].resolve()]  # resolved: every tool gets the same real path
    return [DATA / case]


def _fmt_bytes(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:.0f} B"


def run_case(
    case: str, tools: list[Tool], args: argparse.Namespace, schedule: tuple[int, int, int]
) -> dict[str, object]:
    roots = case_roots(case)
    if not all(r.exists() for r in roots):
        sys.exit(f"{case}: no data under {roots}; run with --prepare first")
    t0 = time.monotonic()
    entries = walk(roots)
    truth = load_truth(case, entries, schedule)
    index = Index.build(roots, entries)
    print(
        f"\n=== {case}: {truth.files:,} files, {truth.inodes:,} inodes, "
        f"{_fmt_bytes(truth.bytes)}; {truth.candidates:,} candidates of "
        f"{_fmt_bytes(truth.read_full)}; {len(truth.groups):,} replica groups; "
        f"minimum read {_fmt_bytes(truth.minimum)}  ({time.monotonic() - t0:.1f} s)",
        flush=True,
    )
    paths = [str(r) for r in roots]
    work = RESULTS / "tmp"
    work.mkdir(parents=True, exist_ok=True)

    def one(tool: Tool, mode: str, tag: str) -> tuple[Sample, Path]:
        res = work / f"{case}.{tool.name}.{tag}.out"
        argv = (tool.matched if mode == "matched" else tool.defaults)(paths, str(res))
        stdout = work / f"{case}.{tool.name}.{tag}.stdout"
        for p in (res, stdout):
            p.unlink(missing_ok=True)
        sample = run_measured(argv, stdout, work / f"{case}.{tool.name}.{tag}.stderr")
        if sample.rc != 0:
            print(f"  {tool.name}: exit {sample.rc}: {' '.join(argv)}", file=sys.stderr)
        return sample, res if tool.result_in_file else stdout

    agreement: dict[str, object] = {}
    # Warm-up: one untimed run each, whose groups are checked against the truth.
    for tool in tools:
        _, out = one(tool, "matched", "warmup")
        diffs = compare(tool, tool.parse(out), truth, index)
        agreement[tool.name] = [asdict(d) for d in diffs]
        _print_diffs(tool.name, "matched flags", diffs)
    if case == "tree" and not args.no_defaults_check:
        for tool in tools:
            _, out = one(tool, "defaults", "defaults")
            diffs = compare(tool, tool.parse(out), truth, index)
            agreement[f"{tool.name} (defaults)"] = [asdict(d) for d in diffs]
            _print_diffs(tool.name, "its own defaults", diffs)

    samples: dict[str, list[Sample]] = {t.name: [] for t in tools}
    for rep in range(args.reps):
        order = tools[rep % len(tools) :] + tools[: rep % len(tools)]
        for tool in order:
            s, _ = one(tool, "matched", "rep")
            samples[tool.name].append(s)
            print(
                f"  rep {rep + 1}/{args.reps} {tool.name:7s} wall {s.wall:7.2f} s  "
                f"cpu {s.cpu:7.2f} s  rss {s.rss_sum / 1e6:7.1f} MB  "
                f"rchar {_fmt_bytes(s.rchar)}  load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    medians = {n: _median(ss) for n, ss in samples.items() if ss}
    _print_table(case, truth, medians, samples)
    return {
        "truth": {k: v for k, v in asdict(truth).items() if k != "groups"},
        "replica_groups": len(truth.groups),
        "samples": {n: [asdict(s) for s in ss] for n, ss in samples.items()},
        "medians": medians,
        "agreement": agreement,
    }


def _median(samples: list[Sample]) -> dict[str, float]:
    keys = ("wall", "cpu", "rss_sum", "pss_sum", "maxrss", "rchar")
    return {k: statistics.median(getattr(s, k) for s in samples) for k in keys}


def _print_diffs(name: str, mode: str, diffs: list[Difference]) -> None:
    if not diffs:
        print(f"  agreement: {name} ({mode}): same groups as the truth")
        return
    print(f"  agreement: {name} ({mode}): {len(diffs)} differences")
    shown: dict[str, int] = defaultdict(int)
    for d in diffs:
        shown[d.explanation] += 1
        if shown[d.explanation] <= 3:
            more = f" (+{len(d.paths) - 3} more)" if len(d.paths) > 3 else ""
            print(f"    {d.kind}: {', '.join(d.paths[:3])}{more}")
            print(f"      -> {d.explanation}")
    for expl, n in shown.items():
        if n > 3:
            print(f"    ... {n} differences in all explained by: {expl}")


def _print_table(
    case: str, truth: Truth, medians: dict[str, dict[str, float]], samples: dict[str, list[Sample]]
) -> None:
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\n  {case}: medians of {max(len(s) for s in samples.values())} repetitions "
        f"(load {load} at the end)"
    )
    head = (
        f"  {'tool':8s} {'wall s':>8s} {'(min-max)':>15s} {'cpu s':>8s} {'peak RSS':>10s} "
        f"{'peak PSS':>10s} {'maxrss':>9s} {'rchar':>10s} {'x min':>7s}"
    )
    print(head)
    for name, m in medians.items():
        walls = [s.wall for s in samples[name]]
        print(
            f"  {name:8s} {m['wall']:8.2f} {f'({min(walls):.2f}-{max(walls):.2f})':>15s} "
            f"{m['cpu']:8.2f} {m['rss_sum'] / 1e6:7.1f} MB {m['pss_sum'] / 1e6:7.1f} MB "
            f"{m['maxrss'] / 1e6:6.1f} MB "
            f"{_fmt_bytes(m['rchar']):>10s} {m['rchar'] / max(truth.minimum, 1):7.3f}"
        )
    mine = [n for n in ("sif", "sif-j1") if n in medians]
    peers = [n for n in medians if n not in ("sif", "sif-j1")]
    for me in mine:
        print(f"  ratio {me}/peer:  wall    cpu    peak RSS  rchar")
        s = medians[me]
        for name in [n for n in mine if n != me] + peers:
            m = medians[name]
            r = [s[k] / m[k] if m[k] else float("nan") for k in ("wall", "cpu", "rss_sum")]
            r.append(s["rchar"] / m["rchar"] if m["rchar"] else float("nan"))
            print(f"  {name:15s} {r[0]:6.2f} {r[1]:6.2f} {r[2]:9.2f} {r[3]:6.2f}")
    for me in mine:
        _print_targets(case, truth, medians, me)


def _print_targets(
    case: str, truth: Truth, medians: dict[str, dict[str, float]], me: str = "sif"
) -> None:
    s = medians[me]
    checks = []
    if "jdupes" in medians:
        j = medians["jdupes"]
        limit = {"tree": 0.8, "large": 1.0, "usr": 0.8, "linux": 0.8}.get(case)
        if limit is not None:
            r = s["wall"] / j["wall"]
            checks.append((f"wall <= {limit}x jdupes", r <= limit, f"{r:.2f}x"))
        if case in UNIQUE_CASES:
            r = s["cpu"] / j["cpu"]
            checks.append(("cpu <= 1.0x jdupes", r <= 1.0, f"{r:.2f}x"))
    if me == "sif" and "sif-j1" in medians:
        r = s["wall"] / medians["sif-j1"]["wall"]
        checks.append(("wall < sif -j 1's", r < 1.0, f"{r:.2f}x"))
    checks.append(
        ("peak RSS (sum) <= 100 MB", s["rss_sum"] <= 100e6, f"{s['rss_sum'] / 1e6:.1f} MB")
    )
    r = s["rchar"] / max(truth.minimum, 1)
    checks.append(("rchar <= 1.05x minimum", r <= 1.05, f"{r:.3f}x"))
    for what, ok, val in checks:
        print(f"  target {me:6s} {what:28s} {'PASS' if ok else 'FAIL'}  ({val})")


def _sif_source() -> dict[str, object]:
    """The commit and the uncommitted changes of src/sif that were measured."""

    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], cwd=BENCH.parent, capture_output=True, text=True)
        return r.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": git("status", "--porcelain", "src/sif")}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prepare", action="store_true", help="build bench/data/ and exit")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: %(default)s")
    ap.add_argument("--tools", default="sif,sif-j1,jdupes,fdupes,rdfind,rmlint")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    ap.add_argument("--large-scale", type=float, default=1.0, help="size factor of large/")
    ap.add_argument("--onegroup-count", type=int, default=1000, help="files in the group")
    ap.add_argument("--onegroup-mb", type=float, default=10.0, help="size of each file, MiB")
    ap.add_argument("--onegroup-variants", type=int, default=10, help="last-byte variants")
    # The minimum is defined on sif's own block schedule (sif.exact.pipeline).
    ap.add_argument("--first-block", type=int, default=FIRST_BLOCK, help="schedule of the minimum")
    ap.add_argument("--block-growth", type=int, default=GROWTH)
    ap.add_argument("--max-block", type=int, default=MAX_BLOCK)
    ap.add_argument("--no-defaults-check", action="store_true", help="skip the defaults run")
    ap.add_argument("--usr-root", type=Path, default=ROOTS["usr"], help="the usr case's root")
    ap.add_argument("--linux-root", type=Path, default=ROOTS["linux"], help="the linux case's root")
    args = ap.parse_args(argv)
    ROOTS["usr"], ROOTS["linux"] = args.usr_root, args.linux_root
    cases = [c for c in args.cases.split(",") if c]
    if unknown := set(cases) - set(CASES):
        ap.error(f"unknown cases {sorted(unknown)}")

    if args.prepare:
        for case in cases:
            if case in UNIQUE_CASES:  # read in place: nothing to build
                if not ROOTS[case].is_dir():
                    sys.exit(f"{case}: no directory {ROOTS[case]} (see --{case}-root)")
            elif case == "tree":
                prepare_tree(DATA / "tree")
            elif case == "large":
                prepare_large(DATA / "large", args.large_scale)
            else:
                size = int(args.onegroup_mb * MiB)
                prepare_onegroup(
                    DATA / "onegroup", args.onegroup_count, size, args.onegroup_variants
                )
        schedule = (args.first_block, args.block_growth, args.max_block)
        for case in cases:  # the ground truth, cached; this also warms the page cache
            truth = load_truth(case, walk(case_roots(case)), schedule)
            print(f"{case}: {truth.files:,} files, {_fmt_bytes(truth.bytes)}")
        return 0

    import compileall

    import sif

    # As an installed package is: where PYTHONDONTWRITEBYTECODE is set, each sif
    # process would compile its modules from source (~0.1 s, see bench/actions.py).
    compileall.compile_dir(os.path.dirname(sif.__file__), quiet=1)
    all_tools = make_tools()
    names = [n for n in args.tools.split(",") if n]
    if unknown := set(names) - set(all_tools):
        ap.error(f"unknown tools {sorted(unknown)}")
    tools = []
    for n in names:
        tool = all_tools[n]
        if n == "sif":
            ok, why = sif_ready(tool.binary)
            if not ok:
                print(f"sif dupes is not ready ({why}): benchmarking the peers only")
                continue
        elif not shutil.which(tool.binary):
            print(f"{n}: not installed, skipped")
            continue
        tools.append(tool)
    schedule = (args.first_block, args.block_growth, args.max_block)
    floor = run_measured(["true"], Path(os.devnull), Path(os.devnull))
    print(
        f"wrapper floor (bash + true): wall {floor.wall * 1e3:.1f} ms, "
        f"rss {floor.rss_sum / 1e6:.1f} MB, rchar {floor.rchar} B"
    )
    startup = None
    if any(t.name == "sif" for t in tools):
        empty = RESULTS / "tmp" / "empty"
        empty.mkdir(parents=True, exist_ok=True)
        argv_ = all_tools["sif"].matched([str(empty)], "")
        startup = min(
            (run_measured(argv_, Path(os.devnull), Path(os.devnull)) for _ in range(3)),
            key=lambda s: s.wall,
        )
        print(
            f"sif startup (empty directory): wall {startup.wall * 1e3:.0f} ms, "
            f"cpu {startup.cpu * 1e3:.0f} ms, rss {startup.rss_sum / 1e6:.1f} MB, "
            f"rchar {_fmt_bytes(startup.rchar)}"
        )
    print("flags:")
    for t in tools:
        print(f"  {t.name:7s} {' '.join(t.matched(['PATH'], 'OUT'))}")
    report: dict[str, object] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"cpus": os.cpu_count(), "kernel": platform.release()},
        "args": vars(args),
        "flags": {t.name: t.matched(["PATH"], "OUT") for t in tools},
        "flag_notes": {t.name: FLAG_NOTES[t.name] for t in tools},
        "sif_source": _sif_source(),
        "floor": asdict(floor),
        "sif_startup": asdict(startup) if startup else None,
        "cases": {},
    }
    for case in cases:
        report["cases"][case] = run_case(case, tools, args, schedule)  # type: ignore[index]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"dupes-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nraw numbers: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
