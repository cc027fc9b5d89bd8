"""Errors and exit codes of every command, run as ``python -m sif`` in a subprocess.

A dead worker, Ctrl-C, a root that does not exist, an output directory that
does not exist, an exception nobody expected: each is one line (or nothing,
for Ctrl-C) and the documented exit status, never a traceback, and the index
is usable afterwards.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from treeutil import write

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
]


def text_tree(root: Path, files: int, size: int, seed: int = 1) -> Path:
    """``files`` distinct texts of ``size`` bytes (words drawn at random) in a few directories."""
    rng = np.random.default_rng(seed)
    for i in range(files):
        words = rng.choice(WORDS, size // 4)
        data = " ".join(words).encode()[: size - 8] + b"%08d" % i
        write(root / f"d{i % 4}" / f"f{i}.txt", data)
    return root


def wide_tree(root: Path, dirs: int, per_dir: int) -> Path:
    """Many small files of one size in many directories: a walk of some length."""
    for d in range(dirs):
        sub = root / str(d % 10) / str(d)
        sub.mkdir(parents=True)
        for f in range(per_dir):
            (sub / str(f)).write_bytes(os.urandom(200))
    return root


def sif(*args: str, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,  # type: ignore[arg-type]
    )


def children(pid: int) -> list[int]:
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


def interrupt(
    args: list[str],
    tmp: Path,
    after: float,
    ready: Callable[[int], bool] | None = None,
    ignored: bool = False,
    workers: bool = True,
) -> tuple[int, str]:
    """Run sif, press Ctrl-C (SIGINT to its process group) ``after`` s once its workers run
    (``workers``: it has child processes) and, with ``ready``, once ``ready(pid)`` says
    the run is where the test wants it; ``ignored``: sif is started with SIGINT ignored
    (as a script's background job)."""

    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    err_path = tmp / "stderr"
    with open(err_path, "w") as err, open(os.devnull, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sif", *args],
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=ignore if ignored else None,
        )
        deadline = time.monotonic() + 60
        while workers and not children(proc.pid):
            assert proc.poll() is None, "sif ended before its workers started"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        while ready is not None and not ready(proc.pid):
            assert proc.poll() is None, "sif ended before it was ready for Ctrl-C"
            assert time.monotonic() < deadline
            time.sleep(0.002)
        time.sleep(after)
        assert proc.poll() is None, "sif ended before Ctrl-C: make the tree larger"
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=60)
    deadline = time.monotonic() + 10
    while children(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the workers end with the run
    assert not children(proc.pid)
    return rc, err_path.read_text()


# --- Ctrl-C -------------------------------------------------------------------------------


def open_under(pid: int, top: Path, files: bool) -> bool:
    """Whether process ``pid`` has a file (``files``) or anything under ``top`` open."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(f"{top}/") and (not files or os.path.isfile(target)):
            return True
    return False


@pytest.mark.parametrize(
    "extra, workers, files",
    [
        ([], False, False),  # the C walk and first blocks, threads: stopped in the walk
        ([], False, True),  # ... stopped while the first blocks are read
        (["--include", "*"], True, False),  # a pattern: the Python walk, a pool of workers
    ],
)
def test_ctrl_c_in_dupes_stops_quietly_with_130(
    tmp_path: Path, extra: list[str], workers: bool, files: bool
) -> None:
    tree = wide_tree(tmp_path / "t", 4000, 25)
    rc, err = interrupt(
        ["dupes", "-j", "2", *extra, str(tree)],
        tmp_path,
        0.02 if workers else 0.005,
        ready=lambda pid: open_under(pid, tree, files),
        workers=workers,
    )
    assert rc == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Aborted" not in err


@pytest.mark.parametrize("extra, workers", [([], False), (["--include", "*"], True)])
def test_a_run_started_with_ctrl_c_ignored_keeps_ignoring_it(
    tmp_path: Path, extra: list[str], workers: bool
) -> None:
    """A script's background job (``sif dupes ... &``) ignores SIGINT, by the shell's rule:
    a Ctrl-C meant for the job in the foreground leaves it running to its end (threads,
    or with a pattern a pool of workers)."""
    tree = wide_tree(tmp_path / "t", 4000, 25)
    rc, err = interrupt(
        ["dupes", "-j", "2", *extra, str(tree)],
        tmp_path,
        0.02,
        ready=lambda pid: open_under(pid, tree, False),
        ignored=True,
        workers=workers,
    )
    assert rc == 0, err
    assert "groups of replicas" in err and "0 warnings" in err


def test_ctrl_c_in_index_stops_quietly_and_the_index_stays_usable(tmp_path: Path) -> None:
    tree = text_tree(tmp_path / "t", 24, 2 << 20)
    index = tmp_path / "idx"
    args = ["index", "-j", "2", "--index", str(index), "--checkpoint-bytes", str(4 << 20)]
    # Mid-run: right after the first checkpoint's segment (4 MB of 48 MB), not after a
    # fixed delay (indexing got fast enough to end first).
    rc, err = interrupt(
        [*args, str(tree)], tmp_path, 0.0, ready=lambda _: any((index / "segments").glob("*"))
    )
    # 130, or the signal's own status when it lands in the interpreter's last teardown
    # (its handlers are reset there): the shell shows 130 for both.
    assert rc in (130, -signal.SIGINT), err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Aborted" not in err
    again = sif(*args, str(tree))
    assert again.returncode == 0, again.stderr
    assert "24 new" in again.stderr or "unchanged" in again.stderr
    counts = sif("index", "--index", str(index), str(tree))
    assert counts.returncode == 0 and "24 unchanged" in counts.stderr, counts.stderr


# --- a worker that dies ---------------------------------------------------------------------

DIE_IN_A_WORKER = r"""
import os, signal, sys

MAIN, REAL = os.getpid(), None  # REAL: the function a script swaps for or_die

def or_die(arg):  # REAL(arg), but a worker that calls it dies, as under the OOM killer
    if os.getpid() != MAIN:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL(arg)
"""

DYING_WORKER = (
    DIE_IN_A_WORKER
    + r"""
import sif.index.build as build

REAL, build._scan_batch = build._scan_batch, or_die
from sif.cli import main
main(["index", "-j", "2", "--index", sys.argv[1], sys.argv[2]], prog_name="sif")
"""
)


def ends_with_a_dead_worker(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (a worker kills itself): within a minute, exit 3 and one line."""
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    assert time.monotonic() - started < 60
    assert out.returncode == 3, out.stderr
    assert out.stderr.splitlines() == [
        "sif: error: a worker process died (killed by signal 9: out of memory?)"
    ]
    return out


def test_a_dead_worker_ends_index_with_one_line_and_exit_3(tmp_path: Path) -> None:
    tree = text_tree(tmp_path / "t", 12, 64 << 10)
    index = tmp_path / "idx"
    ends_with_a_dead_worker(DYING_WORKER, str(index), str(tree))
    again = sif("index", "-j", "2", "--index", str(index), str(tree))  # the lock is free
    assert again.returncode == 0, again.stderr
    assert "12 new" in again.stderr


DYING_DUPES_WORKER = (
    DIE_IN_A_WORKER
    + r"""
import sif.exact.pipeline as pipeline
import sif.exact.rounds as rounds

REAL, rounds._refine_share = rounds._refine_share, or_die
pipeline._refine_share = or_die
pipeline.PARALLEL_MIN_FILES = 0  # shares for the worker, however few the files
from sif.cli import main
main(["dupes", "-j", "2", "--include", "*", sys.argv[1]], prog_name="sif")
"""
)


def test_a_dead_worker_ends_dupes_with_one_line_and_exit_3(tmp_path: Path) -> None:
    """The pool's path of ``sif dupes`` (a pattern: the Python walk, worker processes)."""
    for g in range(16):  # 16 sizes: 8 shares, some for the worker
        data = os.urandom(1000 + g)
        for k in range(3):
            write(tmp_path / "t" / f"g{g}" / f"f{k}", data)
    out = ends_with_a_dead_worker(DYING_DUPES_WORKER, str(tmp_path / "t"))
    assert out.stdout == ""  # no group from a run that stopped


# --- paths that do not exist ----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["dupes"],
        ["index", "--index", "{tmp}/new-index"],
        ["similar", "--index", "{tmp}/new-index"],
        ["query", "--index", "{tmp}/new-index"],
        ["fuzzysum"],
        ["fuzzysum", "--compare", "{tmp}/t/a.txt"],
        ["anchors", "learn", "-o", "{tmp}/a.json"],
    ],
)
def test_a_path_that_does_not_exist_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    write(tmp_path / "t/a.txt", b"some text that is here\n" * 10)
    args = [a.format(tmp=tmp_path) for a in command]
    missing = tmp_path / "no/such/path"
    out = sif(*args, str(missing))
    assert out.returncode == 2, out.stderr
    assert f"{missing}: no such file or directory" in out.stderr
    assert "Traceback" not in out.stderr
    assert sorted(os.listdir(tmp_path)) == ["t"]  # nothing created: no index, no output


