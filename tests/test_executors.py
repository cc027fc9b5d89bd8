"""The worker pool: a worker that dies ends the run with WorkerDied, within seconds."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Iterator

import pytest

from sif.errors import WorkerDied
from sif.executors import WorkerPool, fork_pool, shared_map

MAIN = os.getpid()


@pytest.fixture
def watchdog() -> Iterator[None]:
    """Fail, instead of hanging forever, if the test takes over 60 s."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError("the run hung")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def square_or_die(x: int) -> int:
    """``x * x``; a worker (not this process) asked for 3 kills itself, as the OOM killer would."""
    if x == 3 and os.getpid() != MAIN:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.01)
    return x * x


def square(x: int) -> int:
    return x * x


def test_shared_map_gives_every_result() -> None:
    pool = fork_pool(3)
    assert isinstance(pool, WorkerPool) and pool.processes == 2
    try:
        got = dict(shared_map(square, range(200), pool))
    finally:
        pool.shutdown()
    assert got == {i: i * i for i in range(200)}
    assert fork_pool(1) is None
    assert list(shared_map(square, [2, 5], None)) == [(0, 4), (1, 25)]


def square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_shared_map_without_sharing_runs_nothing_here(watchdog: None) -> None:
    # A coordinator: every item goes to a worker, every result comes back.
    pool = fork_pool(3)
    assert pool is not None
    try:
        got = dict(shared_map(square_and_pid, range(100), pool, share=False))
    finally:
        pool.shutdown()
    assert {i: v for i, (v, _) in got.items()} == {i: i * i for i in range(100)}
    assert MAIN not in {pid for _, pid in got.values()}
    with_sharing = fork_pool(2)
    try:
        pids = {pid for _, (_, pid) in shared_map(square_and_pid, range(100), with_sharing)}
    finally:
        assert with_sharing is not None
        with_sharing.shutdown()
    assert MAIN in pids


def test_a_killed_worker_raises_worker_died_within_seconds(watchdog: None) -> None:
    pool = fork_pool(3)
    assert pool is not None
    started = time.monotonic()
    try:
        # The workers get the first items: item 3 is one of theirs.
        with pytest.raises(WorkerDied, match=r"^a worker process died \(killed by signal 9: out"):
            list(shared_map(square_or_die, range(100), pool, local=square))
    finally:
        pool.shutdown()
    assert time.monotonic() - started < 10
    with pytest.raises(WorkerDied):  # the pool stays broken: no later task waits forever
        pool.submit(square, 2).result()


def test_shutdown_ends_busy_workers_at_once(watchdog: None) -> None:
    with WorkerPool(2) as pool:
        tasks = [pool.submit(time.sleep, 30) for _ in range(2)]
        started = time.monotonic()
    assert time.monotonic() - started < 10
    assert all(t.done() for t in tasks)


def test_workers_ignore_sigint(watchdog: None) -> None:
    """Ctrl-C reaches the whole process group: only the parent may stop the run."""
    with WorkerPool(1) as pool:
        pid = pool.submit(os.getpid).result()
        os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        assert pool.submit(square, 7).result() == 49


# A counter in shared memory, made before any pool forks: the items the workers ran.
RAN = multiprocessing.get_context("fork").Value("i", 0)


def count_and_pid(x: int) -> int:
    with RAN.get_lock():
        RAN.value += 1
    time.sleep(0.005)
    return os.getpid()


def wait_for_workers(x: int) -> int:
    """Run here: holds this process until the workers ran 30 items (or 20 s pass)."""
    deadline = time.monotonic() + 20
    while RAN.value < 30 and time.monotonic() < deadline:
        time.sleep(0.01)
    return -RAN.value


def test_workers_are_fed_while_this_process_runs_a_long_item(watchdog: None) -> None:
    # Before the feeder thread, a worker's queue was refilled only when this process came
    # back from its own item: the worker ran its two and idled, and this wait timed out.
    with RAN.get_lock():
        RAN.value = 0
    pool = fork_pool(2)
    assert pool is not None
    try:
        got = dict(shared_map(count_and_pid, range(60), pool, local=wait_for_workers))
    finally:
        pool.shutdown()
    assert len(got) == 60
    here = [v for v in got.values() if v <= 0]
    assert here and here[0] <= -30  # the first item run here saw the workers run 30


def items_then_fail() -> Iterator[int]:
    yield from range(10)
    raise ValueError("item 10 cannot be made")


