"""Embedded engine against the Dask engine (1 and 2 workers): same results, at what cost.

Two workloads, each run in a fresh child process per engine (so that peak
RSS is the run's own):

- ``tree``: ``sif index`` then ``sif similar`` (``--fast``; with ``--exact``
  the default mode, whose exact scores are computed on the Dask workers) over
  a real tree (default: the ``fs`` and ``net`` directories of the Linux 6.1
  sources), indexed into a fresh directory under ``--work``.
- ``synthetic``: the collation alone over a synthetic fingerprint set written
  as index segments (the shape of a large corpus: most fingerprints in one
  file, families of near-copies sharing theirs in tens of files, boilerplate in
  thousands), ``--rows`` rows.

For each: wall time, CPU time and peak RSS of the client and of every
worker, whether the results are identical to the embedded engine's, and the
ratio of wall times. Usage::

    python bench/engines.py [--tree DIR ...] [--rows 20000000] [--work /tmp/sif-engines]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

LINUX = "/work/main/bench/data/similar/linux/linux-source-6.1"
MAX_DF = 100


def _usage() -> dict[str, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": r.ru_utime + r.ru_stime, "rss_mb": r.ru_maxrss / 1024}


def _worker_usage(engine: Any) -> list[dict[str, float]]:
    if engine is None:
        return []
    return sorted(engine.client.run(_usage).values(), key=lambda u: -u["rss_mb"])


def _engine(kind: str, workers: int, memory: str) -> Any:
    if kind == "embedded":
        return None
    from sif.executors.dask import DaskEngine

    eng = DaskEngine(workers=workers, memory_limit=memory)
    eng.workers()  # started now: its start-up is timed apart
    return eng


def _digest(cols: dict[str, np.ndarray]) -> str:
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for k in ("a", "b", "shared", "hits_a", "hits_b"):
        h.update(np.ascontiguousarray(cols[k], dtype=np.uint32).tobytes())
    return h.hexdigest()


def child_tree(args: argparse.Namespace) -> dict[str, Any]:
    from sif.index import build_index
    from sif.similar import SimilarOptions, find_similar

    index = Path(args.work) / f"idx-{args.engine}-{args.workers}"
    shutil.rmtree(index, ignore_errors=True)
    t0 = time.perf_counter()
    eng = _engine(args.engine, args.workers, args.memory)
    started = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        cpu1 = _usage()["cpu"]
        stats = build_index(args.tree, index, jobs=args.jobs, engine=eng)
        t_index = time.perf_counter() - t1
        cpu_index = _usage()["cpu"] - cpu1
        workers_index = _worker_usage(eng)
        t2 = time.perf_counter()
        result = find_similar(
            args.tree,
            index,
            options=SimilarOptions(threshold=25, max_df=MAX_DF, exact=args.exact),
            jobs=args.jobs,
            engine=eng,
        )
        t_similar = time.perf_counter() - t2
        pairs = sorted(
            (
                p.a.path,
                p.b.path,
                p.shared,
                p.a_in_b,
                p.b_in_a,
                p.exact_a_in_b,
                p.exact_b_in_a,
                p.a.digest,
                p.b.digest,
            )
            for p in result.pairs
        )
        import hashlib

        digest = hashlib.blake2b(repr(pairs).encode(), digest_size=16).hexdigest()
        workers = _worker_usage(eng)
    finally:
        if eng is not None:
            eng.close()
    shutil.rmtree(index, ignore_errors=True)
    return {
        "start": started,
        "index": t_index,
        "cpu_index": cpu_index,
        "workers_index": workers_index,
        "similar": t_similar,
        "collate": result.stats.seconds_collate,
        "files": stats.files_read,
        "bytes": stats.bytes_read,
        "rows": result.stats.fingerprints,
        "pairs": len(pairs),
        "digest": digest,
        "client": _usage(),
        "workers": workers,
    }


def make_synthetic(where: Path, rows: int, seed: int = 1994) -> tuple[list[str], int, int]:
    """Segments of about ``rows`` rows: (directories, files, rows written).

    Files of 250 rows: 200 of their own (random values), 45 from their family
    (families of 20 files drawing from 120 values: pairs sharing tens), 5 of
    a pool of boilerplate values (each in thousands of files: stop-fingerprints).
    """
    from sif.index.segments import make_files, write_segment

    per_file, own, fam, boiler = 250, 200, 45, 5
    files = rows // per_file
    per_segment = 20_000
    rng = np.random.default_rng(seed)
    # Each boilerplate value in about 5,000 files (and at least 20x max_df).
    pool = max(20, files // 1000)
    boiler_pool = rng.integers(0, 2**32, pool, dtype=np.uint64).astype(np.uint32)
    dirs: list[str] = []
    written = 0
    where.mkdir(parents=True, exist_ok=True)
    for s, first in enumerate(range(0, files, per_segment)):
        n = min(per_segment, files - first)
        ids = np.arange(first + 1, first + n + 1, dtype=np.uint32)
        family = (ids - 1) // 20
        own_v = rng.integers(0, 2**32, (n, own), dtype=np.uint64).astype(np.uint32)
        # A family's 120 values: a hash of (family, j), so every segment agrees.
        j = rng.integers(0, 120, (n, fam), dtype=np.uint64)
        fam_v = (
            (family[:, None].astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + j * 7919)
            * np.uint64(0xBF58476D1CE4E5B9)
            >> np.uint64(32)
        ).astype(np.uint32)
        boil_v = boiler_pool[rng.integers(0, len(boiler_pool), (n, boiler))]
        values = np.concatenate([own_v, fam_v, boil_v], axis=1).reshape(-1)
        local = np.repeat(np.arange(n, dtype=np.uint32), per_file)
        recs = [
            (int(i), 0, per_file, per_file, 64 * per_file, 0, int(i), 0, b"\0" * 32)
            for i in ids.tolist()
        ]
        seg_files = make_files(recs, [f"/synthetic/{i}".encode() for i in ids.tolist()])
        d = where / f"seg-{s:06d}"
        write_segment(str(d), seg_files, values, local)
        dirs.append(str(d))
        written += len(values)
    return dirs, files, written


def child_synthetic(args: argparse.Namespace) -> dict[str, Any]:
    from sif.index.pairs import SegmentRows
    from sif.similar.collate import collate_source

    meta = json.loads((Path(args.work) / "synthetic" / "meta.json").read_text())
    ids = np.arange(1, meta["files"] + 1, dtype=np.uint32)
    source = SegmentRows(tuple(meta["dirs"]), ids, np.zeros(len(ids), np.uint8), meta["rows"])
    t0 = time.perf_counter()
    eng = _engine(args.engine, args.workers, args.memory)
    started = time.perf_counter() - t0
    tmp = Path(args.work) / "spill"
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        t1 = time.perf_counter()
        if eng is None:
            cols, stopped, n = collate_source(source, MAX_DF, 1, args.jobs, args.duck, str(tmp))
        else:
            cols, stopped, n = eng.collate(source, MAX_DF, 1, args.duck)
        wall = time.perf_counter() - t1
        workers = _worker_usage(eng)
    finally:
        if eng is not None:
            eng.close()
    return {
        "start": started,
        "collate": wall,
        "rows": n,
        "stopped": stopped,
        "pairs": len(cols["a"]),
        "digest": _digest(cols),
        "client": _usage(),
        "workers": workers,
    }


def partition_cost(args: argparse.Namespace) -> dict[str, Any]:
    """One hash partition of the synthetic set collated alone, on one thread."""
    from sif.index.pairs import SegmentRows
    from sif.index.pairstore import bucket_ranges
    from sif.similar.collate import collate_range, collation_connection, partition_count

    meta = json.loads((Path(args.work) / "synthetic" / "meta.json").read_text())
    ids = np.arange(1, meta["files"] + 1, dtype=np.uint32)
    source = SegmentRows(tuple(meta["dirs"]), ids, np.zeros(len(ids), np.uint8), meta["rows"])
    parts = max(8, partition_count(meta["rows"]))
    lo, hi = bucket_ranges(parts)[0]
    con = collation_connection(args.duck, str(Path(args.work) / "spill"), 1)
    t0 = time.perf_counter()
    cpu0 = _usage()["cpu"]
    t_read = time.perf_counter()
    rows = source.rows(lo, hi)
    t_read = time.perf_counter() - t_read
    cols, _, n = collate_range(con, lambda a, b: rows, lo, hi, MAX_DF, 1, args.duck)
    return {
        "partitions": parts,
        "rows": n,
        "read": t_read,
        "wall": time.perf_counter() - t0,
        "cpu": _usage()["cpu"] - cpu0,
        "pairs": len(cols["a"]),
        "client": _usage(),
    }


def run_child(kind: str, args: argparse.Namespace, engine: str, workers: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--engine",
        engine,
        "--workers",
        str(workers),
        "--work",
        args.work,
        "--jobs",
        str(args.jobs),
        "--memory",
        args.memory,
        "--duck",
        args.duck,
        *[x for t in args.tree for x in ("--tree", t)],
        *(["--exact"] if args.exact else []),
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{kind} {engine} {workers}: {done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    out["process_wall"] = time.perf_counter() - t0
    return out


def _fmt_workers(ws: list[dict[str, float]]) -> str:
    return " ".join(f"[cpu {w['cpu']:.1f} s, rss {w['rss_mb']:.0f} MB]" for w in ws) or "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tree", action="append", default=[])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--work", default="/tmp/sif-engines")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--memory", default="2GB", help="per Dask worker")
    ap.add_argument("--duck", default="1GB", help="DuckDB's memory for a collation")
    ap.add_argument("--only", choices=["tree", "synthetic"])
    ap.add_argument("--exact", action="store_true", help="tree: the default mode, not --fast")
    ap.add_argument("--child", choices=["tree", "synthetic", "partition"])
    ap.add_argument("--engine", default="embedded")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    if not args.tree:
        args.tree = [f"{LINUX}/fs", f"{LINUX}/net"]
    if args.child:
        fn = {"tree": child_tree, "synthetic": child_synthetic, "partition": partition_cost}
        print(json.dumps(fn[args.child](args)))
        return
    Path(args.work).mkdir(parents=True, exist_ok=True)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} on {os.cpu_count()} cores")
    runs = [("embedded", 1), ("dask", 1), ("dask", 2)]
    if args.only in (None, "tree"):
        print(f"tree: {' '.join(args.tree)}")
        base = None
        for engine, workers in runs:
            r = run_child("tree", args, engine, workers)
            base = base or r
            same = r["digest"] == base["digest"]
            print(
                f"  {engine:8} {workers}w: start {r['start']:.1f} s, index {r['index']:.2f} s "
                f"({r['files']:,} files, {r['bytes'] / 2**20:.0f} MiB), "
                f"similar {r['similar']:.2f} s "
                f"(collate {r['collate']:.2f} s, {r['rows']:,} rows, {r['pairs']:,} pairs); "
                f"ratio index {r['index'] / base['index']:.2f}x, similar "
                f"{r['similar'] / base['similar']:.2f}x; client cpu {r['client']['cpu']:.1f} s "
                f"(index {r['cpu_index']:.1f} s; workers after it "
                f"{_fmt_workers(r['workers_index'])}) "
                f"rss {r['client']['rss_mb']:.0f} MB; workers {_fmt_workers(r['workers'])}; "
                f"identical: {same}"
            )
    if args.only in (None, "synthetic"):
        syn = Path(args.work) / "synthetic"
        meta_path = syn / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
        if meta is None or meta["asked"] != args.rows:
            shutil.rmtree(syn, ignore_errors=True)
            t0 = time.perf_counter()
            dirs, files, written = make_synthetic(syn, args.rows)
            meta = {"dirs": dirs, "files": files, "rows": written, "asked": args.rows}
            meta_path.write_text(json.dumps(meta))
            print(
                f"synthetic: wrote {written:,} rows, {files:,} files in "
                f"{time.perf_counter() - t0:.1f} s"
            )
        print(f"synthetic: {meta['rows']:,} rows of {meta['files']:,} files, max_df {MAX_DF}")
        part = run_child("partition", args, "embedded", 1)
        print(
            f"  one partition of {part['partitions']}: {part['rows']:,} rows, read "
            f"{part['read']:.2f} s, collated in {part['wall']:.2f} s wall, {part['cpu']:.2f} s "
            f"cpu ({part['rows'] / max(part['cpu'], 1e-9) / 1e6:.2f} M rows/cpu-s), "
            f"{part['pairs']:,} pairs, rss {part['client']['rss_mb']:.0f} MB"
        )
        base = None
        for engine, workers in runs:
            r = run_child("synthetic", args, engine, workers)
            base = base or r
            same = r["digest"] == base["digest"]
            print(
                f"  {engine:8} {workers}w: start {r['start']:.1f} s, collate {r['collate']:.2f} s "
                f"({r['rows']:,} rows, {r['stopped']:,} stop-fps, {r['pairs']:,} pairs), "
                f"ratio {r['collate'] / base['collate']:.2f}x; client cpu "
                f"{r['client']['cpu']:.1f} s rss {r['client']['rss_mb']:.0f} MB; workers "
                f"{_fmt_workers(r['workers'])}; identical: {same}"
            )
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
