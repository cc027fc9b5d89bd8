"""sif similar against the exact truth, ssdeep, TLSH and MinHash; 1 GB timing; stop-fingerprints.

Run: ``python bench/similar.py [--linux DIR] [--skip-linux | --linux-only] [--df-only]
[--runs N]``.

Corpus: sdists of releases years apart of six popular packages, downloaded
from PyPI (``pip download --no-deps --no-binary :all: PKG==VER``) into
``bench/data/similar/sdist`` and unpacked under ``corpus/`` (git-ignored).

Truth: S(X) is the set of distinct 50-byte substrings of X (64-bit hashes of
every window), C(A,B) = |S(A) ∩ S(B)| / |S(A)|, and a pair is positive at T
when max(C(A,B), C(B,A)) >= T. Intersections of all pairs come from one
sparse product over the windows held by at least two files.

Tools on the same files, precision / recall / F1 at T = 25% and 50%:

- ``sif similar`` (default, and ``--exact``), whole process, fresh index;
- ssdeep (Debian's binary, ``ssdeep -r -c -p -t 1``): its score is no
  containment, so the score threshold with the best F1 is chosen and stated;
- TLSH (py-tlsh): the distance threshold with the best F1, stated;
- MinHash (datasketch, 128 permutations over the 50-byte shingles): the
  containment derived from its Jaccard estimate and the set sizes,
  C = J (|A| + |B|) / ((1 + J) |A|), compared with T directly.

Also: recall for positive pairs whose smaller file is under 1 KB; the
re-threshold time (``-t 50`` right after ``-t 25``); ``--exact``'s cost over a
default run; all-against-all over about 1 GB of the Linux sources (Debian's
``linux-source``) with no index, a warm page cache and 2 jobs; and the
document frequency of fingerprints in /usr/share/doc and the corpus (the
data behind ``--max-df``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dupes import sif_binary  # noqa: E402

#: The sif of this Python's environment (its venv need not be on PATH), else PATH's.
SIF = sif_binary()
DATA = HERE / "data" / "similar"
SDISTS = [
    "requests==2.10.0",
    "requests==2.20.0",
    "requests==2.31.0",
    "flask==0.10",
    "flask==0.12",
    "flask==1.0",
    "flask==2.0.0",
    "flask==3.0.0",
    "click==2.0",
    "click==6.7",
    "click==7.0",
    "click==8.1.7",
    "six==1.4.1",
    "six==1.10.0",
    "six==1.16.0",
    "attrs==15.2.0",
    "attrs==17.4.0",
    "attrs==19.3.0",
    "attrs==23.1.0",
    "jinja2==2.7",
    "jinja2==2.9",
    "jinja2==2.11.3",
    "jinja2==3.1.2",
]
#: A second corpus of real version histories the defaults were not tuned on: other
#: packages, other years (issue 11).
HISTORY = [
    "urllib3==1.7",
    "urllib3==1.22",
    "urllib3==1.26.18",
    "urllib3==2.0.7",
    "packaging==16.8",
    "packaging==20.4",
    "packaging==23.2",
    "itsdangerous==0.24",
    "itsdangerous==1.1.0",
    "itsdangerous==2.1.2",
    "markupsafe==0.23",
    "markupsafe==1.1.1",
    "markupsafe==2.1.3",
    "werkzeug==0.9.6",
    "werkzeug==0.15.6",
    "werkzeug==2.3.7",
    "idna==2.5",
    "idna==3.4",
]
W = 50
THRESHOLDS = (25.0, 50.0)
#: Size classes of the smaller file of a pair (bytes, lower bound inclusive).
SIZE_CLASSES = ((0, 256), (256, 1024), (1024, 4096), (4096, 16384), (16384, 1 << 62))


def corpus(specs: list[str] | None = None, name: str = "corpus") -> Path:
    """Download (once) and unpack the sdists; the corpus directory."""
    sd = DATA / "sdist"
    sd.mkdir(parents=True, exist_ok=True)
    out = DATA / name
    specs = SDISTS if specs is None else specs
    for spec in specs:
        name, ver = spec.split("==")
        if not any(p.name.lower().startswith(f"{name}-{ver}.") for p in sd.iterdir()):
            pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps"]
            subprocess.run([*pip, "--no-binary", ":all:", spec, "-d", str(sd)], check=True)
    if not out.exists():
        tmp = DATA / "corpus.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for spec in specs:
            pkg, ver = spec.split("==")
            for tgz in sorted(sd.glob("*.tar.gz")):
                if tgz.name.lower().startswith(f"{pkg}-{ver}.".lower()):
                    with tarfile.open(tgz) as t:
                        t.extractall(tmp, filter="data")
        tmp.rename(out)
    return out


def files_of(root: Path) -> list[str]:
    out = []
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) > 0:
                out.append(os.path.abspath(p))
    return sorted(out)


def truth(paths: list[str]) -> tuple[dict[tuple[int, int], float], np.ndarray]:
    """max(C(A,B), C(B,A)) for every pair sharing a 50-byte substring; |S(X)| per file."""
    from scipy import sparse

    from sif.similar import window_set

    sets = [window_set(Path(p).read_bytes(), W) for p in paths]
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    vals = np.concatenate(sets)
    rows = np.repeat(np.arange(len(sets)), sizes)
    _, inv, df = np.unique(vals, return_inverse=True, return_counts=True)
    keep = df[inv] >= 2  # windows of one file pair nothing
    col = np.unique(inv[keep], return_inverse=True)[1]
    m = sparse.csr_matrix(
        (np.ones(int(keep.sum()), dtype=np.int32), (rows[keep], col)),
        shape=(len(sets), int(col.max()) + 1 if len(col) else 0),
    )
    inter = sparse.triu(m @ m.T, k=1).tocoo()
    out = {}
    for a, b, n in zip(inter.row, inter.col, inter.data, strict=True):
        if sizes[a] and sizes[b]:
            out[(int(a), int(b))] = max(n / sizes[a], n / sizes[b])
    # Identical files under the window's length share no window, and are copies.
    tiny: dict[bytes, list[int]] = {}
    for i, p in enumerate(paths):
        if sizes[i] == 0:
            tiny.setdefault(Path(p).read_bytes(), []).append(i)
    for same in tiny.values():
        for x, a in enumerate(same):
            for b in same[x + 1 :]:
                out[(a, b)] = 1.0
    return out, sizes


def prf(pred: set[tuple[int, int]], pos: set[tuple[int, int]]) -> tuple[float, float, float]:
    tp = len(pred & pos)
    p = tp / len(pred) if pred else 1.0
    r = tp / len(pos) if pos else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def best_threshold(
    scored: dict[tuple[int, int], float], pos: set[tuple[int, int]], higher_better: bool
) -> tuple[float, tuple[float, float, float]]:
    """The cut on a score with the best F1 (scores of every pair the tool reports)."""
    cuts = sorted(set(scored.values()))
    best = (0.0, (0.0, 0.0, 0.0))
    for c in cuts:
        pred = {k for k, v in scored.items() if (v >= c if higher_better else v <= c)}
        res = prf(pred, pos)
        if res[2] > best[1][2]:
            best = (c, res)
    return best


def run_sif(
    root: Path | list[Path], index: Path, t: float, *extra: str
) -> tuple[list[dict[str, object]], float, str]:
    roots = [str(r) for r in root] if isinstance(root, list) else [str(root)]
    t0 = time.perf_counter()
    cmd = [SIF, "similar", "--index", str(index), "-t", str(t), "--format", "json", "-j", "2"]
    out = subprocess.run(
        [*cmd, *extra, *roots],
        capture_output=True,
        text=True,
        check=False,
    )
    dt = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(out.stderr)
    return [json.loads(x) for x in out.stdout.splitlines()], dt, out.stderr.strip()


def sif_pairs(records: list[dict[str, object]], ids: dict[str, int]) -> set[tuple[int, int]]:
    out = set()
    for r in records:
        if str(r["a"]) not in ids or str(r["b"]) not in ids:
            continue  # an archive member (a.zip!/x): not in the truth, made of files
        a, b = ids[str(r["a"])], ids[str(r["b"])]
        out.add((min(a, b), max(a, b)))
    return out


def ssdeep_scores(root: Path, ids: dict[str, int]) -> dict[tuple[int, int], float]:
    out = subprocess.run(
        ["ssdeep", "-r", "-c", "-p", "-t", "1", str(root)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    scores: dict[tuple[int, int], float] = {}
    for line in out.splitlines():
        parts = line.rsplit(",", 1)
        if len(parts) != 2:
            continue
        names = parts[0].split('","')
        if len(names) != 2:
            continue
        a, b = names[0].strip('"'), names[1].strip('"')
        if a in ids and b in ids and a != b:
            i, j = ids[a], ids[b]
            scores[(min(i, j), max(i, j))] = float(parts[1])
    return scores


def tlsh_scores(paths: list[str]) -> dict[tuple[int, int], float]:
    import tlsh

    hashes = []
    for i, p in enumerate(paths):
        h = tlsh.hash(Path(p).read_bytes())
        if h and h != "TNULL":
            hashes.append((i, tlsh.Tlsh()))
            hashes[-1][1].fromTlshStr(h)
    out = {}
    for x in range(len(hashes)):
        i, hi = hashes[x]
        for y in range(x + 1, len(hashes)):
            j, hj = hashes[y]
            d = hi.diff(hj)
            if d <= 300:
                out[(i, j)] = float(d)
    return out


def minhash_scores(paths: list[str]) -> tuple[dict[tuple[int, int], float], float]:
    from datasketch import MinHash

    from sif.similar import window_set

    t0 = time.perf_counter()
    sigs, sizes, idx = [], [], []
    for i, p in enumerate(paths):
        s = window_set(Path(p).read_bytes(), W)
        if not len(s):
            continue
        m = MinHash(num_perm=128, hashfunc=int)
        m.update_batch((s.view(np.uint64) & np.uint64(0xFFFFFFFF)).tolist())  # shingles' own
        sigs.append(m.hashvalues)
        sizes.append(len(s))
        idx.append(i)
    sig = np.array(sigs)
    n = np.array(sizes, dtype=np.float64)
    out = {}
    for x in range(len(idx)):
        j = (sig[x + 1 :] == sig[x]).mean(axis=1)
        hit = np.flatnonzero(j > 0)
        for y in hit:
            jj = float(j[y])
            yy = x + 1 + int(y)
            inter = jj * (n[x] + n[yy]) / (1 + jj)
            out[(idx[x], idx[yy])] = min(1.0, max(inter / n[x], inter / n[yy]))
    return out, time.perf_counter() - t0


def doc_frequency(root: Path, label: str) -> None:
    """How many files each fingerprint is in; where the most frequent ones come from."""
    from sif.index import build_index
    from sif.index.segments import Segment

    with tempfile.TemporaryDirectory() as tmp:
        build_index([root], tmp, jobs=2)
        segs = [Segment(str(p)) for p in sorted(Path(tmp, "segments").iterdir())]
        vals = np.concatenate([s.all_rows()[0] for s in segs])
        fids = np.concatenate([s.all_rows()[1] for s in segs])
        pairs = np.unique((vals.astype(np.uint64) << np.uint64(32)) | fids)
        v = (pairs >> np.uint64(32)).astype(np.uint32)
        uv, df = np.unique(v, return_counts=True)
        print(f"\n{label}: {len(uv):,} distinct fingerprints in {len(np.unique(fids)):,} files")
        for cap in (10, 20, 50, 100, 200, 500):
            print(f"  in more than {cap:>3} files: {int((df > cap).sum()):>7,}")
        paths = {}
        for s in segs:
            for pos, fid in enumerate(np.asarray(s.files["id"])):
                paths[int(fid)] = os.fsdecode(s.path(pos))
        top = np.argsort(-df)[:8]
        for t in top:
            holders = np.unique(fids[vals == uv[t]])
            names = sorted({os.path.basename(paths[int(h)]) for h in holders[:2000]})
            print(f"  df {int(df[t]):>6}: e.g. {', '.join(names[:5])}")


def linux_run(roots: list[Path], runs: int = 1) -> None:
    print(f"\n== all-against-all, {[str(r) for r in roots]}: no index, warm cache, 2 jobs")
    files = [p for r in roots for p in files_of(r)]
    size = sum(os.path.getsize(p) for p in files)
    for i in range(0, len(files), 2000):  # warm the page cache
        subprocess.run(["cat", *files[i : i + 2000]], stdout=subprocess.DEVNULL, check=False)
    with tempfile.TemporaryDirectory() as tmp:
        idx = Path(tmp) / "idx"
        recs, dt, err = run_sif(roots, idx, 25.0)
        print(f"  {size / 1e9:.2f} GB: sif similar -t 25: {dt:.1f} s wall, {len(recs):,} pairs")
        print(f"  {err}")
        times = []
        for _ in range(runs):  # whole process, each right after the last
            recs, dt, err = run_sif(roots, idx, 50.0)
            times.append(dt)
        times.sort()
        print(
            f"  re-threshold -t 50: {times[len(times) // 2]:.2f} s wall (median of {runs}; "
            f"{', '.join(f'{t:.2f}' for t in times)}), {len(recs):,} pairs"
        )
        print(f"  {err}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--linux", type=Path, nargs="+", help="~1 GB of trees (default: Debian's linux-source)"
    )
    ap.add_argument("--skip-linux", action="store_true")
    ap.add_argument("--df-only", action="store_true")
    ap.add_argument("--linux-only", action="store_true", help="only the 1 GB timings")
    ap.add_argument("--runs", type=int, default=1, help="re-threshold runs (the median)")
    args = ap.parse_args()
    if not args.linux_only:
        _corpus_parts(args)
    if args.df_only or args.skip_linux:
        return
    linux_run(args.linux or default_linux(), args.runs)


def _corpus_parts(args: argparse.Namespace) -> None:
    root = corpus()
    if not args.df_only:
        compare(root, f"sdists ({len(SDISTS)} releases of 6 packages)")
        compare(corpus(HISTORY, "history"), f"histories ({len(HISTORY)} releases of 6 others)")
    doc_frequency(root, "sdists")
    doc_frequency(Path("/usr/share/doc"), "/usr/share/doc")


def default_linux() -> list[Path]:
    """About 1 GB of C from Debian's linux-source, unpacked once under bench/data."""
    src = DATA / "linux"
    if not src.exists():
        tarball = next(Path("/usr/src").glob("linux-source-*.tar.xz"), None)
        if tarball is None:
            raise SystemExit("apt-get install -y linux-source, or pass --linux DIR")
        src.mkdir(parents=True)
        subprocess.run(["tar", "-xJf", str(tarball), "-C", str(src)], check=True)
    top = next(src.iterdir())
    return [top / d for d in ("drivers", "fs", "net", "sound")]  # 1.0 GB of C


