"""The replica pipeline on real files: exactness, hardlinks, changes, limits."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fswatch import watching
from sif.events import ScanWarning
from sif.exact import DupesStats, block_schedule, find_duplicates
from sif.exact.pipeline import FIRST_BLOCK, MAX_BLOCK
from treeutil import threads_switched_often, write


def groups_of(root: Path | str, **kw: object) -> set[frozenset[str]]:
    return {frozenset(g.paths) for g in find_duplicates([str(root)], **kw)}  # type: ignore[arg-type]


def naive_groups(root: Path | str) -> set[frozenset[str]]:
    """The reference: size plus SHA-256 of every file, one name per inode."""
    by_key: dict[tuple[int, str], dict[tuple[int, int], str]] = defaultdict(dict)
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if st.st_size == 0:
                continue
            with open(p, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            inodes = by_key[(st.st_size, digest)]
            inodes[(st.st_dev, st.st_ino)] = min(p, inodes.get((st.st_dev, st.st_ino), p))
    return {frozenset(v.values()) for v in by_key.values() if len(v) > 1}


@pytest.mark.usefixtures("first_loop")
def test_small_and_large_groups(tmp_path: Path) -> None:
    data = os.urandom(300_000)
    write(tmp_path / "big1", data)
    write(tmp_path / "sub/big2", data)
    write(tmp_path / "big3", data[:-1] + bytes([data[-1] ^ 1]))  # differs in the last byte
    write(tmp_path / "s1", b"hello\n")
    write(tmp_path / "s2", b"hello\n")
    write(tmp_path / "s3", b"hellp\n")
    stats = DupesStats()
    groups = list(find_duplicates([str(tmp_path)], stats=stats))
    assert [sorted(g.paths) for g in groups] == [
        [str(tmp_path / "big1"), str(tmp_path / "sub/big2")],
        [str(tmp_path / "s1"), str(tmp_path / "s2")],
    ]
    assert groups[0].digest == "xxh3-128:" + xxhash.xxh3_128_hexdigest(data)
    assert stats.redundant_files == 2
    assert stats.redundant_bytes == 300_006
    # Every byte read once: all three large files to the end (big3 differs in its last block).
    assert stats.bytes_read == 3 * 300_000 + 3 * 6


@pytest.mark.usefixtures("first_loop")
def test_file_leaves_after_first_differing_block(tmp_path: Path) -> None:
    data = os.urandom(2_000_000)
    write(tmp_path / "a", data)
    write(tmp_path / "b", data)
    write(tmp_path / "c", bytes([data[0] ^ 1]) + data[1:])  # differs in the first block
    stats = DupesStats()
    list(find_duplicates([str(tmp_path)], stats=stats))
    assert stats.bytes_read == 2 * 2_000_000 + FIRST_BLOCK


@pytest.mark.usefixtures("first_loop")
def test_hardlinks_are_one_file(tmp_path: Path) -> None:
    write(tmp_path / "a", b"same")
    os.link(tmp_path / "a", tmp_path / "a-link")
    # Two names of one inode: no group, nothing wasted.
    assert groups_of(tmp_path) == set()
    write(tmp_path / "b", b"same")
    [group] = list(find_duplicates([str(tmp_path)]))
    assert group.redundant_files == 1
    assert set(group.all_paths) == {str(tmp_path / n) for n in ("a", "a-link", "b")}
    linked = next(r for r in group.replicas if len(r.paths) == 2)
    assert linked.paths == (str(tmp_path / "a"), str(tmp_path / "a-link"))


def test_empty_files_only_with_empty(tmp_path: Path) -> None:
    write(tmp_path / "e1", b"")
    write(tmp_path / "e2", b"")
    assert groups_of(tmp_path) == set()
    assert groups_of(tmp_path, empty=True) == {
        frozenset({str(tmp_path / "e1"), str(tmp_path / "e2")})
    }


@pytest.mark.usefixtures("first_loop")
def test_most_files_in_one_group(tmp_path: Path) -> None:
    data = os.urandom(200_000)
    for i in range(60):
        write(tmp_path / f"c{i:02}", data)
    write(tmp_path / "odd", data[:100_000] + bytes([data[100_000] ^ 1]) + data[100_001:])
    stats = DupesStats()
    [group] = list(find_duplicates([str(tmp_path)], stats=stats))
    assert len(group.replicas) == 60
    # Every byte of the 60 copies once; the odd one up to the end of its differing block.
    odd_read = sum(block_schedule(200_000)[:4])
    assert stats.bytes_read == 60 * 200_000 + odd_read


def test_block_schedule_grows_geometrically() -> None:
    sched = block_schedule(100 * MAX_BLOCK)
    assert sched[:3] == [FIRST_BLOCK, 4 * FIRST_BLOCK, 16 * FIRST_BLOCK]
    assert max(sched) == MAX_BLOCK
    assert sum(sched) == 100 * MAX_BLOCK
    assert block_schedule(FIRST_BLOCK + 1) == [FIRST_BLOCK, 1]


@pytest.mark.usefixtures("first_loop")
def test_memory_budget_bounds_kept_blocks_and_stays_exact(tmp_path: Path) -> None:
    # 40 files of one size that all differ in their third block, two by two:
    # with a budget of two blocks, most representatives are hash-only and
    # matches are confirmed by re-reading (a few extra bytes, same groups).
    base = os.urandom(200_000)
    for i in range(40):
        body = base[:30_000] + bytes([i // 2]) + base[30_001:]
        write(tmp_path / f"f{i:02}", body)
    stats = DupesStats()
    got = groups_of(tmp_path, memory_budget=2 * 64 * 1024, jobs=1, stats=stats)
    assert got == naive_groups(tmp_path)
    assert len(got) == 20
    assert stats.bytes_read > 40 * 200_000  # the confirmations read again
    stats = DupesStats()
    assert groups_of(tmp_path, jobs=1, stats=stats) == got
    assert stats.bytes_read == 40 * 200_000  # within the default budget: each byte once


class ChangeAfterFirstRead:
    """A progress object that modifies a file right after the first block is read."""

    def __init__(self, victim: Path) -> None:
        self.victim = victim
        self.done = False

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        pass

    def advance(self, amount: int = 1) -> None:
        if not self.done and amount > 1:
            self.done = True
            with open(self.victim, "ab") as f:
                f.write(b"appended while sif was reading")

    def log(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.usefixtures("first_loop")
def test_file_changed_while_read_is_dropped(tmp_path: Path) -> None:
    data = os.urandom(100_000)
    for n in ("a", "b", "c"):
        write(tmp_path / n, data)
    warnings: list[ScanWarning] = []
    groups = list(
        find_duplicates(
            [str(tmp_path)],
            jobs=1,
            on_warning=warnings.append,
            progress=ChangeAfterFirstRead(tmp_path / "a"),
        )
    )
    assert [w.path for w in warnings] == [str(tmp_path / "a")]
    assert "changed while it was read" in warnings[0].cause
    assert [sorted(g.paths) for g in groups] == [[str(tmp_path / "b"), str(tmp_path / "c")]]


@pytest.mark.usefixtures("first_loop")
def test_vanished_file_is_a_warning(tmp_path: Path) -> None:
    data = os.urandom(10_000)
    for n in ("a", "b", "c"):
        write(tmp_path / n, data)

    class Remove(ChangeAfterFirstRead):
        def advance(self, amount: int = 1) -> None:
            if not self.done and amount > 1:
                self.done = True
                os.unlink(self.victim)

    warnings: list[ScanWarning] = []
    groups = list(
        find_duplicates(
            [str(tmp_path)], jobs=1, on_warning=warnings.append, progress=Remove(tmp_path / "c")
        )
    )
    assert warnings == [ScanWarning(str(tmp_path / "c"), "vanished during the scan")]
    assert [sorted(g.paths) for g in groups] == [[str(tmp_path / "a"), str(tmp_path / "b")]]


UNREADABLE_SCRIPT = r"""
import os, sys, json
from sif.exact import find_duplicates, first
if sys.argv[2] == "python":
    first._firstc = None  # the loop of the first blocks without the extension
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # root reads everything: drop to nobody
warnings = []
# jobs=1: nobody may not read this Python's own files, which a worker pool imports.
found = find_duplicates([sys.argv[1]], on_warning=warnings.append, jobs=1)
groups = [sorted(g.paths) for g in found]
print(json.dumps({"groups": groups, "warnings": [[w.path, w.cause] for w in warnings]}))
"""


def test_unreadable_file_and_directory_are_warnings(first_loop: str) -> None:
    import json

    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        data = b"same content\n"
        for n in ("a", "b", "locked", "closed/x"):
            write(Path(top) / n, data)
        os.chmod(top + "/locked", 0)
        os.chmod(top + "/closed", 0)
        for d in (top,):
            for n in ("a", "b"):
                os.chmod(os.path.join(d, n), 0o644)
        out = subprocess.run(
            [sys.executable, "-c", UNREADABLE_SCRIPT, top, first_loop],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        os.chmod(top + "/closed", 0o755)
    result = json.loads(out)
    assert result["groups"] == [[top + "/a", top + "/b"]]
    assert sorted(result["warnings"]) == [
        [top + "/closed", "permission denied"],
        [top + "/locked", "permission denied"],
    ]


def test_group_larger_than_open_file_limit(tmp_path: Path, first_loop: str) -> None:
    data = os.urandom(5000)
    for i in range(300):
        write(tmp_path / f"f{i:03}", data)
    script = (
        "import resource, sys\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n"
        "from sif.exact import find_duplicates, first\n"
        "if sys.argv[2] == 'python': first._firstc = None\n"
        "[g] = find_duplicates([sys.argv[1]])\n"
        "print(len(g.replicas))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), first_loop],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "300"


# Sizes around the block boundaries of the schedule.
SIZES = [1, 2, 17, FIRST_BLOCK - 1, FIRST_BLOCK, FIRST_BLOCK + 1, 5 * FIRST_BLOCK + 3, 90_000]


@st.composite
def near_identical_trees(draw: st.DrawFn) -> list[tuple[str, bytes]]:
    """Files of shared sizes and content, differing in the first, a middle or the last byte."""
    files: list[tuple[str, bytes]] = []
    for gi in range(draw(st.integers(1, 3))):
        size = draw(st.sampled_from(SIZES))
        base = draw(st.binary(min_size=size, max_size=size)) if size < 64 else os.urandom(size)
        for fi in range(draw(st.integers(1, 5))):
            where = draw(st.sampled_from(["same", "first", "middle", "last"]))
            data = bytearray(base)
            pos = {"same": -1, "first": 0, "middle": size // 2, "last": size - 1}[where]
            if pos >= 0:
                data[pos] ^= draw(st.integers(1, 255))
            files.append((f"g{gi}/d{fi % 2}/f{fi}", bytes(data)))
    return files


@pytest.mark.usefixtures("first_loop")  # the same loop for every example of a run
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(near_identical_trees(), st.sampled_from([1, 2]))
def test_groups_equal_naive_sha256_grouping(files: list[tuple[str, bytes]], jobs: int) -> None:
    with tempfile.TemporaryDirectory() as top:
        for name, data in files:
            write(Path(top) / name, data)
        assert groups_of(top, jobs=jobs) == naive_groups(top)


def child_processes() -> int:
    me = str(os.getpid())
    n = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        n += fields[1] == me
    return n


class ChildCount:
    """A progress object noting the most child processes this one had at any report."""

    def __init__(self) -> None:
        self.most = 0

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        self.most = max(self.most, child_processes())

    def advance(self, amount: int = 1) -> None:
        self.most = max(self.most, child_processes())

    def log(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.usefixtures("first_loop")
def test_two_jobs_fork_workers_only_where_the_c_loops_cannot_serve(
    tmp_path: Path, first_loop: str
) -> None:
    """Where the walk and the first blocks run in C, helper threads share them and no
    worker is forked; with a pattern (the Python walk) or without the C loop, one
    worker is. The groups are the same either way."""
    for d in range(8):
        for i in range(300):
            write(tmp_path / f"d{d}" / f"f{i}.txt", b"%d" % (i % 150) * 50)
    expected = naive_groups(tmp_path)
    for pattern in ((), ("*.txt",)):
        progress = ChildCount()
        got = find_duplicates([str(tmp_path)], jobs=2, include=pattern, progress=progress)
        assert {frozenset(g.paths) for g in got} == expected
        threads = first_loop == "c" and not pattern
        assert progress.most == (0 if threads else 1), (first_loop, pattern)


@pytest.mark.usefixtures("first_loop")
@pytest.mark.parametrize("engine", ["threads", "pool"])
def test_parallel_workers_agree_with_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    # "pool": the worker processes also where the C loops serve (without the C loop,
    # "threads" is the pool too).
    import sif.exact.pipeline as pipeline

    monkeypatch.setattr(pipeline, "PARALLEL_MIN_FILES", 0)
    if engine == "pool":
        monkeypatch.setattr(pipeline, "c_walk", lambda options: False)
    base = os.urandom(70_000)
    for d in range(12):
        for i in range(6):
            data = base if i % 2 else base[: 1000 * d] + bytes([i]) + base[1000 * d + 1 :]
            write(tmp_path / f"d{d}" / f"f{i}", data)
            write(tmp_path / f"d{d}" / f"small{i}", bytes([i % 3]) * (d + 1))
    stats = DupesStats()
    parallel = groups_of(tmp_path, jobs=2, stats=stats)
    assert parallel == groups_of(tmp_path, jobs=1) == naive_groups(tmp_path)
    assert stats.bytes_read > 0


@pytest.mark.usefixtures("first_loop")
def test_many_distinct_small_files_of_one_size_stay_within_budget(tmp_path: Path) -> None:
    for i in range(200):
        write(tmp_path / f"s{i:03}", (i // 2).to_bytes(2, "big") * 1000)  # pairs, 2000 bytes
    stats = DupesStats()
    got = groups_of(tmp_path, memory_budget=8 * 2000, jobs=1, stats=stats)
    assert got == naive_groups(tmp_path)
    assert len(got) == 100


def test_archive_members_join_groups_only_with_archives(tmp_path: Path) -> None:
    import subprocess as sp
    import zipfile

    text = b"a member that is also a plain file\n" * 50
    other = b"two members alike, no plain copy\n" * 40
    write(tmp_path / "plain/copy.txt", text)
    write(tmp_path / "plain/copy2.txt", text)
    write(tmp_path / "lonely.txt", other[:-1] + b"?")  # same size as `other`, other bytes
    with zipfile.ZipFile(tmp_path / "a.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("dir/x.txt", text)
        zf.writestr("y.txt", other)
    src = tmp_path / "src"
    write(src / "z.txt", other)
    sp.run(["tar", "czf", str(tmp_path / "b.tar.gz"), "-C", str(src), "z.txt"], check=True)
    (src / "z.txt").unlink()
    plain = groups_of(tmp_path, jobs=1)
    assert plain == {frozenset({f"{tmp_path}/plain/copy.txt", f"{tmp_path}/plain/copy2.txt"})}
    stats = DupesStats()
    groups = list(find_duplicates([str(tmp_path)], jobs=1, archives=True, stats=stats))
    got = {frozenset(g.paths) for g in groups}
    assert got == {
        frozenset(
            {
                f"{tmp_path}/plain/copy.txt",
                f"{tmp_path}/plain/copy2.txt",
                f"{tmp_path}/a.zip!/dir/x.txt",
            }
        ),
        frozenset({f"{tmp_path}/a.zip!/y.txt", f"{tmp_path}/b.tar.gz!/z.txt"}),
    }
    assert stats.members == 3
    member = next(r for g in groups for r in g.replicas if r.path.endswith("x.txt"))
    assert member.archive == f"{tmp_path}/a.zip"
    assert all(g.digest.startswith("blake3:") for g in groups)


def test_corrupt_archive_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path / "bad.zip", b"PK\x03\x04 this is not a zip at all" * 10)
    write(tmp_path / "x", b"1")
    warnings: list[ScanWarning] = []
    assert list(find_duplicates([str(tmp_path)], archives=True, on_warning=warnings.append)) == []
    assert [w.path for w in warnings] == [str(tmp_path / "bad.zip")]


def first_reads(root: Path, run: object) -> list[str]:
    """The files under ``root`` whose first block ``run()`` read, in the order read (as the
    kernel saw it: the compiled loop's reads are no Python call to spy on)."""
    with watching(root) as seen:
        run()  # type: ignore[operator]
    return seen.first_reads


@pytest.mark.parametrize("keep_open", [8, 0])
@pytest.mark.usefixtures("first_loop")
def test_each_file_is_opened_once_whatever_its_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_open: int
) -> None:
    # Files of many blocks, replicas and near-replicas: each is opened once
    # (the descriptor serves every block), or, when files are not kept open
    # after their first block (0), once more for all the later ones; the
    # groups stay the naive ones.
    from sif.exact import rounds

    monkeypatch.setattr(rounds, "KEEP_OPEN_SHARE", keep_open)
    data = os.urandom(3 * MAX_BLOCK + 5)
    for name, body in {
        "a": data,
        "b": data,
        "c": data[:-1] + bytes([data[-1] ^ 1]),  # differs in its last block
        "d": bytes([data[0] ^ 1]) + data[1:],  # differs in its first block
        "s1": data[:3000],
        "s2": data[:3000],
    }.items():
        write(tmp_path / name, body)
    stats = DupesStats()
    with watching(tmp_path) as seen:
        got = groups_of(tmp_path, jobs=1, stats=stats)
    assert got == naive_groups(tmp_path)
    files = sorted(str(tmp_path / n) for n in ("a", "b", "c", "d", "s1", "s2"))
    again = [] if keep_open else [str(tmp_path / n) for n in ("a", "b", "c")]
    assert sorted(seen.opened) == sorted(files + again)
    assert stats.bytes_read == 3 * len(data) + FIRST_BLOCK + 2 * 3000


