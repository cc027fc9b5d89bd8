"""bench/explain: `sif explain` on pairs of 1, 10 and 100 MB against GNU diff and copydetect.

    python bench/explain.py [--sizes 1,10,100] [--work DIR] [--copydetect-max 10] [--timeout 600]

Each pair is a text A of generated prose (words of a fixed vocabulary,
lines under 80 columns) and B made of A's pieces: the first 30%, 10% of
unrelated text, A's 50-80%, then A's 30-50% (moved), then A's 10-20% again
(a repeat), with one byte changed every 64 KiB. Each tool runs as its own
process, measured by GNU time (wall seconds, peak RSS): `sif explain
--format json` (every passage), `diff` (GNU diffutils, its normal output),
and copydetect's HTML report on the same pair (`-f`: its token filter
leaves nothing of plain text; only up to --copydetect-max MB: it is pure
Python). The load (`uptime`) is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

WORDS = [
    "".join(random.Random(i).choice("bcdfghjklmnprstvwz") + random.Random(i + 7).choice("aeiou"))
    * (1 + i % 3)
    + str(i % 10)
    for i in range(4096)
]


def prose(seed: int, size: int) -> bytes:
    """``size`` bytes of text: words of the vocabulary, lines under 80 columns."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = np.array([w.encode() for w in WORDS], dtype=object)
    out: list[bytes] = []
    n = 0
    while n < size:
        idx = rng.integers(0, len(WORDS), 100_000)
        words = vocab[idx]
        lines = [b" ".join(words[i : i + 10]) for i in range(0, len(words), 10)]
        chunk = b"\n".join(lines) + b"\n"
        out.append(chunk)
        n += len(chunk)
    return b"".join(out)[:size]


def make_pair(size: int, work: Path) -> tuple[Path, Path]:
    a = prose(size, size)
    n = len(a)
    other = prose(size + 1, n // 10)
    b = bytearray(
        a[: 3 * n // 10]
        + other
        + a[5 * n // 10 : 8 * n // 10]
        + a[3 * n // 10 : 5 * n // 10]
        + a[n // 10 : 2 * n // 10]
    )
    for i in range(0, len(b), 64 << 10):
        b[i] = ord("#") if b[i] != ord("#") else ord("%")
    pa, pb = work / f"a{size >> 20}.txt", work / f"b{size >> 20}.txt"
    pa.write_bytes(a)
    pb.write_bytes(bytes(b))
    return pa, pb


def measure(cmd: list[str], timeout: float, cwd: Path | None = None) -> tuple[str, str]:
    """(wall seconds, peak RSS in MB) of ``cmd`` under GNU time, or ("timeout", "-")."""
    log = Path(tempfile.mktemp(prefix="time-"))
    proc = subprocess.Popen(
        ["/usr/bin/time", "-f", "%e %M", "-o", str(log), *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        start_new_session=True,  # a timeout ends the tool too, not only GNU time
    )
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout", "-"
    wall, rss = log.read_text().split()[-2:]
    log.unlink()
    return f"{float(wall):.2f}", f"{int(rss) / 1024:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1,10,100", help="pair sizes in MB")
    ap.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    ap.add_argument("--copydetect-max", type=int, default=10, help="largest MB given to copydetect")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="sif-bench-explain-"))
    work.mkdir(parents=True, exist_ok=True)
    copydetect = shutil.which("copydetect")
    # Compile the kernels once, outside the figures (numba caches them on disk).
    tiny_a, tiny_b = work / "warm_a.txt", work / "warm_b.txt"
    tiny_a.write_bytes(prose(1, 5000))
    tiny_b.write_bytes(prose(1, 5000)[1000:])
    subprocess.run(
        [sys.executable, "-m", "sif", "explain", str(tiny_a), str(tiny_b)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"load: {os.popen('uptime').read().strip()}")
    print(f"{'MB':>4} {'tool':<12} {'wall s':>8} {'peak MB':>8}  note")
    for mb in (int(x) for x in args.sizes.split(",")):
        pa, pb = make_pair(mb << 20, work)
        out = work / f"explain{mb}.json"
        cmd = [
            sys.executable,
            "-m",
            "sif",
            "explain",
            "--format",
            "json",
            "-o",
            str(out),
            str(pa),
            str(pb),
        ]
        wall, rss = measure(cmd, args.timeout)
        note = ""
        if out.exists():
            import json

            lines = out.read_text().splitlines()
            s = json.loads(lines[-1])
            note = (
                f"{s['passages']} passages, A in B {100 * s['a_in_b']:.1f}%, "
                f"B in A {100 * s['b_in_a']:.1f}%"
            )
        print(f"{mb:>4} {'sif explain':<12} {wall:>8} {rss:>8}  {note}", flush=True)
        wall, rss = measure(["diff", str(pa), str(pb)], args.timeout)
        print(f"{mb:>4} {'GNU diff':<12} {wall:>8} {rss:>8}", flush=True)
        if copydetect and mb <= args.copydetect_max:
            ta, tb = work / f"cd{mb}" / "a", work / f"cd{mb}" / "b"
            for d, src in ((ta, pa), (tb, pb)):
                d.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, d / src.name)
            cmd = [
                copydetect,
                "-t",
                str(ta),
                "-r",
                str(tb),
                "-e",
                "txt",
                "-a",
                "-f",  # no tokenising: on text, its filter leaves nothing to compare
                "-d",
                "0",
                "-O",
                str(work / f"cd{mb}" / "report.html"),
            ]
            wall, rss = measure(cmd, args.timeout, cwd=work)
            print(f"{mb:>4} {'copydetect':<12} {wall:>8} {rss:>8}  (its HTML report)", flush=True)
        elif not copydetect:
            print(
                f"{mb:>4} {'copydetect':<12} {'-':>8} {'-':>8}  "
                "not installed (pip install copydetect)"
            )
        else:
            print(f"{mb:>4} {'copydetect':<12} {'-':>8} {'-':>8}  skipped (over --copydetect-max)")
    print(f"load: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