def test_anchors_output_in_a_missing_directory_is_checked_before_the_work(
    tmp_path: Path,
) -> None:
    text_tree(tmp_path / "t", 3, 4000)
    out = sif("anchors", "learn", "-o", str(tmp_path / "no/such/dir/a.json"), str(tmp_path / "t"))
    assert out.returncode == 2
    assert f"no such directory {tmp_path}/no/such/dir" in out.stderr
    assert "anchors learned" not in out.stderr  # nothing was read
    ok = sif("anchors", "learn", "-o", str(tmp_path / "a.json"), str(tmp_path / "t"))
    assert ok.returncode == 0, ok.stderr


# --- the last resort ------------------------------------------------------------------------

BROKEN = r"""
import sys
import sif.exact.pipeline as pipeline

def broken(*args, **kwargs):
    raise RuntimeError("something nobody expected\nover two lines")

pipeline.parallel_walk = broken
from sif.cli import main
main(["dupes", sys.argv[1]], prog_name="sif")
"""


def test_an_unexpected_exception_is_one_line_and_exit_3(tmp_path: Path) -> None:
    write(tmp_path / "a", b"x")
    out = subprocess.run(
        [sys.executable, "-c", BROKEN, str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 3
    assert out.stderr.splitlines() == [
        "sif: error: RuntimeError: something nobody expected over two lines",
        "sif: (SIF_DEBUG=1 shows the traceback)",
    ]
    debug = subprocess.run(
        [sys.executable, "-c", BROKEN, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "SIF_DEBUG": "1"},
    )
    assert (
        debug.returncode == 3 and "Traceback" in debug.stderr and "def broken" not in debug.stderr
    )


def test_ctrl_c_while_the_interpreter_shuts_down_is_still_130(tmp_path: Path) -> None:
    """A Ctrl-C after the work (CI saw one land while sif index exited): quiet, 130."""
    (tmp_path / "f.txt").write_text("some words to sum up\n" * 20)
    script = (
        "import atexit, os, signal, sys, time\n"
        "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(2)))\n"
        f"sys.argv = ['sif', 'fuzzysum', {str(tmp_path / 'f.txt')!r}]\n"
        "from sif.cli import run\n"
        "run()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 130, done.stderr
    assert done.stdout.strip().endswith("f.txt")  # the work was done and printed
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
