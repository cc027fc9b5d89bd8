"""sif similar's options: --wait, and options that do not fit together (subprocess runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from textgen import text
from treeutil import write

HOLD = """
import sys, time
from sif.index.duck import DuckStore
store = DuckStore(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
store.close()
"""


def sif(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def tree(root: Path) -> None:
    body = text(1, 5000)
    write(root / "a.txt", body + text(2, 500))
    write(root / "b.txt", body + text(3, 500))


def test_wait_waits_for_the_writer_and_without_it_the_message_names_it(tmp_path: Path) -> None:
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    assert sif("similar", "-q", "--index", idx, tmp_path / "t").returncode == 0
    write(tmp_path / "t/c.txt", text(4, 3000))  # a change: the run must write the index
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(idx), "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        busy = sif("similar", "-q", "--index", idx, tmp_path / "t")
        assert busy.returncode == 3
        assert "index in use" in busy.stderr and "--wait" in busy.stderr
        t0 = time.monotonic()
        waited = sif("similar", "-q", "--wait", "--index", idx, "--format", "json", tmp_path / "t")
        assert waited.returncode == 0, waited.stderr
        assert time.monotonic() - t0 > 1.0  # it did wait for the holder to let go
        assert len(waited.stdout.splitlines()) == 1
    finally:
        holder.wait(timeout=30)


def test_sets_with_csv_is_a_usage_error(tmp_path: Path) -> None:
    tree(tmp_path / "t")
    run = sif(
        "similar",
        "--index",
        tmp_path / "idx",
        "--sets",
        "cliques",
        "--format",
        "csv",
        tmp_path / "t",
    )
    assert run.returncode == 2 and "--sets" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "idx").exists()  # refused before any work
    ok = sif(
        "similar",
        "-q",
        "--index",
        tmp_path / "idx",
        "--sets",
        "cliques",
        "--format",
        "json",
        tmp_path / "t",
    )
    assert ok.returncode == 0 and '"set":"cliques"' in ok.stdout