@pytest.mark.usefixtures("first_loop")
def test_first_blocks_are_read_in_inode_order_across_sizes(tmp_path: Path) -> None:
    # Files made largest first: by size they would be read in the reverse of
    # their inode order (the order of their creation, on most file systems).
    for k in range(6):
        for copy in "ab":
            write(tmp_path / f"s{k}{copy}", bytes([k]) * (6000 - 100 * k) + copy.encode())
    ino = {str(p): os.stat(p).st_ino for p in tmp_path.iterdir()}
    seen = first_reads(tmp_path, lambda: groups_of(tmp_path, jobs=1))
    assert sorted(seen) == sorted(ino)  # each file's first block read once
    assert seen == sorted(seen, key=ino.__getitem__)


@pytest.mark.usefixtures("first_loop")
def test_first_blocks_in_batches_of_the_memory_budget_stay_exact(
    tmp_path: Path, monkeypatch: object
) -> None:
    # Many groups of one size each; a budget of three blocks makes dozens of
    # batches, each read in inode order: the groups are the naive ones and
    # every byte is read once. So does a batch smaller than the budget.
    rng = __import__("random").Random(7)
    for k in range(60):
        size = 1000 + 97 * k
        head = os.urandom(size)
        for j in range(rng.randint(2, 4)):
            body = head if rng.random() < 0.5 else head[:-1] + bytes([j])
            write(tmp_path / f"d{j}/f{k}", body)
    total = sum(p.stat().st_size for p in tmp_path.rglob("f*"))
    stats = DupesStats()
    got = groups_of(tmp_path, jobs=1, memory_budget=3 * FIRST_BLOCK, stats=stats)
    assert got == naive_groups(tmp_path)
    assert stats.bytes_read == total
    from sif.exact import rounds

    monkeypatch.setattr(rounds, "FIRST_BATCH", 2 * FIRST_BLOCK)  # type: ignore[attr-defined]
    stats = DupesStats()
    assert groups_of(tmp_path, jobs=1, stats=stats) == got
    assert stats.bytes_read == total


