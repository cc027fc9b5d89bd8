"""Fingerprint throughput against ssdeep and TLSH, and how evenly anchors cover text.

Run: ``python bench/fingerprint.py [--mb 32] [--reps 5]``.

Everything runs pinned to one core, on the same two inputs, in one run:

- text: the Python standard library's ``.py`` sources and
  ``/usr/share/common-licenses`` concatenated (present on any Debian machine
  with Python), cut to ``--mb`` megabytes;
- random: as many random bytes.

For each, the median of ``--reps`` runs of: ``sif.fingerprint_file`` for each
scheme (the file is in the page cache, so reading costs a copy), Debian's
``ssdeep`` binary on the same file (the process start, about a millisecond,
is included), and ``tlsh.hash`` of the bytes read from the file (py-tlsh).
Ratios are sif's MB/s over the peer's.

Then the coverage of real text: anchors learned from half of the source
files, fingerprints taken on the other half, against ``winnow`` tuned to
the same density; the gaps between consecutive fingerprint offsets (mean,
median, 90th percentile, max, coefficient of variation). Lower max and CV
mean a more even cover.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sif.core.anchors import learn_anchors
from sif.fingerprint import fingerprint_detail, fingerprint_file, make_params

LICENSES = Path("/usr/share/common-licenses")


def text_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    if LICENSES.is_dir():
        files += sorted(p for p in LICENSES.iterdir() if p.is_file())
    return files


def concatenate(files: list[Path], limit: int) -> bytes:
    parts, total = [], 0
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        parts.append(data)
        total += len(data)
        if total >= limit:
            break
    return b"".join(parts)[:limit]


def median_seconds(run: Callable[[], object], reps: int) -> float:
    run()  # warm up: page cache, numba's compiled kernels
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def pin_to_one_core() -> int:
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def ssdeep_runner(path: Path) -> Callable[[], object] | None:
    exe = shutil.which("ssdeep")
    if exe is None:
        return None
    # Children inherit the affinity of this process: one core.
    return lambda: subprocess.run([exe, "-s", str(path)], check=True, stdout=subprocess.DEVNULL)


def tlsh_runner(path: Path) -> Callable[[], object] | None:
    try:
        import tlsh
    except ImportError:
        return None
    return lambda: tlsh.hash(path.read_bytes())


def gap_stats(offsets: np.ndarray) -> dict[str, float]:
    gaps = np.diff(offsets).astype(np.float64)
    return {
        "n": float(len(offsets)),
        "mean": float(gaps.mean()),
        "median": float(np.median(gaps)),
        "p90": float(np.percentile(gaps, 90)),
        "max": float(gaps.max()),
        "cv": float(gaps.std() / gaps.mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=32, help="megabytes per input")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (median shown)")
    args = parser.parse_args()
    core = pin_to_one_core()
    size = args.mb << 20
    files = text_files()
    text = concatenate(files, size)
    learned = learn_anchors(
        [np.frombuffer(f.read_bytes()[: 256 << 10], dtype=np.uint8) for f in files[::2][:2000]]
    )
    random = np.random.default_rng(0).integers(0, 256, len(text), dtype=np.uint8).tobytes()
    print(
        f"one core (cpu {core}); {len(text) / 1e6:.1f} MB each of text ({len(files)} files: "
        f"Python {sys.version.split()[0]} stdlib + common-licenses) and random bytes; "
        f"median of {args.reps} runs"
    )
    print(f"anchors: {len(learned.anchors)} learned, density 1/{1 / learned.density:.0f}")
    with tempfile.TemporaryDirectory() as tmp:
        results: dict[str, dict[str, float]] = {}
        for name, content in (("text", text), ("random", random)):
            path = Path(tmp) / name
            path.write_bytes(content)
            runs: dict[str, Callable[[], object] | None] = {
                "sif winnow": lambda p=path: fingerprint_file(p),
                "sif sif94": lambda p=path: fingerprint_file(p, "sif94"),
                "sif anchors": lambda p=path: fingerprint_file(p, "anchors", anchors=learned),
                "ssdeep (binary)": ssdeep_runner(path),
                "tlsh (py-tlsh)": tlsh_runner(path),
            }
            results[name] = {}
            for label, run in runs.items():
                if run is None:
                    print(f"  {label}: not installed, skipped")
                    continue
                results[name][label] = len(content) / median_seconds(run, args.reps) / 1e6
        print()
        print(f"{'MB/s':<18}{'text':>10}{'random':>10}")
        labels = list(results["text"])
        for label in labels:
            row = "".join(f"{results[n].get(label, float('nan')):>10.1f}" for n in results)
            print(f"{label:<18}{row}")
        print()
        for peer in ("ssdeep (binary)", "tlsh (py-tlsh)"):
            if peer not in results["text"]:
                continue
            for scheme in ("sif winnow", "sif sif94", "sif anchors"):
                ratio = "  ".join(
                    f"{n} {results[n][scheme] / results[n][peer]:.2f}x" for n in results
                )
                print(f"{scheme} / {peer}: {ratio}")
    # Coverage: anchors learned on files[::2], measured on files[1::2].
    held_out = concatenate(files[1::2], size // 2)
    anchored = fingerprint_detail(held_out, "anchors", anchors=learned)
    density = len(anchored.offsets) / len(held_out)
    ww = max(1, round(2 / density) - 1)
    winnowed = fingerprint_detail(held_out, make_params("winnow", winnow_window=ww))
    print()
    print(
        f"coverage of held-out text ({len(held_out) / 1e6:.1f} MB), gaps between consecutive "
        f"fingerprints in bytes (winnow W = {ww} for the anchors' density):"
    )
    print(f"{'scheme':<10}{'count':>9}{'mean':>8}{'median':>8}{'p90':>8}{'max':>9}{'CV':>7}")
    for label, fp in (("anchors", anchored), ("winnow", winnowed)):
        s = gap_stats(fp.offsets)
        print(
            f"{label:<10}{s['n']:>9.0f}{s['mean']:>8.1f}{s['median']:>8.0f}{s['p90']:>8.0f}"
            f"{s['max']:>9.0f}{s['cv']:>7.2f}"
        )


if __name__ == "__main__":
    main()
