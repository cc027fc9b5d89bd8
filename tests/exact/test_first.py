"""The compiled loop of the first blocks (``sif.exact._firstc``) against the Python one.

Both compare the same walked tree, changed on disk after the walk in the
ways a candidate can be met (replaced, changed, a FIFO or a symbolic link
now, vanished, unreadable, a name that is not UTF-8, a path longer than
PATH_MAX, a file read through a symbolic link): they must give the same
groups, bytes read and warnings, and read the same files in the same order
(as the kernel saw it: inotify). Neither may leave a descriptor open,
however the run is stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fswatch import IN_ACCESS, watching
from sif.events import ScanWarning
from sif.exact import DupesStats, first, rounds
from sif.exact.pipeline import CHANGED, FIRST_BLOCK, ReplicaFinder, _Table
from sif.walk import RecordColumns, WalkOptions, parallel_walk
from treeutil import deadline, write

REPLACED = "replaced by another file since the walk"


def test_the_compiled_loop_is_built() -> None:
    """The extension is optional for installs without a compiler; here (and in CI) it is
    built, so the tests compare both loops."""
    assert first._firstc is not None


def walked(root: Path) -> RecordColumns:
    cols, _ = parallel_walk([str(root)], WalkOptions(follow_symlinks=True))
    return cols


def compare(cols: RecordColumns, watch: Path, helpers: int = 0) -> dict[str, Any]:
    """The comparison after the walk: groups, warnings, bytes read, the files opened and the
    reads in order (inotify, under ``watch``); ``helpers``: the C loop's threads."""
    warnings: list[ScanWarning] = []
    stats = DupesStats()
    with watching(watch) as seen, deadline(30):
        finder = ReplicaFinder(jobs=1, on_warning=warnings.append, stats=stats, helpers=helpers)
        groups = {frozenset(g.paths) for g in finder.run(cols)}
    return {
        "groups": groups,
        "warnings": warnings,
        "bytes_read": stats.bytes_read,
        "opened": set(seen.opened),
        "reads": seen.paths(IN_ACCESS),
    }