def test_the_garbage_collector_is_as_the_caller_left_it(tmp_path: Path) -> None:
    import gc

    write(tmp_path / "a", b"same")
    write(tmp_path / "b", b"same")
    assert gc.isenabled()
    assert groups_of(tmp_path, jobs=1) == {frozenset({str(tmp_path / "a"), str(tmp_path / "b")})}
    assert gc.isenabled()  # paused for the scan only
    gc.disable()
    try:
        groups_of(tmp_path, jobs=1)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def test_one_job_never_imports_multiprocessing(tmp_path: Path) -> None:
    write(tmp_path / "a", b"same")
    write(tmp_path / "b", b"same")
    code = (
        "import sys; from sif.cli import main; "
        "sys.argv = ['sif', 'dupes', '-j', '1', '-q', sys.argv[1]]\n"
        "try: main()\n"
        "except SystemExit: pass\n"
        "print('multiprocessing' in sys.modules, 'concurrent.futures' in sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert r.stdout.splitlines()[-1] == "False False"
    assert str(tmp_path / "a") in r.stdout


@pytest.mark.usefixtures("first_loop")
def test_only_the_shares_a_worker_takes_get_a_compact_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A share refined by the process that walked runs on the walk's columns: the
    compact tables made are those of the shares pickled for the worker, no more. They
    are made in the pool's feeder thread while this one refines: with threads switched
    as often as can be, the groups are still right. (The walk's names, held raw, were
    once decoded by both threads into one list, and files "vanished": this test caught
    that in 12 of 16 runs, test_treewalk's two-thread test in every run.)"""
    import sif.exact.pipeline as pipeline
    import sif.exact.rounds as rounds

    monkeypatch.setattr(pipeline, "PARALLEL_MIN_FILES", 0)
    monkeypatch.setattr(pipeline, "c_walk", lambda options: False)  # a pool, not threads
    base = os.urandom(5_000)
    for d in range(16):  # 16 sizes, 4 files each: 8 shares for 2 jobs (4 a process)
        for i in range(4):
            data = base if i % 2 else base[:d] + bytes([i]) + base[d + 1 :]
            write(tmp_path / f"d{d}" / f"f{i}", data[: 1000 + 100 * d])
    for i in range(3000):  # files of sizes no other has: their names too are decoded
        write(tmp_path / "unique" / f"u{i:04d}", b"u" * (5_000 + i))
    expected = groups_of(tmp_path, jobs=1)
    tables: list[int] = []
    real_init = rounds._Table.__init__

    def counted(self: object, cols: object, indices: list[int]) -> None:
        tables.append(len(indices))
        real_init(self, cols, indices)  # type: ignore[arg-type]

    here: list[int] = []  # this process's refinements (a worker's land in its own copy)
    real_refine = rounds._refine_task

    def noted(task: Any, progress: object = None) -> Any:
        if task[1] is not None:  # the walk's indices: no table was made
            here.append(len(task[1]))
        return real_refine(task, progress)  # type: ignore[arg-type]

    monkeypatch.setattr(rounds._Table, "__init__", counted)
    monkeypatch.setattr(rounds, "_refine_task", noted)
    with threads_switched_often():  # the worker's tables are made in another thread
        assert groups_of(tmp_path, jobs=2) == expected == naive_groups(tmp_path)
    assert here and tables  # both processes took shares
    assert len(here) + len(tables) == 8
    assert sum(here) + sum(tables) == 64  # every candidate in one share


@pytest.mark.usefixtures("first_loop")
def test_links_in_parallel_shares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardlinks and symlinks in groups dealt to both processes (each share's names
    mapped back to the walk's): the groups of one process, and the naive ones."""
    import sif.exact.pipeline as pipeline

    monkeypatch.setattr(pipeline, "PARALLEL_MIN_FILES", 0)
    for g in range(16):
        data = os.urandom(3_000 + 10 * g)
        write(tmp_path / f"g{g}" / "a", data)
        write(tmp_path / f"g{g}" / "b", data)
        # Its last byte changed, always (random data ends with "!" once in 256).
        write(tmp_path / f"g{g}" / "c", data[:-1] + bytes([data[-1] ^ 0xFF]))
        os.link(tmp_path / f"g{g}" / "a", tmp_path / f"g{g}" / "a-link")
        os.symlink("b", tmp_path / f"g{g}" / "b-sym")
    for follow in (False, True):
        one = [
            sorted(g.all_paths)
            for g in find_duplicates([str(tmp_path)], jobs=1, follow_symlinks=follow)
        ]
        two = [
            sorted(g.all_paths)
            for g in find_duplicates([str(tmp_path)], jobs=2, follow_symlinks=follow)
        ]
        assert one == two
        assert len(two) == 16
        assert all(len(paths) == (4 if follow else 3) for paths in two)
