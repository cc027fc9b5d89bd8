"""``sif index`` with two jobs: the index opened, verified and read in a thread while the
walk runs (sif.index.opening); the same outcome as one job, and its failures raised."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import sif.treewalk as treewalk
from sif.errors import IndexCorrupt, IndexInUse
from sif.events import NullProgress
from sif.index import build_index, open_store
from treeutil import write


def _tree(root: Path, n: int = 60) -> list[Path]:
    rng = np.random.default_rng(8)
    paths = []
    for i in range(n):
        p = root / f"d{i % 7}" / f"f{i}.txt"
        write(p, rng.integers(97, 123, 3000 + 10 * i, dtype=np.uint8).tobytes())
        paths.append(p)
    return paths


def open_fds() -> set[str]:
    """This process's descriptors but pipes (a pool's, which its executor closes late)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                out.add(fd)
    return out


def settled(threads: int) -> bool:
    """Whether the threads are back to ``threads`` (a pool's own end within a second)."""
    deadline = time.monotonic() + 1
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count() == threads


def test_two_jobs_plan_as_one(tmp_path: Path) -> None:
    paths = _tree(tmp_path / "t")
    idx = tmp_path / "t" / "idx"  # under the root: never walked
    first = build_index([tmp_path / "t"], idx, jobs=1)
    assert (first.new, first.unchanged) == (60, 0)
    write(paths[3], b"changed" * 500)
    paths[5].unlink()
    write(tmp_path / "t" / "new.txt", b"new" * 1000)
    again = build_index([tmp_path / "t"], idx, jobs=2)
    assert (again.new, again.changed, again.unchanged, again.removed) == (1, 1, 58, 1)
    third = build_index([tmp_path / "t"], idx, jobs=2)
    assert (third.new, third.changed, third.unchanged, third.removed) == (0, 0, 60, 0)


