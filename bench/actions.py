"""Benchmark `sif link` against `jdupes -L` and `rdfind -makehardlinks true` (issue 12).

A script, not a timed test. The tree (under bench/data/actions, git-ignored):
two copies of /usr/share/doc and two copies of this Python's standard library
(without site-packages, test/ and __pycache__), so every file has a replica
and /usr/share/doc adds its own (licences, changelogs). Every run starts from
a fresh copy of that tree (plain copies, no shared inodes); tools are
interleaved, repetition after repetition, in a rotating order.

sif's figure is the whole two-step job: `sif dupes --format json` (the
report) then `sif link` (which re-checks every byte of both files of every
step through open descriptors before linking), each measured, and summed.
`sif link` runs its re-checks and steps in two threads (jdupes in one): read
its wall time beside its CPU seconds.

    python bench/actions.py --prepare     # build the pristine tree
    python bench/actions.py --reps 3

Wall and CPU seconds (user+sys of the whole process tree) and bytes read
(`rchar` of the wrapper's /proc/PID/io, which includes its reaped children);
then the ratio to jdupes, sif's two steps apart, and the 1-minute load
average when each run ended (the machine is shared: read the figures with it).
After each run the tree's distinct inodes are counted, to check that each tool
linked the same files.

sif's modules are compiled to bytecode first (`compileall`), as an installed
package's are: where PYTHONDONTWRITEBYTECODE is set, each sif process would
otherwise compile them from source (~0.1 s a process, two a sif figure).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dupes import Sample, run_measured

BENCH = Path(__file__).resolve().parent
DATA = BENCH / "data" / "actions"
PRISTINE = DATA / "pristine"
WORK = DATA / "work"
ROOTS = ("doc1", "doc2", "py1", "py2")
MiB = 1 << 20
PARTS: list[tuple[Sample, Sample]] = []
"""sif's (dupes, link) samples, in order."""


def prepare() -> None:
    if PRISTINE.exists():
        shutil.rmtree(PRISTINE)
    PRISTINE.mkdir(parents=True)
    stdlib = sysconfig.get_paths()["stdlib"]
    ignore = shutil.ignore_patterns("site-packages", "test", "__pycache__")
    for name in ("doc1", "doc2"):
        shutil.copytree("/usr/share/doc", PRISTINE / name, symlinks=True)
    for name in ("py1", "py2"):
        shutil.copytree(stdlib, PRISTINE / name, symlinks=True, ignore=ignore)


def fresh_copy() -> None:
    if WORK.exists():
        shutil.rmtree(WORK)
    subprocess.run(["cp", "-a", "--reflink=never", str(PRISTINE), str(WORK)], check=True)
    subprocess.run(["sync"], check=True)


def inodes() -> tuple[int, int]:
    """(regular files' names, distinct inodes) under the work tree."""
    names, seen = 0, set()
    for dirpath, _, files in os.walk(WORK):
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            if os.path.isfile(os.path.join(dirpath, f)) and not os.path.islink(
                os.path.join(dirpath, f)
            ):
                names += 1
                seen.add(st.st_ino)
    return names, len(seen)


def roots() -> list[str]:
    return [str(WORK / r) for r in ROOTS]


def compile_sif() -> None:
    import sif

    compileall.compile_dir(os.path.dirname(sif.__file__), quiet=1)


def load() -> float:
    return os.getloadavg()[0]


def sif_bin() -> str:
    return str(Path(sys.executable).with_name("sif"))


def run_tool(tool: str) -> Sample:
    out, err = DATA / f"{tool}.out", DATA / f"{tool}.err"
    if tool == "jdupes":
        return run_measured(["jdupes", "-r", "-L", "-q", *roots()], out, err)
    if tool == "rdfind":
        argv = ["rdfind", "-makehardlinks", "true", "-outputname", str(DATA / "rdfind.txt")]
        return run_measured([*argv, *roots()], out, err)
    report = DATA / "report.json"
    a = run_measured([sif_bin(), "dupes", "-q", "--format", "json", *roots()], report, err)
    b = run_measured([sif_bin(), "link", "-q", str(report)], out, err)
    if a.rc or b.rc:
        raise RuntimeError(f"sif failed: {err.read_text()}")
    PARTS.append((a, b))
    return Sample(
        wall=a.wall + b.wall,
        cpu=a.cpu + b.cpu,
        rss_sum=max(a.rss_sum, b.rss_sum),
        pss_sum=max(a.pss_sum, b.pss_sum),
        maxrss=max(a.maxrss, b.maxrss),
        rchar=a.rchar + b.rchar,
        rc=0,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prepare", action="store_true", help="Build the pristine tree.")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tools", default="sif,jdupes,rdfind")
    args = ap.parse_args()
    if args.prepare or not PRISTINE.exists():
        prepare()
    os.environ["XDG_STATE_HOME"] = str(DATA / "state")
    compile_sif()
    tools = args.tools.split(",")
    samples: dict[str, list[Sample]] = {t: [] for t in tools}
    loads: dict[str, list[float]] = {t: [] for t in tools}
    after: dict[str, set[tuple[int, int]]] = {t: set() for t in tools}
    fresh_copy()
    print(f"tree: {inodes()[0]:,} files, {inodes()[1]:,} inodes", file=sys.stderr)
    for rep in range(args.reps + 1):  # the first is a warm-up
        order = tools[rep % len(tools) :] + tools[: rep % len(tools)]
        for tool in order:
            fresh_copy()
            s = run_tool(tool)
            ld = load()
            if rep:
                samples[tool].append(s)
                loads[tool].append(ld)
                after[tool].add(inodes())
            elif tool == "sif":
                PARTS.pop()
            print(
                f"rep {rep} {tool}: {s.wall:.2f} s wall, {s.cpu:.2f} s CPU, load {ld:.2f}",
                file=sys.stderr,
            )
    ref = samples.get("jdupes", samples[tools[0]])
    base = statistics.median(s.wall for s in ref)
    base_min = min(s.wall for s in ref)
    base_cpu = statistics.median(s.cpu for s in ref)
    print(
        "| tool | wall s (median) | wall s (min) | CPU s | read MiB | files, inodes after "
        "| wall / jdupes (median, min) | CPU / jdupes | load |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for t in tools:
        wall = statistics.median(s.wall for s in samples[t])
        least = min(s.wall for s in samples[t])
        cpu = statistics.median(s.cpu for s in samples[t])
        read = statistics.median(s.rchar for s in samples[t]) / MiB
        print(
            f"| {t} | {wall:.2f} | {least:.2f} | {cpu:.2f} | {read:.0f} | "
            f"{', '.join(f'{a:,}, {b:,}' for a, b in sorted(after[t]))} | "
            f"{wall / base:.2f}, {least / base_min:.2f} | {cpu / base_cpu:.2f} | "
            f"{statistics.median(loads[t]):.2f} |"
        )
    for name, part in (("sif dupes", 0), ("sif link", 1)):
        if PARTS:
            ps = [p[part] for p in PARTS]
            print(
                f"| {name} | {statistics.median(s.wall for s in ps):.2f} | "
                f"{min(s.wall for s in ps):.2f} | {statistics.median(s.cpu for s in ps):.2f} | "
                f"{statistics.median(s.rchar for s in ps) / MiB:.0f} | | | | |"
            )


if __name__ == "__main__":
    main()
