"""How well ``--normalize code`` finds renamed and reformatted copies of real code.

Run: ``python bench/content_code.py [--files 60] [--min-kb 3] [--max-kb 80]``.

The corpus is the Python standard library's top-level ``.py`` modules of
``--min-kb`` to ``--max-kb`` kilobytes, sorted by name, every k-th one so
that ``--files`` remain. For each module, a plagiarised copy is made by
``tests/codemorph.py``: every name the module binds (functions, classes,
parameters, variables, and the attributes and keywords that use them) is
consistently renamed, the layout is redone by ``ast.unparse`` (comments
dropped, quotes, spacing and parentheses redone), reindented to two spaces,
with two blank lines in three dropped.

Similarity is the score ``sif similar`` compares with its threshold: the
containment of the smaller set of distinct fingerprints in the larger,
``max(C(A, B), C(B, A))``, default ``winnow`` fingerprints, over the raw
bytes and over the ``code`` view (:func:`sif.normalizers.normalize_code`).
As a control for false positives, each module is also compared with the
next one in the list, and every pair of distinct modules (unrelated code).
Printed: one line per module, then the distributions (mean, median, 10th
percentile, share at or above 25% and 50%) and the code view's throughput.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

from sif.fingerprint import fingerprint
from sif.normalizers import normalize_code

# The plagiarist's transformer is the tests' helper, shared on purpose.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from codemorph import morph


def similarity(a: bytes, b: bytes) -> float:
    fa, fb = np.unique(fingerprint(a)), np.unique(fingerprint(b))
    if len(fa) == 0 or len(fb) == 0:
        return 0.0
    shared = len(np.intersect1d(fa, fb))
    return max(shared / len(fa), shared / len(fb))


def corpus(count: int, min_kb: int, max_kb: int) -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p
        for p in stdlib.glob("*.py")
        if min_kb * 1024 <= p.stat().st_size <= max_kb * 1024 and not p.name.startswith("_")
    )
    step = max(1, len(files) // count)
    return files[::step][:count]


def summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p10 = ordered[len(ordered) // 10]
    at25 = sum(v >= 0.25 for v in values) / len(values)
    at50 = sum(v >= 0.50 for v in values) / len(values)
    return (
        f"{name:<26} mean {statistics.mean(values):5.2f}  median {statistics.median(values):5.2f}"
        f"  p10 {p10:5.2f}  >=25%: {at25:5.0%}  >=50%: {at50:5.0%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=60)
    ap.add_argument("--min-kb", type=int, default=3)
    ap.add_argument("--max-kb", type=int, default=80)
    args = ap.parse_args()

    rows = []
    normalised_bytes = 0
    normalise_time = 0.0
    files = corpus(args.files, args.min_kb, args.max_kb)
    sources: list[tuple[str, bytes, bytes, bytes, bytes]] = []
    for path in files:
        original = path.read_bytes()
        try:
            copy = morph(original.decode("utf-8")).encode()
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        start = time.perf_counter()
        code_a = normalize_code(original, path.name)
        code_b = normalize_code(copy, path.name)
        normalise_time += time.perf_counter() - start
        normalised_bytes += len(original) + len(copy)
        assert code_a is not None and code_b is not None
        sources.append((path.name, original, copy, code_a, code_b))

    print(f"{'module':<22} {'bytes':>7} {'raw':>6} {'code':>6}   unrelated: {'raw':>6} {'code':>6}")
    for i, (name, original, copy, code_a, code_b) in enumerate(sources):
        _, other, _, other_code, _ = sources[(i + 1) % len(sources)]
        row = (
            similarity(original, copy),
            similarity(code_a, code_b),
            similarity(original, other),
            similarity(code_a, other_code),
        )
        rows.append(row)
        print(
            f"{name:<22} {len(original):>7} {row[0]:>6.2f} {row[1]:>6.2f}"
            f"              {row[2]:>6.2f} {row[3]:>6.2f}"
        )
    print()
    print(f"{len(rows)} modules of the Python {sys.version.split()[0]} standard library")
    print(summary("copy, raw", [r[0] for r in rows]))
    print(summary("copy, --normalize code", [r[1] for r in rows]))
    print(summary("unrelated, raw", [r[2] for r in rows]))
    print(summary("unrelated, code", [r[3] for r in rows]))
    # Every pair of distinct modules, not only neighbours: the false-positive control.
    sets = [(np.unique(fingerprint(o)), np.unique(fingerprint(c))) for _, o, _, c, _ in sources]
    for label, k in (("all unrelated pairs, raw", 0), ("all unrelated pairs, code", 1)):
        scores = []
        named = []
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                a, b = sets[i][k], sets[j][k]
                if len(a) and len(b):
                    shared = len(np.intersect1d(a, b))
                    scores.append(max(shared / len(a), shared / len(b)))
                    named.append((scores[-1], sources[i][0], sources[j][0]))
        print(summary(label, scores) + f"  ({len(scores)} pairs)")
        top = sorted(named, reverse=True)[:3]
        print(" " * 27 + "highest: " + ", ".join(f"{a}~{b} {v:.2f}" for v, a, b in top))
    print(
        f"code view throughput: {normalised_bytes / normalise_time / 1e6:.2f} MB/s "
        f"({normalised_bytes / 1e6:.1f} MB in {normalise_time:.2f} s, Pygments lexing)"
    )


if __name__ == "__main__":
    main()
