"""bench/query: `sif query` latency, index size, and incremental re-index cost (issue 4).

    python bench/query.py [--corpus DIR] [--sizes 1,5,20] [--work DIR] [--cold-only [--runs N]]
    python bench/query.py --cold-only --index DIR [--query FILE] [--against PYTHON] [--runs N]

1. Latency of one query (a 29 KB real file) against indexes of 1M, 5M, 20M
   fingerprint rows (synthetic files of 100 random values each, plus the
   query's original): warm (in process: open the reader, fingerprint the
   file, look up, describe; median of 20) and as a whole new `sif query`
   process with a warm page cache (median of --runs, 5 by default), next to
   the bare cost of starting Python and fingerprinting the file (numpy; a
   query never imports numba). ``--cold-only`` measures just the whole
   process, then stops (no warm runs, no real corpus); with ``--index DIR``
   it queries that existing index (opened read-only) instead of building
   any. Each whole-process figure is the min and median of --runs, wall and
   CPU (user+sys), after one run that is not counted, next to the floor
   (``python -c pass``, ``python -c "import numpy"``) and the load average.
   With ``--index``: the default and ``--fast``, of ``--query FILE`` (by
   default the 29 KB file above), next to a ladder that splits the cost:
   Python alone, + numpy (plain, then as the query does: imports without the
   cyclic GC, everything frozen before the exit), + click, + every module
   the query imports (a process that imports them in the query's order and
   does nothing else),
   all run in turn (one run of each command a round, so that a change of the
   machine's load falls on all of them); ``--against PYTHON`` adds the same
   queries run by another interpreter's sif (e.g. the main checkout's venv),
   also in turn.
   The child processes cache their bytecode (``PYTHONPYCACHEPREFIX`` under
   the scratch directory, ``PYTHONDONTWRITEBYTECODE`` unset): a user's
   installed sif has its ``.pyc`` files; without them every run compiles
   sif's modules again (about 120 ms more, measured with an editable install).
2. Index bytes per fingerprint and as a % of the corpus, on a real corpus
   (default: a copy of Python's standard library).
3. Re-index after 1% of the files change, as a share of a full run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sif.fingerprint import make_params
from sif.index import build_index, open_reader, open_store
from sif.index.scan import ScannedFile, scan_file
from sif.index.store import NewFile
from sif.query import query_files
from sif.walk import WalkOptions

STDLIB = Path(os.path.dirname(os.__file__))
QUERY = STDLIB / "trace.py"


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def synthetic_index(idx: Path, rows: int, query_scan: ScannedFile) -> None:
    rng = np.random.default_rng(rows)
    params = make_params()
    per_file = 100
    n_files = rows // per_file
    store = open_store(idx, rebuild=True)
    try:
        batch: list[NewFile] = [NewFile(str(QUERY), 0, 1, 0, query_scan)]
        for i in range(n_files):
            fps = rng.integers(0, 1 << 32, per_file, dtype=np.uint64).astype(np.uint32)
            scan = ScannedFile("text", bytes(32), fps, per_file * 256)
            batch.append(NewFile(f"/synthetic/d{i // 1000}/f{i}.txt", 0, i + 2, 0, scan))
        store.commit(params, None, batch, [])
        store.finish(params)
    finally:
        store.close()


#: The environment of the timed child processes (see the module docstring).
CHILD_ENV = dict(os.environ)


def timed_runs(
    cmd: list[str], runs: int, env: dict[str, str] | None = None
) -> tuple[list[float], list[float]]:
    """Wall and CPU (user+sys) seconds of ``runs`` runs of ``cmd``, after one not counted."""
    return interleaved([(cmd, env)], runs)[0]


def interleaved(
    cmds: list[tuple[list[str], dict[str, str] | None]], runs: int
) -> list[tuple[list[float], list[float]]]:
    """Wall and CPU (user+sys) seconds of each of ``cmds`` (command, environment), run
    in turn ``runs`` times after one round that is not counted."""
    for cmd, env in cmds:
        subprocess.run(cmd, check=True, capture_output=True, env=CHILD_ENV if env is None else env)
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in cmds]
    for _ in range(runs):
        for (cmd, env), (walls, cpus) in zip(cmds, out, strict=True):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(
                cmd, check=True, capture_output=True, env=CHILD_ENV if env is None else env
            )
            walls.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return out


def figures(walls: list[float], cpus: list[float]) -> str:
    """``min/median/max`` of wall, ``min/median`` of CPU, in ms."""
    return (
        f"wall {1000 * min(walls):.0f}/{1000 * statistics.median(walls):.0f}"
        f"/{1000 * max(walls):.0f} ms, "
        f"cpu {1000 * min(cpus):.0f}/{1000 * statistics.median(cpus):.0f} ms "
        "(min/median/max, min/median)"
    )


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def cold_process(idx: Path, runs: int) -> float:
    """The median wall time of a whole ``sif query`` process (printed with its figures)."""
    cmd = [sys.executable, "-m", "sif", "query", "--index", str(idx), str(QUERY)]
    walls, cpus = timed_runs(cmd, runs)
    print(f"  whole `sif query` process: {figures(walls, cpus)}; {load()}")
    return statistics.median(walls)


#: A child that runs sif and names, at exit, the modules it imported (in order).
RECORD_IMPORTS = """
import atexit, sys
before = set(sys.modules)
atexit.register(
    lambda: sys.stderr.write("".join(f"imported {m}\\n" for m in sys.modules if m not in before))
)
import runpy
sys.argv = ["sif", *sys.argv[1:]]
runpy.run_module("sif", run_name="__main__")
"""


def query_imports(args: list[str]) -> list[str]:
    """The modules ``python -m sif ARGS`` imports, in the order it imports them."""
    run = subprocess.run(
        [sys.executable, "-c", RECORD_IMPORTS, *args], capture_output=True, text=True, env=CHILD_ENV
    )
    names = [line.split()[1] for line in run.stderr.splitlines() if line.startswith("imported ")]
    return [m for m in names if m not in ("__main__", "sif.__main__")]


def ladder(idx: Path, query: Path, runs: int, against: str | None) -> None:
    """The whole process of ``sif query`` (default and ``--fast``) beside its floors,
    all run in turn: Python; + numpy (plain, then as the query imports it: without
    the GC, frozen at exit); + click; + every module the query imports."""
    args = ["query", "--index", str(idx), str(query)]
    env = {"OPENBLAS_NUM_THREADS": "1", **CHILD_ENV}  # as sif.cli.query sets it
    mods = query_imports(args)

    # The floors as the query's own process runs: imports without the GC, all frozen
    # before the exit (else the collection at the interpreter's end, over numpy's
    # objects and the rest, costs ~12 ms more: plain `import numpy` shows it).
    def frozen(imports: str) -> list[str]:
        return [sys.executable, "-c", f"import gc; gc.disable()\n{imports}\ngc.freeze()"]

    steps: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("python -c pass", [sys.executable, "-c", "pass"], None),
        ("python -c 'import numpy'", [sys.executable, "-c", "import numpy"], env),
        ("numpy, GC off and frozen (as sif query)", frozen("import numpy"), env),
        ("+ click", frozen("import numpy, click"), env),
        (f"+ the query's {len(mods)} imports", frozen("\n".join(f"import {m}" for m in mods)), env),
        ("sif query --fast", [sys.executable, "-m", "sif", *args, "--fast"], None),
        ("sif query", [sys.executable, "-m", "sif", *args], None),
    ]
    if against is not None:
        steps += [
            (f"{against}: sif query --fast", [against, "-m", "sif", *args, "--fast"], None),
            (f"{against}: sif query", [against, "-m", "sif", *args], None),
        ]
    print(f"{idx}, query {query} ({query.stat().st_size:,} bytes), {runs} rounds; {load()}")
    results = interleaved([(cmd, e) for _, cmd, e in steps], runs)
    for (name, _, _), (walls, cpus) in zip(steps, results, strict=True):
        print(f"  {name:<40} {figures(walls, cpus)}")
    print(f"  {load()}")


def floors(runs: int) -> None:
    """What a whole process costs before sif: Python alone, and Python with numpy."""
    py = [sys.executable, "-c", "pass"]
    numpy = [sys.executable, "-c", "import numpy"]
    env = {"OPENBLAS_NUM_THREADS": "1", **CHILD_ENV}  # as sif.cli.query sets it
    print(f"floor: python -c pass: {figures(*timed_runs(py, runs))}")
    print(f"floor: python -c 'import numpy': {figures(*timed_runs(numpy, runs, env))}; {load()}")


def latency(idx: Path, runs: int) -> tuple[float, float, float]:
    times, lookups = [], []
    for _ in range(20):
        t0 = time.perf_counter()
        reader = open_reader(idx)
        [res] = query_files([QUERY], reader, threshold=50)
        t1 = time.perf_counter()
        reader.close()
        times.append(t1 - t0)
        params = reader.parameter_sets()[0].params
        q = np.unique(scan_file(QUERY, params).fingerprints)
        reader = open_reader(idx)
        t2 = time.perf_counter()
        reader.lookup(params, q)
        lookups.append(time.perf_counter() - t2)
        assert res.matches and res.matches[0].exact
    return statistics.median(times), statistics.median(lookups), cold_process(idx, runs)


def baseline(runs: int) -> float:
    code = (
        "from sif.index.scan import scan_file; from sif.fingerprint import make_params; "
        f"scan_file({str(QUERY)!r}, make_params())"
    )
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=CHILD_ENV)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=STDLIB)
    ap.add_argument("--sizes", default="1,5,20", help="millions of fingerprint rows")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory")
    ap.add_argument("--cold-only", action="store_true", help="only the whole-process query")
    ap.add_argument("--runs", type=int, default=5, help="whole-process runs (min, median shown)")
    ap.add_argument(
        "--index", type=Path, default=None, help="with --cold-only: query this index (read only)"
    )
    ap.add_argument(
        "--query", type=Path, default=QUERY, help="with --index: the file to query with"
    )
    ap.add_argument(
        "--against",
        default=None,
        metavar="PYTHON",
        help="with --index: also run the queries with this interpreter's sif, in turn",
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sif-bench-query-", dir=args.work))
    CHILD_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    CHILD_ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        if args.cold_only and args.index is not None:
            ladder(args.index, args.query, args.runs, args.against)
            return
        qscan = scan_file(QUERY, make_params())
        print(f"query: {QUERY} ({QUERY.stat().st_size:,} bytes, {len(qscan.fingerprints)} fps)")
        base = baseline(args.runs)
        print(f"bare process: python + fingerprint of the query file: {1000 * base:.0f} ms")
        for m in (int(s) for s in args.sizes.split(",")):
            idx = work / f"syn{m}"
            t0 = time.perf_counter()
            synthetic_index(idx, m * 1_000_000, qscan)
            built = time.perf_counter() - t0
            if args.cold_only:
                if m == int(args.sizes.split(",")[0]):
                    floors(args.runs)
                print(f"{m}M rows:")
                cold = cold_process(idx, args.runs)
                print(
                    f"{m:>3}M rows: cold process {1000 * cold:5.0f} ms "
                    f"(of which bare {1000 * base:.0f}); built in {built:.1f} s"
                )
                shutil.rmtree(idx)
                continue
            warm, lookup, cold = latency(idx, args.runs)
            size = du(idx)
            print(
                f"{m:>3}M rows: warm query {1000 * warm:6.1f} ms "
                f"(lookup alone {1000 * lookup:5.1f} ms), "
                f"cold process {1000 * cold:5.0f} ms (of which bare {1000 * base:.0f}); "
                f"index {size / 1e6:.1f} MB = {size / (m * 1e6):.2f} B/row; built in {built:.1f} s"
            )
            shutil.rmtree(idx)
        if args.cold_only:
            return
        # --- real corpus: size, and a re-index after 1% change -------------------------
        corpus = work / "corpus"
        shutil.copytree(
            args.corpus,
            corpus,
            ignore=shutil.ignore_patterns("site-packages", "__pycache__"),
            symlinks=True,
        )
        opts = WalkOptions()
        idx = work / "real"
        full = build_index([corpus], idx, options=opts)
        total = full.bytes_read  # every file the index keeps
        size = du(idx)
        fp_bytes = sum(f.stat().st_size for f in (idx / "segments").rglob("f[pi][d.]*npy"))
        rows = sum(len(np.load(f, mmap_mode="r")) for f in (idx / "segments").rglob("fp.npy"))
        print(
            f"corpus {args.corpus}: {full.new:,} files, {total / 1e6:.1f} MB, "
            f"{rows:,} fingerprints "
            f"(1 per {total / rows:.0f} bytes)"
        )
        print(
            f"index {size / 1e6:.2f} MB = {100 * size / total:.2f}% of the corpus "
            f"({size / rows:.2f} B per fingerprint all told; fingerprint rows alone "
            f"{fp_bytes / rows:.2f} B, {100 * fp_bytes / total:.2f}%; "
            f"catalog {(idx / 'catalog.duckdb').stat().st_size / 1e6:.2f} MB)"
        )
        files = sorted(p for p in corpus.rglob("*") if p.is_file() and not p.is_symlink())
        rng = np.random.default_rng(1)
        for i in rng.choice(len(files), max(1, len(files) // 100), replace=False):
            with open(files[i], "ab") as f:
                f.write(b"\n# changed\n")
        inc = build_index([corpus], idx, options=opts)
        print(
            f"full run {full.seconds:.2f} s; after 1% changed ({inc.changed} files): "
            f"{inc.seconds:.3f} s = {100 * inc.seconds / full.seconds:.1f}% of a full run"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