def both(cols: RecordColumns, watch: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """:func:`compare` with the compiled loop, then the Python one, on the same disk: equal.
    The compiled run's outcome, and how many rows the compiled loop read itself.

    The compiled loop runs three times: alone, and with 3 helper threads over chunks
    of 4 rows, each thread started for a single row (so that threads race over every
    chunk, and rows past one left to Python are read, dropped and read again), once
    more with every chunk cut for time after its first row. The threads read in no
    fixed order, and may read a file twice: their reads are compared as a set."""
    compiled = CountingLoop(first._firstc)
    monkeypatch.setattr(first, "_firstc", compiled)
    c = compare(cols, watch)
    rows_alone = compiled.rows
    assert compiled.helpers == {0}
    monkeypatch.setattr(first, "CHUNK", 4)
    monkeypatch.setattr(first, "MIN_SHARE", 1)
    threaded = []
    for chunk_ns in (first.CHUNK_NS, 0):  # 0: every chunk cut for time after its first row
        monkeypatch.setattr(first, "CHUNK_NS", chunk_ns)
        compiled.rows, compiled.helpers = 0, set()
        threaded.append(compare(cols, watch, helpers=3))
        assert compiled.rows == rows_alone
        assert compiled.helpers == {3}
    monkeypatch.setattr(first, "_firstc", None)
    py = compare(cols, watch)
    monkeypatch.setattr(first, "_firstc", compiled.real)
    for key in c:
        assert c[key] == py[key], key
        for threads in threaded:
            if key == "reads":
                assert set(threads[key]) == set(c[key])
            else:
                assert threads[key] == c[key], key
    c["compiled_rows"] = rows_alone
    return c


class CountingLoop:
    """The compiled loop, counting the rows it read itself."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.rows = 0
        self.helpers: set[int] = set()

    def read_first(self, rows: list[int], start: int, *args: Any) -> int:
        stop: int = self.real.read_first(rows, start, *args)
        self.rows += stop - start
        self.helpers.add(args[-4])  # (..., helpers, chunk, min_share, chunk_ns)
        return stop


def long_dir(top: Path, length: int) -> Path:
    """A directory under ``top`` whose path is ``length`` bytes long."""
    path = top
    while len(os.fsencode(path)) < length - 201:
        path = path / ("d" * 200)
    rest = length - len(os.fsencode(path)) - 1
    path = path / ("e" * rest)
    os.makedirs(path)
    assert len(os.fsencode(path)) == length
    return path


@pytest.mark.parametrize("keep_open, hold", [(8, None), (0, None), (8, 3)])
def test_both_loops_agree_on_a_tree_changed_after_the_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_open: int, hold: int | None
) -> None:
    # Kept open from the first block (8) or not (0); at most 3 kept (hold 3: batches of
    # 3 files), so that the compiled loop closes some and keeps others.
    monkeypatch.setattr(rounds, "KEEP_OPEN_SHARE", keep_open)
    if hold is not None:
        monkeypatch.setattr(rounds, "hold_limit", lambda: hold)
    t, out = tmp_path / "t", tmp_path / "out"
    a, b, c, d = (os.urandom(n) for n in (3000, 3 * FIRST_BLOCK + 7, 5000, 4000))
    for name in ("a1", "a2", "a3", "replaced", "appended", "touched", "fifo", "vanished"):
        write(t / name, a)
    write(t / "linked", a)  # a symbolic link after the walk: its file moves out of the tree
    for name in ("b1", "b2"):
        write(t / name, b)
    write(t / "naïve", b)  # UTF-8, not ASCII
    write(os.fsencode(t / "caf") + b"\xe9", b)  # not UTF-8 (Latin-1)
    write(os.fsencode(t) + b"/d\xff/x", b)  # a directory not UTF-8
    write(t / "c1", c)
    deep = long_dir(t, 3900)  # the walk lists it (its path fits), a read may not
    fits = deep / ("f" * (4095 - 3901))  # 4095 bytes: the longest path open() takes
    too_long = deep / ("g" * (4096 - 3901))  # 4096 bytes: ENAMETOOLONG
    write(fits, c)
    dfd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    try:  # too long a path to create by name: by its directory's descriptor
        fd = os.open(too_long.name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd)
        os.write(fd, c)
        os.close(fd)
    finally:
        os.close(dfd)
    write(t / "d1", d)
    write(out / "target", d)
    write(out / "target2", d)
    os.symlink(out / "target", t / "link")  # read through the link (no O_NOFOLLOW)
    os.symlink(out / "target2", t / "link2")  # its file replaced after the walk
    os.symlink(t / "a1", t / "a1-link")  # a name of a1: a1 is read, not the link
    cols = walked(t)
    time.sleep(0.05)  # past the walk's ctime
    write(t / "new", a)
    os.rename(t / "new", t / "replaced")
    with open(t / "appended", "ab") as f:
        f.write(b"more")
    os.utime(t / "touched", ns=(0, 10**18))
    os.unlink(t / "fifo")
    os.mkfifo(t / "fifo")  # opened for reading it would wait for a writer forever
    os.unlink(t / "vanished")
    os.rename(t / "linked", out / "linked")
    os.symlink(out / "linked", t / "linked")
    write(out / "new", d)
    os.rename(out / "new", out / "target2")

    got = both(cols, tmp_path, monkeypatch)
    assert got["groups"] == {
        frozenset({str(t / "a1"), str(t / "a2"), str(t / "a3")}),
        frozenset({str(t / n) for n in ("b1", "b2", "naïve", "caf\udce9", "d\udcff/x")}),
        frozenset({str(t / "c1"), str(fits)}),
        frozenset({str(t / "d1"), str(t / "link")}),
    }
    assert len(got["warnings"]) == 8
    assert set(got["warnings"]) == {
        ScanWarning(str(t / "replaced"), REPLACED),
        ScanWarning(str(t / "appended"), CHANGED),
        ScanWarning(str(t / "touched"), CHANGED),
        ScanWarning(str(t / "fifo"), "not a regular file (FIFO)"),
        ScanWarning(str(t / "vanished"), "vanished during the scan"),
        ScanWarning(str(t / "linked"), "is a symbolic link now"),
        ScanWarning(str(too_long), "File name too long"),
        ScanWarning(str(t / "link2"), REPLACED),
    }
    assert got["bytes_read"] == 3 * 3000 + 5 * len(b) + 2 * 5000 + 2 * 4000
    # 20 candidates, 8 of them changed: the compiled loop read the other 12 itself.
    assert got["compiled_rows"] == 12
    assert str(out / "target") in got["opened"]  # through the link
    assert str(too_long) not in got["opened"]


NOBODY_SCRIPT = r"""
import json, os, sys
from sif.exact import find_duplicates, first

class Counting:
    def __init__(self, real):
        self.real, self.rows = real, 0
    def read_first(self, rows, start, *args):
        stop = self.real.read_first(rows, start, *args)
        self.rows += stop - start
        return stop

loop = Counting(first._firstc) if sys.argv[2] == "c" else None
first._firstc = loop
os.setgid(65534); os.setuid(65534)  # nobody: root's files refuse O_NOATIME, and 0600 all
warnings = []
found = find_duplicates([sys.argv[1]], on_warning=warnings.append, jobs=1)
print(json.dumps({
    "groups": sorted(sorted(g.paths) for g in found),
    "warnings": sorted([w.path, w.cause] for w in warnings),
    "compiled_rows": loop and loop.rows,
}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to become nobody")
def test_both_loops_agree_as_a_user_whom_o_noatime_is_refused() -> None:
    # Not the files' owner: the first open with O_NOATIME fails (EPERM), the Python loop
    # reads that file without it and the rest of the table opens without it. The compiled
    # loop must go on with the table's new flags (else it would leave every row to Python).
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        same, other = os.urandom(2000), os.urandom(2000)
        for name, data in (("n1", same), ("n2", same), ("n3", same), ("o1", other)):
            write(Path(top) / name, data)
            os.chmod(Path(top) / name, 0o644)
        write(Path(top) / "o2", other)
        os.chmod(Path(top) / "o2", 0o600)  # root's alone: permission denied
        names = ("n1", "n2", "n3", "o1", "o2")
        read_first = min(names, key=lambda n: os.stat(Path(top) / n).st_ino)
        outcomes = {}
        for loop in ("c", "python"):
            out = subprocess.run(
                [sys.executable, "-c", NOBODY_SCRIPT, top, loop],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            outcomes[loop] = json.loads(out)
    c, py = outcomes["c"], outcomes["python"]
    assert c["groups"] == py["groups"] == [[f"{top}/n1", f"{top}/n2", f"{top}/n3"]]
    assert c["warnings"] == py["warnings"] == [[f"{top}/o2", "permission denied"]]
    # All rows but the first (O_NOATIME refused; EACCES is a PermissionError too) and o2.
    assert c["compiled_rows"] == (4 if read_first == "o2" else 3)


MUTATIONS = ["replace", "append", "touch", "remove", "fifo", "symlink", "chmod"]


@st.composite
def changed_trees(draw: st.DrawFn) -> list[tuple[str, bytes, str | None]]:
    """Files (name, bytes, what happens to it after the walk, or None) of few sizes."""
    files = []
    for gi in range(draw(st.integers(1, 4))):
        size = draw(st.sampled_from([1, 100, FIRST_BLOCK, FIRST_BLOCK + 1, 3 * FIRST_BLOCK]))
        base = os.urandom(size)
        for fi in range(draw(st.integers(2, 5))):
            data = base if draw(st.booleans()) else os.urandom(size)
            change = draw(st.one_of(st.none(), st.none(), st.sampled_from(MUTATIONS)))
            files.append((f"g{gi}/d{fi % 2}/f{fi}", data, change))
    return files


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(files=changed_trees())
def test_both_loops_agree_and_find_the_unchanged_replicas(
    files: list[tuple[str, bytes, str | None]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with tempfile.TemporaryDirectory() as top:
        t = Path(top) / "t"
        for name, data, _ in files:
            write(t / name, data)
        cols = walked(t)
        time.sleep(0.02)
        for name, data, change in files:
            p = t / name
            if change == "replace":  # another inode, the same bytes
                write(Path(top) / "new", data)
                os.rename(Path(top) / "new", p)
            elif change == "append":
                with open(p, "ab") as f:
                    f.write(b"+")
            elif change == "touch":
                os.utime(p, ns=(0, 10**18))
            elif change in ("remove", "fifo", "symlink"):
                os.rename(p, Path(top) / name.replace("/", "_"))
                if change == "fifo":
                    os.mkfifo(p)
                elif change == "symlink":
                    os.symlink(Path(top) / name.replace("/", "_"), p)
            elif change == "chmod":  # root reads it still; its ctime moved
                os.chmod(p, 0o600)
        got = both(cols, Path(top), monkeypatch)
    unchanged = [str(t / name) for name, _, change in files if change is None]
    changed = {str(t / name) for name, _, change in files if change is not None}
    assert {w.path for w in got["warnings"]} <= changed
    assert got["groups"] == naive_of(files, t, unchanged)


def naive_of(files: list[tuple[str, bytes, str | None]], t: Path, keep: list[str]) -> Any:
    """:func:`naive` of the files ``keep``, from the bytes they were written with."""
    by_key: dict[tuple[int, str], list[str]] = defaultdict(list)
    wanted = set(keep)
    for name, data, _ in files:
        if str(t / name) in wanted:
            by_key[(len(data), hashlib.sha256(data).hexdigest())].append(str(t / name))
    return {frozenset(v) for v in by_key.values() if len(v) > 1}


def loop_args(cols: RecordColumns, hold: int) -> tuple[list[int], tuple[Any, ...]]:
    """The rows of ``cols`` in inode order (a batch's order), and the arguments the C loop
    takes after ``rows, start, end``: the table's columns, its flags, the block, ``hold``."""
    table = _Table.over(cols)
    rows = sorted(range(len(cols)), key=cols.ino.__getitem__)
    args = (table.dirs, table.dir_of, table.names, table.symlink, table.dev, table.ino)
    args += (table.size, table.mtime_ns, table.ctime_ns, table.flags, FIRST_BLOCK, hold)
    return rows, args


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def replica_tree(root: Path, groups: int, copies: int, size: int) -> None:
    for k in range(groups):
        data = os.urandom(size)
        for j in range(copies):
            write(root / f"d{j}" / f"g{k}", data)


class StopAt:
    """A progress object that raises KeyboardInterrupt (a Ctrl-C) at its n-th byte count,
    noting how many descriptors were open then."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.open_then = 0

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        pass

    def advance(self, amount: int = 1) -> None:
        self.n -= 1
        if self.n == 0:
            self.open_then = len(open_fds())
            raise KeyboardInterrupt

    def log(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.usefixtures("first_loop")
@pytest.mark.parametrize("at", [1, 2, 7])
def test_ctrl_c_from_progress_mid_batch_leaves_no_descriptor_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    # 3 batches of 150 files (a budget of 50 groups' first blocks); each batch's files
    # stay open for their second block. The n-th progress report comes after a batch's
    # first blocks (1), or within its later blocks (2, 7).
    monkeypatch.setattr(rounds, "FIRST_BATCH", 50 * 3 * FIRST_BLOCK)
    replica_tree(tmp_path, 150, 3, FIRST_BLOCK + 100)
    cols = walked(tmp_path)
    before = open_fds()
    progress = StopAt(at)
    with pytest.raises(KeyboardInterrupt):
        list(ReplicaFinder(jobs=1, progress=progress).run(cols))
    assert progress.open_then >= len(before) + 100  # the batch's files were open then
    assert open_fds() == before


@pytest.mark.usefixtures("first_loop")
def test_ctrl_c_in_a_careful_read_between_two_compiled_calls_leaves_no_descriptor_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The compiled loop stops at the changed file; the Python loop reads it (the careful
    # way, _Table.read), and a Ctrl-C comes there: the files read before it are open.
    replica_tree(tmp_path, 100, 2, 3000)
    victim = max(tmp_path.rglob("g*"), key=lambda p: p.stat().st_ino)  # read last
    cols = walked(tmp_path)
    time.sleep(0.05)
    os.utime(victim, ns=(0, 10**18))
    read = _Table.read
    open_then = []

    def read_then_stop(self: _Table, i: int, *args: Any, **kw: Any) -> Any:
        got = read(self, i, *args, **kw)
        if self.path(i) == str(victim):
            open_then.append(len(open_fds()))
            raise KeyboardInterrupt
        return got

    monkeypatch.setattr(_Table, "read", read_then_stop)
    before = open_fds()
    with pytest.raises(KeyboardInterrupt):
        list(ReplicaFinder(jobs=1).run(cols))
    assert open_then and open_then[0] >= len(before) + 150
    assert open_fds() == before


@pytest.mark.parametrize("helpers", [0, 2])
def test_a_signal_in_the_compiled_loop_leaves_every_descriptor_in_fds(
    tmp_path: Path, helpers: int
) -> None:
    # A real signal whose handler raises (as Ctrl-C's does), at a random moment of one call
    # over 1500 files: the call raises, and every descriptor still open is in fds (the
    # caller's finally closes them), each that of its row's file. With helper threads, the
    # signal may come to one of them: the handler runs in this thread after the chunk.
    for k in range(1500):
        write(tmp_path / f"d{k % 10}" / f"f{k}", b"%d" % k)
    cols = walked(tmp_path)
    rows, args = loop_args(cols, 1000)
    armed = [False]

    def handler(signum: int, frame: object) -> None:
        if armed[0]:
            armed[0] = False
            raise KeyboardInterrupt

    # The timers fall inside one whole call's duration, measured here: a fixed range
    # missed the middle of the loop on a fast machine (4 of 40 trials stopped in it).
    # The fastest of three calls: a first call from a cold cache, timed alone, put the
    # timers after the end of the warm calls (seen once: too few trials stopped mid-call).
    whole = float("inf")
    for _ in range(3):
        fds0: dict[int, int] = {}
        t0 = time.perf_counter()
        first._firstc.read_first(rows, 0, len(rows), *args, fds0, {}, helpers)
        whole = min(whole, time.perf_counter() - t0)
        for fd in fds0.values():
            os.close(fd)
    old = signal.signal(signal.SIGALRM, handler)
    rng = random.Random(15)
    mid_call = 0
    try:
        for _ in range(40):
            before = len(open_fds())
            fds: dict[int, int] = {}
            got: dict[int, bytes] = {}
            stopped = False
            try:
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.1, 0.9) * whole)
                try:
                    first._firstc.read_first(rows, 0, len(rows), *args, fds, got, helpers)
                finally:
                    armed[0] = False
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                stopped = True
            try:
                if stopped and 0 < len(got) < len(rows):
                    mid_call += 1
                assert len(open_fds()) == before + len(fds)
                assert len(fds) == min(len(got), 1000)
                for i, fd in fds.items():
                    assert os.readlink(f"/proc/self/fd/{fd}") == cols.path(i)
            finally:
                for fd in fds.values():
                    os.close(fd)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert mid_call >= 5  # most trials stopped the loop in its middle


def test_the_compiled_loop_takes_only_the_walk_s_column_types(tmp_path: Path) -> None:
    # A buffer of other items is refused; a table whose columns are not the walk's arrays
    # is read by the Python loop (same blocks).
    for k in range(4):
        write(tmp_path / f"f{k}", b"x%d" % (k % 2))
    cols = walked(tmp_path)
    table = _Table.over(cols)
    rows = sorted(range(len(cols)), key=cols.ino.__getitem__)
    args = [table.dirs, table.dir_of, table.names, table.symlink, table.dev, table.ino]
    args += [table.size, table.mtime_ns, table.ctime_ns, table.flags, FIRST_BLOCK, 0, {}, {}]
    for col, bad in ((1, b"\0" * 16), (4, bytes(32)), (6, list(table.size))):
        wrong = list(args)
        wrong[col] = bad
        with pytest.raises(TypeError):
            first._firstc.read_first(rows, 0, len(rows), *wrong)
    want = first.read_first(table, rows, FIRST_BLOCK, 0, {})
    table.size = list(table.size)  # type: ignore[assignment]
    assert not first._compiled_fits(table)
    assert first.read_first(table, rows, FIRST_BLOCK, 0, {}) == want
    assert want[0] == {i: b"x%d" % (int(cols.names[i][1:]) % 2) for i in rows}


def others(exclude: set[str]) -> tuple[int, int]:
    """This process's threads and descriptors, but those named in ``exclude``."""
    tasks = set(os.listdir("/proc/self/task")) - exclude
    return len(tasks), len(os.listdir("/proc/self/fd"))


def seen_during(call: Any) -> tuple[int, int]:
    """The most threads, and descriptors, this process had while ``call()`` ran, but the
    sampling thread (a Python thread: it runs while the C loop has the GIL released)."""
    import threading

    most = [0, 0]
    done = threading.Event()

    def sample() -> None:
        me = {str(threading.get_native_id())}
        while not done.is_set():
            tasks, fds = others(me)
            most[0], most[1] = max(most[0], tasks), max(most[1], fds - 1)  # (the listing's)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        call()
    finally:
        done.set()
        sampler.join()
    return most[0], most[1]


def gone(base: int) -> bool:
    """Whether the threads are back to ``base`` within 5 s (the kernel lists an ended
    thread a little after a join returns)."""
    end = time.monotonic() + 5
    while len(os.listdir("/proc/self/task")) > base and time.monotonic() < end:
        time.sleep(0.01)
    return len(os.listdir("/proc/self/task")) == base


def test_helper_threads_share_the_compiled_loop_and_are_gone_after(tmp_path: Path) -> None:
    # 3000 files in chunks of 256: with 2 helpers the process has 2 threads more at times
    # (3 or 4 if one that ended is still listed), and no more descriptors open than its
    # threads (hold 0: none kept); alone, none more and one descriptor. Either way the
    # same blocks, and no thread left after.
    for k in range(3000):
        write(tmp_path / f"d{k % 10}" / f"f{k}", b"%d" % k)
    cols = walked(tmp_path)
    rows, args = loop_args(cols, 0)
    base_tasks, base_fds = others(set())
    threads, fds = {}, {}
    for helpers in (0, 2):
        most_t = most_f = 0
        for _ in range(20):  # until the sampler has run while the helpers did
            got: dict[int, bytes] = {}

            def call(got: dict[int, bytes] = got, helpers: int = helpers) -> None:
                stop = first._firstc.read_first(rows, 0, len(rows), *args, {}, got, helpers)
                assert stop == len(rows)

            t, f = seen_during(call)
            most_t, most_f = max(most_t, t), max(most_f, f)
            assert got == {i: b"%d" % int(cols.names[i][1:]) for i in rows}
            assert gone(base_tasks)
            if most_t >= base_tasks + helpers:
                break
        threads[helpers], fds[helpers] = most_t - base_tasks, most_f - base_fds
    assert threads[0] == 0 and 2 <= threads[2] <= 4
    assert fds[0] <= 1 and fds[2] <= 3  # (with all of a chunk open: up to 256)


def mixed_tree(top: Path) -> tuple[RecordColumns, Path]:
    """1,000 files of 3 sizes, walked; then 4% of them vanished, turned FIFOs, changed or
    replaced."""
    t = top / "t"
    for k in range(1000):
        write(t / f"d{k % 7}" / f"f{k:04d}", b"%d" % (k % 40) * (10 + k % 3))
    cols = walked(t)
    time.sleep(0.02)
    rng = random.Random(4)
    for k in rng.sample(range(1000), 40):
        p = t / f"d{k % 7}" / f"f{k:04d}"
        what = k % 4
        if what == 0:
            p.unlink()
        elif what == 1:
            p.unlink()
            os.mkfifo(p)
        elif what == 2:
            with open(p, "ab") as f:
                f.write(b"+")
        else:
            write(top / "new", p.read_bytes())
            os.rename(top / "new", p)
    return cols, t


@pytest.mark.parametrize("hold", [0, 3, 1000])
@pytest.mark.parametrize("chunk_ns", [20_000_000, 0])
def test_threads_file_the_rows_as_one_thread_would(
    tmp_path: Path, hold: int, chunk_ns: int
) -> None:
    # Called as first.read_first calls it (again from each row left to Python, here
    # skipped): the blocks in order, the descriptors kept in order, the positions
    # returned, all as with no helper; and no descriptor open but those in fds.
    cols, _ = mixed_tree(tmp_path)
    rows, args = loop_args(cols, hold)
    runs = []
    for helpers, chunk, min_share in ((0, 256, 16), (3, 4, 1), (3, 256, 1), (1, 256, 16)):
        before = open_fds()
        fds: dict[int, int] = {}
        got: dict[int, bytes] = {}
        stops = []
        k = 0
        try:
            while k < len(rows):
                k = first._firstc.read_first(
                    rows, k, len(rows), *args, fds, got, helpers, chunk, min_share, chunk_ns
                )
                stops.append(k)
                k += 1
            assert len(open_fds()) == len(before) + len(fds)
        finally:
            for fd in fds.values():
                os.close(fd)
        runs.append((list(got.items()), list(fds), stops))
    assert len(runs[0][2]) >= 30  # most changed files stopped the loop
    for run in runs[1:]:
        assert run == runs[0]


@pytest.mark.parametrize(
    "hold, helpers, chunk, min_share, chunk_ns",
    [
        (-1, 1, 256, 16, 0),
        (0, -1, 256, 16, 0),
        (0, 1, 0, 16, 0),
        (0, 1, 257, 16, 0),
        (0, 1, 8, 0, 0),
        (0, 1, 8, 1, -1),
        (0, 1, 8, 1, 3601 * 10**9),
    ],
)
def test_the_compiled_loop_refuses_bad_thread_settings(
    tmp_path: Path, hold: int, helpers: int, chunk: int, min_share: int, chunk_ns: int
) -> None:
    write(tmp_path / "f", b"x")
    cols = walked(tmp_path)
    _, args = loop_args(cols, hold)
    fds: dict[int, int] = {}
    with pytest.raises(ValueError, match="read_first"):
        first._firstc.read_first([0], 0, 1, *args, fds, {}, helpers, chunk, min_share, chunk_ns)
    assert not fds


def test_a_call_after_a_row_left_to_python_starts_no_thread(tmp_path: Path) -> None:
    # Every 8th row is not the common case (its mtime is not the walk's): each call reads
    # at most 7 rows before it stops, within its first chunk (16 rows): no helper starts,
    # however many are allowed. (With whole chunks from the start, a tree of unreadable
    # files cost 9x the one-thread loop with 7 helpers.)
    for k in range(800):
        write(tmp_path / f"f{k}", b"%d" % k)
    cols = walked(tmp_path)
    rows = sorted(range(len(cols)), key=cols.ino.__getitem__)
    for k in range(0, len(rows), 8):
        cols.mtime_ns[rows[k]] += 1
    _, args = loop_args(cols, 0)
    base, _ = others(set())
    stops: list[int] = []

    def calls() -> None:
        k = 0
        while k < len(rows):
            k = first._firstc.read_first(rows, k, len(rows), *args, {}, {}, 7)
            stops.append(k)
            k += 1

    threads, _ = seen_during(calls)
    assert stops == [*range(0, len(rows), 8), len(rows)]
    assert threads == base
