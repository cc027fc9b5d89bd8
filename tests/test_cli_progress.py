"""The progress bar on a terminal: human units, a spinner for a stage without a total."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

from sif.cli.common import progress_amount
from treeutil import write


def test_amounts_in_human_units() -> None:
    assert progress_amount(0, 93_000_000, "bytes") == "0 B/88.7 MiB"
    assert progress_amount(1536, 3 << 30, "bytes") == "1.5 KiB/3.0 GiB"
    assert progress_amount(1234, 5678, "files") == "1,234/5,678 files"
    assert progress_amount(12, 40, "pairs") == "12/40 pairs"
    # No total: what is done so far, nothing at first (the spinner shows it works).
    assert progress_amount(0, None, "files") == ""
    assert progress_amount(20_000, None, "files") == "20,000 files"
    assert progress_amount(5 << 20, None, "bytes") == "5.0 MiB"


def on_a_terminal(args: list[str]) -> tuple[int, bytes]:
    """Run ``sif ARGS`` with stderr on a pseudo-terminal; its return code and what it drew."""
    master, slave = os.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sif", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    drawn = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            drawn += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), drawn


def test_index_progress_shows_mib_and_a_spinner(tmp_path: Path) -> None:
    for i in range(6):
        write(tmp_path / f"t/f{i}.txt", (b"%06d some text that goes on " % i) * 40_000)
    rc, drawn = on_a_terminal(
        ["index", "-j", "2", "--index", str(tmp_path / "idx"), str(tmp_path / "t")]
    )
    assert rc == 0, drawn
    assert b"fingerprinting" in drawn and b"/6.9 MiB" in drawn  # 6 x 1.15 MiB, in MiB
    assert b"/?" not in drawn  # a stage without a total has no "0/?"
    assert "⠋".encode() in drawn  # rich's spinner (dots) for "walking"
