"""SIGKILL at random moments of ``sif link`` and ``sif remove --to``: nothing is ever lost.

After each kill, every path of the original tree exists with its original
bytes (for ``--to``: at its place or at its destination, never both nor
neither), and ``sif resume`` or ``sif undo`` of the journal completes.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from actionutil import report_of, sif, tmpfs

GROUPS = 2000


def make_tree(root: Path, seed: int) -> dict[str, bytes]:
    rng = random.Random(seed)
    files = {}
    for i in range(GROUPS):
        data = rng.randbytes(rng.randrange(1, 600))
        for side in ("a", "b"):
            p = root / side / str(i % 40) / f"f{i}"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            files[str(p)] = data
    return files


def small_batches() -> None:
    """A descriptor limit that makes batches of about 128 steps (not 1024): a journal
    that grows in many steps, so kills fall at many moments of the run."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (64 + 8 * 128, hard))


def kill_at_random(
    args: list[str], journal: Path, env: dict[str, str], rng: random.Random, small: bool
) -> None:
    """Run sif and SIGKILL it once its journal has grown by a random number of bytes (in
    batches of ~128 steps), or that and a random delay (in batches of 1024, which the
    journal shows in two or three writes: the delay puts the kill inside a batch)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sif", *args],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=small_batches if small else None,
    )
    grow = rng.randrange(0, 500_000)  # ~300 bytes a step: anywhere in 2000 steps
    start = None
    while proc.poll() is None:
        try:
            size = journal.stat().st_size
        except FileNotFoundError:
            time.sleep(0.002)
            continue
        start = size if start is None else start
        if size - start >= grow:
            if not small:
                time.sleep(rng.uniform(0, 0.05))
            break
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_kill_link_and_move_at_random_moments() -> None:
    rng = random.Random(12)
    with tmpfs("256m") as base:
        env = {"XDG_STATE_HOME": str(base / "state")}
        mid_run = 0
        for round_ in range(20):  # the issue asks for twenty kills
            moving = round_ % 2 == 1
            root = base / "t"
            files = make_tree(root, round_)
            report = base / "report.json"
            report_of(root / "a", root / "b", path=report)  # sif dupes --format json, here
            journal = base / f"journal-{round_}.jsonl"
            dest = base / "moved"
            args = ["remove", "--to", str(dest)] if moving else ["link"]
            argv = [*args, "-q", "--journal", str(journal), str(report)]
            kill_at_random(argv, journal, env, rng, small=round_ % 8 < 4)
            for path, data in files.items():
                moved = dest / os.path.relpath(path, root / "b")
                if moving and path.startswith(str(root / "b")):
                    here, there = os.path.lexists(path), os.path.lexists(moved)
                    assert here != there, path
                    assert Path(path if here else moved).read_bytes() == data
                else:
                    assert Path(path).read_bytes() == data
            finish = "undo" if round_ % 4 >= 2 else "resume"
            if journal.exists():
                text = journal.read_text()
                ended = '"j":"end"' in text
                mid_run += '"j":"begin"' in text and not ended
                r = sif(finish, str(journal), env=env)
                if ended and finish == "resume":  # the kill came after the run's end
                    assert r.returncode == 3 and "nothing to resume" in r.stderr, r.stderr
                else:
                    assert r.returncode == 0, r.stderr
            left = [p for p in map(str, root.rglob("*")) if ".sif-" in p]
            assert left == []
            for path, data in files.items():
                in_b = path.startswith(str(root / "b"))
                moved = dest / os.path.relpath(path, root / "b")
                if moving and in_b and finish == "resume" and journal.exists():
                    assert not os.path.lexists(path) and moved.read_bytes() == data
                else:
                    assert Path(path).read_bytes() == data
                if not moving and in_b and journal.exists():
                    twin = path.replace(str(root / "b"), str(root / "a"), 1)
                    linked = os.stat(path).st_ino == os.stat(twin).st_ino
                    assert linked == (finish == "resume"), path
            shutil.rmtree(root)
            shutil.rmtree(dest, ignore_errors=True)
        assert mid_run >= 10  # most kills fell in the middle of a run
