"""FIFOs, devices, symlinks and nested roots, as a user meets them (``python -m sif``).

Each command runs in a subprocess with a timeout: a FIFO or ``/dev/zero``
must give one clear line and an exit status within seconds, never a hang.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from treeutil import deadline, write


def sif(
    *args: str, cwd: Path | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def text_corpus(root: Path) -> None:
    rng = np.random.default_rng(5)
    for i in range(3):
        write(root / f"f{i}.txt", rng.integers(97, 123, 5000, np.uint8).tobytes())


@pytest.fixture
def index(tmp_path: Path) -> str:
    text_corpus(tmp_path / "data")
    idx = str(tmp_path / "idx")
    done = sif("index", "--index", idx, "-j", "1", "-q", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    return idx


def test_query_on_a_fifo_is_one_line_not_a_hang(tmp_path: Path, index: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody ever writes: open() for reading would wait forever
    done = sif("query", "--index", index, str(fifo), timeout=20)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"sif: warning: {fifo}: not a regular file (FIFO)"]


def test_query_on_dev_zero_is_one_line_not_endless(index: str) -> None:
    done = sif("query", "--index", index, "/dev/zero", timeout=20)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "sif: warning: /dev/zero: not a regular file (character device)"
    ]


def test_query_still_reads_a_file_and_a_symlink_to_it(tmp_path: Path, index: str) -> None:
    write(tmp_path / "copy.txt", (tmp_path / "data/f1.txt").read_bytes())
    os.symlink(tmp_path / "copy.txt", tmp_path / "link.txt")
    for name in (str(tmp_path / "copy.txt"), str(tmp_path / "link.txt")):
        done = sif("query", "--index", index, name, timeout=60)
        assert done.returncode == 0, done.stderr
        assert str(tmp_path / "data/f1.txt") in done.stdout


def swap_after_walk(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> None:
    """Run ``swap`` (a real change on disk) once the index's walk is planned, before any read."""
    import sif.index.build as build

    plan = build.plan_run

    def plan_then_swap(*args: object, **kw: object) -> object:
        got = plan(*args, **kw)  # type: ignore[arg-type]
        swap()
        return got

    monkeypatch.setattr(build, "plan_run", plan_then_swap)


def test_index_with_a_fifo_swapped_in_after_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sif.events import ScanWarning
    from sif.index.build import build_index

    text_corpus(tmp_path / "data")
    victim = tmp_path / "data/f1.txt"

    def to_fifo() -> None:
        os.unlink(victim)
        os.mkfifo(victim)

    swap_after_walk(monkeypatch, to_fifo)
    warnings: list[ScanWarning] = []
    with deadline(60):
        stats = build_index(
            [tmp_path / "data"], tmp_path / "idx", jobs=1, on_warning=warnings.append
        )
    assert warnings == [ScanWarning(str(victim), "not a regular file (FIFO)")]
    assert stats.failed == 1
    assert stats.files_read == 2


def test_index_with_a_file_renamed_over_after_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sif.events import ScanWarning
    from sif.index.build import build_index

    text_corpus(tmp_path / "data")
    write(tmp_path / "elsewhere.txt", b"not the file the walk saw " * 100)
    victim = tmp_path / "data/f1.txt"
    swap_after_walk(monkeypatch, lambda: os.rename(tmp_path / "elsewhere.txt", victim))
    warnings: list[ScanWarning] = []
    stats = build_index([tmp_path / "data"], tmp_path / "idx", jobs=1, on_warning=warnings.append)
    assert warnings == [ScanWarning(str(victim), "replaced by another file since the walk")]
    assert stats.files_read == 2