@pytest.mark.parametrize("depth", [1, 2])
def test_an_item_that_fails_to_be_made_raises_and_nothing_hangs(watchdog: None, depth: int) -> None:
    pool = fork_pool(3)
    assert pool is not None
    try:
        with pytest.raises(ValueError, match="item 10"):
            list(shared_map(square, items_then_fail(), pool, depth=depth))
        # The pool still works, and a run left early stops feeding it.
        for i, _ in shared_map(square, range(1000), pool, depth=depth):
            if i > 5:
                break
        assert dict(shared_map(square, range(50), pool, depth=1)) == {i: i * i for i in range(50)}
    finally:
        pool.shutdown()


#: Run in a process of its own (a regression would hang it, and the test's timeout ends
#: it): a worker asked for 3 or more does what a real death in SimpleQueue.put leaves, taking the
#: queue's write lock, writing the start of a 1 MiB result and being killed (the OOM
#: killer, or a SIGTERM in the middle of a large result); the other workers then block on
#: that lock, and the executor's thread waits for the rest of the message.
MID_RESULT = """
import os, signal, struct, sys, time
from sif.errors import WorkerDied
from sif.executors import WorkerPool, shared_map

MAIN = os.getpid()

def result_queue():
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "_process_worker":
                return frame.f_locals["result_queue"]
            frame = frame.f_back
    raise AssertionError("not in a pool's worker")

def die_in_a_result(x):
    if x >= 3 and os.getpid() != MAIN:
        q = result_queue()
        q._wlock.acquire()
        q._writer._send(struct.pack("!i", 1 << 20) + b"\\x80" * 100)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.02)
    return x * x

how = sys.argv[1]
pool = WorkerPool(2)
start = time.monotonic()
try:
    if how == "tasks":
        tasks = [pool.submit(die_in_a_result, x) for x in range(8)]
        for t in tasks:
            t.result()
    elif how == "shared_map":
        dict(shared_map(die_in_a_result, range(40), pool, depth=1))
    else:  # shut down once the worker is dead, then ask for the result
        task = pool.submit(die_in_a_result, 3)
        while not any(p.exitcode is not None for p in pool._workers):
            time.sleep(0.01)
        pool.shutdown()
        task.result()
    print("no error")
except WorkerDied as e:
    print("WorkerDied:", e, "after", round(time.monotonic() - start, 1))
finally:
    pool.shutdown()
print("ended after", round(time.monotonic() - start, 1))
"""


@pytest.mark.parametrize("how", ["tasks", "shared_map", "shutdown"])
def test_a_worker_killed_in_the_middle_of_a_result_ends_the_run_with_worker_died(
    how: str,
) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", MID_RESULT, how], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("WorkerDied: a worker process died"), r.stdout
    if how != "shutdown":
        assert "signal 9" in lines[0], r.stdout
    assert float(lines[-1].split()[-1]) < 20, r.stdout


def _ctrl_c_the_parent() -> None:
    """The fork's first task, as a Ctrl-C would land while the workers start."""
    os.kill(MAIN, signal.SIGINT)


def test_a_ctrl_c_while_the_workers_fork_ends_them(
    watchdog: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sif.executors.local as local

    monkeypatch.setattr(local, "_nothing", _ctrl_c_the_parent)
    others = pool_children()  # children of earlier tests, not this pool's
    with pytest.raises(KeyboardInterrupt) as interrupted:
        WorkerPool(2)
    # Ended before the error left the pool's making (the error's frames still hold it):
    # a caller that then exits at once (sif's Ctrl-C, os._exit) leaves no orphan behind,
    # which would hold its caller's pipes open.
    assert interrupted.traceback and pool_children() - others == set()


def pool_children() -> set[int]:
    """This process's child processes still alive (from /proc)."""
    me = str(os.getpid())
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                out.add(int(pid))
    return out


def test_workers_end_when_the_process_that_forked_them_is_killed() -> None:
    """A SIGKILLed sif left its workers blocked on their pipes for good, holding the
    caller's stdout and stderr (`sif index ... | cat` waited ten minutes): they now end
    with it (PR_SET_PDEATHSIG)."""
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from sif.executors import WorkerPool\n"
        "pool = WorkerPool(2)\n"
        "tasks = [pool.submit(time.sleep, 60) for _ in range(2)]\n"
        "time.sleep(0.3)\n"
        "print(*[p.pid for p in pool._workers], flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [p for p in pids if _running(p)]
        assert alive == []
    finally:
        proc.kill()
        proc.wait()


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, reaped by init soon, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