def test_an_index_in_use_stops_the_run_and_leaves_nothing_open(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    fds, threads = open_fds(), threading.active_count()
    with open_store(idx), pytest.raises(IndexInUse):  # type: ignore[attr-defined]
        build_index([tmp_path / "t"], idx, jobs=2)
    assert open_fds() == fds and settled(threads)


def test_a_damaged_index_is_named_before_anything_is_written(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    [seg] = os.listdir(idx / "segments")
    fp = idx / "segments" / seg / "fp.npy"
    data = bytearray(fp.read_bytes())
    data[-5] ^= 0xFF
    fp.write_bytes(bytes(data))
    with pytest.raises(IndexCorrupt, match=r"fp\.npy"):
        build_index([tmp_path / "t"], idx, jobs=2)
    assert os.listdir(idx / "segments") == [seg]


class _Interrupt(NullProgress):
    def advance(self, amount: int = 1) -> None:
        raise KeyboardInterrupt


def test_ctrl_c_during_the_walk_closes_the_index(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    fds, threads = open_fds(), threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        build_index([tmp_path / "t"], idx, jobs=2, progress=_Interrupt())
    assert open_fds() == fds and settled(threads)
    with open_store(idx):  # type: ignore[attr-defined]
        pass  # the lock was released


def test_a_run_that_reads_most_files_decodes_the_names_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C walk keeps names as bytes; a run reading most files decodes them all at once
    rather than one by one (a row at a time cost 0.34 s for 500k, all at once 0.05 s)."""
    from sif.records import RecordColumns

    _tree(tmp_path / "t")
    calls = []
    real = RecordColumns.name

    def name(self: RecordColumns, i: int) -> str:
        calls.append(bool(self._raw))
        return real(self, i)

    monkeypatch.setattr(RecordColumns, "name", name)
    stats = build_index([tmp_path / "t"], tmp_path / "idx", jobs=2)
    assert stats.new == 60 and len(calls) >= 60 and not any(calls)


_HOLDER = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "os.ftruncate(fd, 0)\n"
    "os.pwrite(fd, b'%d\\n' % os.getpid(), 0)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"  # until the test closes its stdin
)

#: What a process that should end is given before it counts as hung.
HANG = 60


@contextlib.contextmanager
def held_lock(index: Path) -> Iterator[subprocess.Popen[str]]:
    """The index's lock held by another process (a writer) until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(index / "lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(HANG)


def has_open(pid: int | str, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open."""
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        with contextlib.suppress(OSError):
            if os.readlink(f"{fds}/{fd}") == str(path):
                return True
    return False


def until(condition: Callable[[], bool]) -> None:
    """Wait (HANG seconds at most) until ``condition()`` holds."""
    deadline = time.monotonic() + HANG
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)


#: ``sif`` run with the C walk's tests' hook (sif._treec._test_hooks) set to argv[1]: its
#: helper holds what it picks under that directory until the walk stops, so that the
#: walk waits there (until Ctrl-C).
_SIF_HELD = (
    "import runpy, sys\n"
    "from sif import _treec\n"
    "_treec._test_hooks(sys.argv.pop(1).encode(), 0)\n"
    "runpy.run_module('sif', run_name='__main__')\n"
)


def test_ctrl_c_during_the_walk_while_the_lock_is_waited_for_stops_at_once(
    tmp_path: Path,
) -> None:
    """``sif index --wait -j 2``: the thread that opens the index waits for the lock
    while the walk runs; Ctrl-C during the walk ends the run (130) without waiting for
    the other writer (the thread was joined: until the other writer let go), and leaves
    the lock to it."""
    if treewalk._treec is None:
        pytest.skip("the hook is the C walk's")
    _tree(tmp_path / "t")
    write(tmp_path / "t" / "d0" / "sub" / "f.txt", b"held by the walk's helper")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    with held_lock(idx):
        argv = ["index", "--wait", "-j", "2", "-q", "--index", str(idx), str(tmp_path / "t")]
        run = subprocess.Popen(
            [sys.executable, "-c", _SIF_HELD, str(tmp_path / "t" / "d0"), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        until(lambda: has_open(run.pid, idx / "lock"))  # waiting for it
        time.sleep(0.3)  # into the walk's wait (a signal before it stops the walk too)
        run.send_signal(signal.SIGINT)
        try:
            _, err = run.communicate(timeout=HANG)
        except subprocess.TimeoutExpired:
            run.kill()
            run.communicate()
            pytest.fail("sif index --wait hung after Ctrl-C until the lock was free")
        assert run.returncode == 130, err
        assert "Traceback" not in err
    with open_store(idx):  # type: ignore[attr-defined]
        pass  # free: nobody took it


def test_a_host_interrupted_while_the_index_is_waited_for_keeps_no_lock(
    tmp_path: Path,
) -> None:
    """sif as a library: the host's Ctrl-C lands while build_index waits for the thread
    that waits for the lock. On CPython 3.11 an interrupted Thread.join marks the thread
    stopped while it runs (a later join returns at once): the abandoned thread would take
    the lock, once free, for the host's lifetime."""
    _tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    threads = threading.active_count()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def poke() -> None:  # once the thread waits for the lock, and the walk is done
        until(lambda: has_open("self", idx / "lock"))
        time.sleep(0.2)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)

    old = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with held_lock(idx):
            poker = threading.Thread(target=poke)
            poker.start()
            with pytest.raises(KeyboardInterrupt):
                build_index([tmp_path / "t"], idx, jobs=2, wait=True)
            poker.join()
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert settled(threads)  # the thread gave up; none took the lock once it was free
    with open_store(idx):  # type: ignore[attr-defined]
        pass


# A new index (two jobs, no --wait) is opened while the files are read: only the first
# commit waits for it.


def test_a_new_index_read_while_it_opens_is_the_one_job_index(tmp_path: Path) -> None:
    from treeutil import segment_content

    _tree(tmp_path / "t", 90)
    one = build_index([tmp_path / "t"], tmp_path / "one", jobs=1)
    idx = tmp_path / "t" / "idx"  # under the root, made before the walk: never walked
    two = build_index([tmp_path / "t"], idx, jobs=2)
    assert (two.new, two.unchanged, two.failed) == (90, 0, 0)
    assert one.commits == two.commits == 1
    # The same fingerprints and paths (file ids follow the order the reads ended in).
    a, b = segment_content(idx), segment_content(tmp_path / "one")
    assert sorted(v for v, _ in a[0]) == sorted(v for v, _ in b[0]) and a[2] == b[2]
    again = build_index([tmp_path / "t"], idx, jobs=2)
    assert (again.new, again.changed, again.unchanged) == (0, 0, 90)


class _SlowReads(NullProgress):
    """Counts the files read, each taking 10 ms more to collect."""

    def __init__(self) -> None:
        self.stage_name, self.read = "", 0

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        self.stage_name = name

    def advance(self, amount: int = 1) -> None:
        if self.stage_name == "fingerprinting":
            self.read += 1
            time.sleep(0.01)


def test_a_new_index_locked_by_another_run_is_in_use_and_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sif.index.build as build
    from sif.index import indexdir

    _tree(tmp_path / "t", 300)
    idx = tmp_path / "idx"
    idx.mkdir()  # a new index whose creator holds the lock: no catalog yet
    fds, threads = open_fds(), threading.active_count()
    lock = indexdir.lock(str(idx), False)
    monkeypatch.setattr(build, "BATCH_FILES", 1)
    slow = _SlowReads()
    try:
        with pytest.raises(IndexInUse):
            build_index([tmp_path / "t"], idx, jobs=2, progress=slow)
    finally:
        indexdir.unlock(lock, True)
    assert open_fds() == fds and settled(threads)
    assert not (idx / "segments").exists() or not os.listdir(idx / "segments")
    # Raised as the reads come in, not after all of them (3 s): the opening fails at once.
    assert slow.read < 150


def test_a_new_index_another_run_filled_meanwhile_is_not_written_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sif.index.build as build
    from treeutil import segment_content

    _tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    before = segment_content(idx)
    # As if the other run committed between this one's look and its lock.
    monkeypatch.setattr(build, "_fresh", lambda index, rebuild: True)
    with pytest.raises(IndexInUse, match="another run wrote this new index meanwhile"):
        build_index([tmp_path / "t"], idx, jobs=2)
    assert segment_content(idx) == before
    # With --wait a run plans on what the other wrote: nothing new.
    waited = build_index([tmp_path / "t"], idx, jobs=2, wait=True)
    assert (waited.new, waited.changed, waited.unchanged) == (0, 0, 60)
    assert segment_content(idx) == before