def test_dupes_with_nested_roots_under_two_jobs(tmp_path: Path) -> None:
    # t/a/b lies inside t: each file once, never listed as its own hardlink.
    for i in range(30):
        write(tmp_path / f"t/a/b/c{i}/f", b"same bytes\n")
    done = sif("dupes", "-j", "2", "--format", "json", "t", "t/a/b", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [group] = [json.loads(line) for line in done.stdout.splitlines()[1:]]  # after the header
    assert sorted(group["paths"]) == sorted(f"t/a/b/c{i}/f" for i in range(30))
    assert group["hardlinks"] == [[]] * 30
    assert "30 files scanned" in done.stderr


def test_dupes_labels_symlinks_as_symlinks(tmp_path: Path) -> None:
    write(tmp_path / "d/a", b"same bytes\n")
    write(tmp_path / "d/b", b"same bytes\n")
    os.link(tmp_path / "d/a", tmp_path / "d/a-hard")
    os.symlink("a", tmp_path / "d/a-sym")
    done = sif("dupes", "-L", "-j", "1", str(tmp_path / "d"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        done.stdout.splitlines()[0],
        f"{tmp_path}/d/a",
        f"  = {tmp_path}/d/a-hard  (hardlink)",
        f"  = {tmp_path}/d/a-sym  (symlink)",
        f"{tmp_path}/d/b",
    ]
    assert done.stdout.startswith("2 files of 11 bytes")
    done = sif("dupes", "-L", "-j", "1", "--format", "json", str(tmp_path / "d"))
    [group] = [json.loads(line) for line in done.stdout.splitlines()[1:]]  # after the header
    assert group["hardlinks"] == [[f"{tmp_path}/d/a-hard"], []]
    assert group["symlinks"] == [[f"{tmp_path}/d/a-sym"], []]
    done = sif("dupes", "-L", "-j", "1", "--format", "csv", str(tmp_path / "d"))
    rows = {r["path"]: r for r in csv.DictReader(io.StringIO(done.stdout))}
    assert rows[f"{tmp_path}/d/a-sym"]["symlink_to"] == f"{tmp_path}/d/a"
    assert rows[f"{tmp_path}/d/a-sym"]["hardlink_of"] == ""
    assert rows[f"{tmp_path}/d/a-hard"]["hardlink_of"] == f"{tmp_path}/d/a"


def test_library_readers_refuse_a_fifo_at_once(tmp_path: Path) -> None:
    from sif.content import entries
    from sif.events import ScanWarning
    from sif.fileio import NotRegularFile
    from sif.fingerprint import FingerprintParams, fingerprint_file, learn_anchors_from_files
    from sif.index.scan import scan_file

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    text_corpus(tmp_path / "data")
    with deadline(30):
        with pytest.raises(NotRegularFile, match="FIFO"):
            fingerprint_file(fifo)
        with pytest.raises(NotRegularFile, match="FIFO"):
            scan_file(fifo, FingerprintParams())
        warnings: list[ScanWarning] = []
        assert list(entries(fifo, on_warning=warnings.append)) == []
        assert warnings == [ScanWarning(str(fifo), "not a regular file (FIFO)")]
        warnings = []
        paths = [fifo, *sorted((tmp_path / "data").iterdir())]
        learn_anchors_from_files(paths, on_warning=warnings.append)
        assert warnings == [ScanWarning(str(fifo), "not a regular file (FIFO)")]


def test_index_with_nested_roots_under_two_jobs_stores_each_file_once(tmp_path: Path) -> None:
    from sif.index.build import build_index

    rng = np.random.default_rng(7)
    for i in range(30):
        write(tmp_path / f"t/a/b/c{i}/f.txt", rng.integers(97, 123, 3000, np.uint8).tobytes())
    roots = [tmp_path / "t", tmp_path / "t/a/b"]
    stats = build_index(roots, tmp_path / "idx", jobs=2)
    assert (stats.new, stats.files_read) == (30, 30)
    assert sorted(stats.read_paths) == sorted(
        str(tmp_path / f"t/a/b/c{i}/f.txt") for i in range(30)
    )


CTTY_SCRIPT = r"""
import json, os, subprocess, sys

mode, top = sys.argv[1], sys.argv[2]
os.setsid()  # a session leader with no terminal: the first terminal it opens is its own


def has_ctty():
    try:
        os.close(os.open("/dev/tty", os.O_RDWR))
    except OSError:
        return False
    return True


before = has_ctty()
master, slave = os.openpty()  # glibc opens the slave O_NOCTTY
terminal = os.ttyname(slave)  # opened by that name only (devpts): a node made elsewhere gives EIO
swap = [os.path.join(top, "a", name) for name in sorted(os.listdir(os.path.join(top, "a")))]
mounted = []


class SwapThenRead:
    # After the walk, before the reads: the terminal is bind-mounted over each file of a/.
    def stage(self, name, total=None, unit="files"):
        if name in ("comparing", "fingerprinting"):
            for path in swap:
                subprocess.run(["mount", "--bind", terminal, path], check=True)
                mounted.append(path)

    def advance(self, amount=1):
        pass

    def log(self, message):
        pass

    def close(self):
        pass


warnings = []


def run(mode):
    if mode == "index":
        from sif.index.build import build_index

        build_index([top], os.path.join(os.path.dirname(top), "idx"), jobs=1,
                    on_warning=warnings.append, progress=SwapThenRead())
    else:
        from sif.exact import find_duplicates, first

        if mode == "dupes-python":
            first._firstc = None
        progress = SwapThenRead()
        list(find_duplicates([top], jobs=1, on_warning=warnings.append, progress=progress))


try:
    run(mode)
finally:
    for path in mounted:
        subprocess.run(["umount", "-l", path], check=True)
warned = sorted(w.path for w in warnings)
print(json.dumps({"before": before, "after": has_ctty(), "warned": warned}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a bind mount needs root")
@pytest.mark.parametrize("mode", ["dupes-c", "dupes-python", "index"])
def test_a_terminal_swapped_in_for_a_file_never_becomes_the_controlling_terminal(
    tmp_path: Path, mode: str
) -> None:
    """A file replaced by a terminal after the walk (here a bind mount) is opened
    (O_NONBLOCK) before fstat refuses it: opened without O_NOCTTY by a process that has
    no terminal (a cron job, a service), it would become that process's controlling
    terminal (this test then fails on all three paths)."""
    top = tmp_path / "t"
    for d in ("a", "b"):  # pairs of equal size: every file of a/ is a candidate
        write(top / d / "small", b"x" * 300)
        write(top / d / "large", os.urandom(300_000))
    done = subprocess.run(
        [sys.executable, "-c", CTTY_SCRIPT, mode, str(top)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["before"] is False
    assert got["after"] is False
    assert got["warned"] == [str(top / "a" / "large"), str(top / "a" / "small")]