def _classes(pred: set[tuple[int, int]], pos: set[tuple[int, int]], fsize: np.ndarray) -> str:
    """Recall by size class of the smaller file: 'r (positives)' per class."""
    out = []
    for lo, hi in SIZE_CLASSES:
        cls = {k for k in pos if lo <= min(fsize[k[0]], fsize[k[1]]) < hi}
        out.append(f"{len(pred & cls) / len(cls):.3f} ({len(cls)})" if cls else "- (0)")
    return " | ".join(out)


def compare(root: Path, label: str) -> None:
    paths = files_of(root)
    ids = {p: i for i, p in enumerate(paths)}
    total = sum(os.path.getsize(p) for p in paths)
    print(f"\n== {label}: {len(paths):,} files, {total / 1e6:.1f} MB ({os.uname().nodename})")
    t0 = time.perf_counter()
    exact, _ = truth(paths)
    print(
        f"truth: {len(exact):,} pairs share a 50-byte substring ({time.perf_counter() - t0:.1f} s)"
    )
    fsize = np.array([os.path.getsize(p) for p in paths])
    variants = {"sif": [], "sif --fast": ["--fast"]}
    sif: dict[str, dict[float, set[tuple[int, int]]]] = {}
    scores: dict[str, dict[float, dict[tuple[int, int], float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in variants.items():
            idx = Path(tmp) / name.replace(" ", "_")
            sif[name], scores[name] = {}, {}
            for t in THRESHOLDS:  # -t 25 builds the index and collates; -t 50 re-thresholds
                recs, dt, err = run_sif(root, idx, t, *extra)
                sif[name][t] = sif_pairs(recs, ids)
                recs = [r for r in recs if str(r["a"]) in ids and str(r["b"]) in ids]
                scores[name][t] = {
                    (
                        min(ids[str(r["a"])], ids[str(r["b"])]),
                        max(ids[str(r["a"])], ids[str(r["b"])]),
                    ): float(r["score"])
                    for r in recs
                }
                print(f"  {name} -t {t:g}: {dt:.2f} s wall  [{err}]")
            if name == "sif":
                size = sum(f.stat().st_size for f in idx.rglob("*") if f.is_file())
                segs = (idx / "segments").rglob("*")
                seg = sum(f.stat().st_size for f in segs if f.is_file())
                print(
                    f"  index: {size / 1e6:.1f} MB in all ({100 * size / total:.2f}% of the "
                    "corpus), "
                    f"segments {seg / 1e6:.1f} MB ({100 * seg / total:.2f}%)"
                )
        runs = {}
        for name, extra in variants.items():  # the default's cost: both from a fresh index
            idx = Path(tmp) / f"cost{len(extra)}"
            runs[name] = run_sif(root, idx, 25.0, *extra)[1]
        print(
            f"  fresh index, -t 25: default {runs['sif']:.2f} s, --fast {runs['sif --fast']:.2f} s "
            f"(default x{runs['sif'] / runs['sif --fast']:.2f})"
        )
    for t in THRESHOLDS:  # the error of the scores shown, against the truth
        for name in variants:
            err = np.array([v - 100 * exact.get(k, 0.0) for k, v in scores[name][t].items()])
            if len(err):
                print(
                    f"  {name} -t {t:g}: {len(err):,} pairs shown, score - truth: mean "
                    f"{err.mean():+.2f}, mean |error| {np.abs(err).mean():.2f}, "
                    f"{100 * (np.abs(err) > 10).mean():.1f}% more than 10 points off"
                )
    t0 = time.perf_counter()
    ss = ssdeep_scores(root, ids)
    print(f"  ssdeep: {time.perf_counter() - t0:.1f} s, {len(ss):,} pairs scored")
    t0 = time.perf_counter()
    tl = tlsh_scores(paths)
    print(f"  TLSH: {time.perf_counter() - t0:.1f} s, {len(tl):,} pairs within distance 300")
    mh, dt_mh = minhash_scores(paths)
    print(f"  MinHash: {dt_mh:.1f} s, {len(mh):,} pairs with an estimate > 0")
    heads = " | ".join(f"recall {lo}-{hi if hi < 1 << 40 else 'inf'} B" for lo, hi in SIZE_CLASSES)
    print(f"\n| tool | T | precision | recall | F1 | {heads} | note |")
    print("| --- " * (6 + len(SIZE_CLASSES)) + "|")
    for t in THRESHOLDS:
        pos = {k for k, v in exact.items() if 100 * v >= t}

        def line(
            name: str,
            pred: set[tuple[int, int]],
            note: str = "",
            t: float = t,
            pos: set[tuple[int, int]] = pos,
        ) -> None:
            p, r, f = prf(pred, pos)
            cls = _classes(pred, pos, fsize)
            print(f"| {name} | {t:g}% | {p:.3f} | {r:.3f} | {f:.3f} | {cls} | {note} |")

        for name in variants:
            line(name, sif[name][t])
        cut, _ = best_threshold(ss, pos, True)
        line("ssdeep", {k for k, v in ss.items() if v >= cut}, f"score >= {cut:g} (best F1)")
        cut, _ = best_threshold(tl, pos, False)
        line("TLSH", {k for k, v in tl.items() if v <= cut}, f"distance <= {cut:g} (best F1)")
        line("MinHash", {k for k, v in mh.items() if 100 * v >= t}, "containment from J")
        print(f"|  | {t:g}% | positives: {len(pos):,} |  |  | {'|  ' * len(SIZE_CLASSES)}|  |")


if __name__ == "__main__":
    main()
