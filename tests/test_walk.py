"""The walker on real trees: filters, links, special files, bad names, errors."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sif.errors import ConfigError
from sif.events import ScanWarning
from sif.records import RecordColumns
from sif.treewalk import usable
from sif.walk import FileRecord, Walker, WalkOptions, parse_size, read_path_list
from treeutil import write


def scan(*roots: Path | str, **opts: object) -> tuple[list[str], list[ScanWarning], Walker]:
    warnings: list[ScanWarning] = []
    walker = Walker(WalkOptions(**opts), warnings.append)  # type: ignore[arg-type]
    paths = sorted(r.path for r in walker.walk([str(r) for r in roots]))
    return paths, warnings, walker


def test_files_and_dirs_as_roots(tmp_path: Path) -> None:
    write(tmp_path / "d/a", b"1")
    write(tmp_path / "d/sub/b", b"22")
    write(tmp_path / "c", b"333")
    paths, warnings, _ = scan(tmp_path / "d", tmp_path / "c")
    assert paths == sorted([str(tmp_path / "d/a"), str(tmp_path / "d/sub/b"), str(tmp_path / "c")])
    assert warnings == []


def test_overlapping_roots_yield_each_path_once(tmp_path: Path) -> None:
    write(tmp_path / "d/sub/b", b"22")
    paths, _, _ = scan(tmp_path / "d", tmp_path / "d/sub", tmp_path / "d/./sub/b")
    assert paths == [str(tmp_path / "d/sub/b")]


def test_size_filters_and_empty_default(tmp_path: Path) -> None:
    write(tmp_path / "empty", b"")
    write(tmp_path / "small", b"x" * 10)
    write(tmp_path / "big", b"x" * 1000)
    assert scan(tmp_path)[0] == [str(tmp_path / "big"), str(tmp_path / "small")]
    assert str(tmp_path / "empty") in scan(tmp_path, empty=True)[0]
    assert scan(tmp_path, min_size=11)[0] == [str(tmp_path / "big")]
    assert scan(tmp_path, max_size=10)[0] == [str(tmp_path / "small")]


def test_bad_size_bounds_fail_before_work() -> None:
    with pytest.raises(ConfigError):
        WalkOptions(min_size=10, max_size=5)
    with pytest.raises(ConfigError):
        parse_size("ten")
    assert parse_size("4K") == 4096
    assert parse_size("1.5MiB") == 1572864
    assert parse_size("2g") == 2 * 1024**3


def test_include_exclude_globs(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", b"1")
    write(tmp_path / "b.log", b"1")
    write(tmp_path / "skip/c.txt", b"1")
    assert scan(tmp_path, include=("*.txt",))[0] == sorted(
        [str(tmp_path / "a.txt"), str(tmp_path / "skip/c.txt")]
    )
    assert scan(tmp_path, exclude=("skip",))[0] == sorted(
        [str(tmp_path / "a.txt"), str(tmp_path / "b.log")]
    )
    assert scan(tmp_path, exclude=("*/skip/*",))[0] == sorted(
        [str(tmp_path / "a.txt"), str(tmp_path / "b.log")]
    )


def test_hidden_included_by_default(tmp_path: Path) -> None:
    write(tmp_path / ".hid/f", b"1")
    write(tmp_path / ".dot", b"1")
    write(tmp_path / "v", b"1")
    assert len(scan(tmp_path)[0]) == 3
    assert scan(tmp_path, hidden=False)[0] == [str(tmp_path / "v")]


def test_fifo_socket_never_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # opening it would block forever
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    write(tmp_path / "f", b"1")
    paths, warnings, walker = scan(tmp_path, tmp_path / "fifo")
    sock.close()
    assert paths == [str(tmp_path / "f")]
    assert walker.stats.special == 3  # fifo (twice: as entry and as root) and socket
    assert warnings == []


def test_device_never_opened() -> None:
    paths, _, walker = scan("/dev/null", "/dev/zero")
    assert paths == []
    assert walker.stats.special == 2


def test_symlinks_not_followed_by_default(tmp_path: Path) -> None:
    write(tmp_path / "real/f", b"1")
    os.symlink(tmp_path / "real", tmp_path / "link")
    os.symlink(tmp_path / "real/f", tmp_path / "flink")
    paths, _, walker = scan(tmp_path)
    assert paths == [str(tmp_path / "real/f")]
    assert walker.stats.symlinks_skipped == 2
    followed, _, _ = scan(tmp_path, follow_symlinks=True)
    # The linked directory is the same directory: walked once.
    assert str(tmp_path / "flink") in followed
    assert len([p for p in followed if p.endswith("/f")]) == 1


def test_symlink_loop_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path / "d/f", b"1")
    os.symlink(tmp_path / "d", tmp_path / "d/up")  # d/up -> d: a loop
    os.symlink("self", tmp_path / "self")  # self -> self: ELOOP
    os.symlink("nowhere", tmp_path / "broken")
    paths, warnings, _ = scan(tmp_path, follow_symlinks=True)
    assert paths == [str(tmp_path / "d/f")]
    causes = {Path(w.path).name: w.cause for w in warnings}
    assert "loop" in causes["up"]
    assert "loop" in causes["self"]
    assert "broken" in causes["broken"]


def test_vanished_root_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path / "f", b"1")
    paths, warnings, _ = scan(tmp_path / "gone", tmp_path / "f")
    assert paths == [str(tmp_path / "f")]
    assert warnings == [ScanWarning(str(tmp_path / "gone"), "vanished during the scan")]


def test_names_with_newline_and_invalid_utf8(tmp_path: Path) -> None:
    write(tmp_path / "new\nline", b"1")
    raw = os.fsencode(tmp_path) + b"/bad\xff\xfename"
    write(raw, b"2")
    paths, warnings, _ = scan(tmp_path)
    assert os.fsencode(str(tmp_path / "new\nline")) in [os.fsencode(p) for p in paths]
    assert raw in [os.fsencode(p) for p in paths]
    assert len(warnings) == 1
    assert "not valid UTF-8" in warnings[0].cause
    assert os.fsencode(warnings[0].path) == raw


def test_read_path_list_lines_and_nul() -> None:
    data = b"a\nb\xff\r\n\nc\n"
    assert [os.fsencode(p) for p in read_path_list(io.BytesIO(data))] == [b"a", b"b\xff", b"c"]
    nul = b"x\ny\0z\0"
    assert [os.fsencode(p) for p in read_path_list(io.BytesIO(nul), nul=True)] == [b"x\ny", b"z"]


ONE_FILE_SYSTEM = r"""
import json, sys
from sif.walk import WalkOptions, walk
top = sys.argv[1]
print(json.dumps({
    "all": sorted(r.path for r in walk([top])),
    "x": sorted(r.path for r in walk([top], WalkOptions(one_file_system=True))),
}))
"""


def test_one_file_system(tmp_path: Path) -> None:
    """-x does not descend into a file system mounted under the root (a tmpfs made here)."""
    import json
    import shutil
    import subprocess
    import sys

    assert os.geteuid() == 0, "this test needs root (CI runs as root): it mounts a tmpfs"
    assert shutil.which("unshare"), "this test needs unshare (util-linux)"
    write(tmp_path / "top/here", b"x")
    (tmp_path / "top/mnt").mkdir()
    # A mount namespace of its own: the tmpfs is never seen outside, nor left behind.
    script = 'mount -t tmpfs sif-test "$1/mnt" && echo y > "$1/mnt/there" && exec "$2" -c "$3" "$1"'
    out = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            str(tmp_path / "top"),
            sys.executable,
            ONE_FILE_SYSTEM,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    here, there = str(tmp_path / "top/here"), str(tmp_path / "top/mnt/there")
    assert got == {"all": [here, there], "x": [here]}
    assert os.listdir(tmp_path / "top/mnt") == []  # outside the namespace: nothing mounted


def test_parallel_walk_equals_serial_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sif.walk
    from sif.executors import fork_pool
    from sif.walk import parallel_walk

    monkeypatch.setattr(sif.walk, "BATCH_DIRS", 3)  # batches hand most of their work back
    monkeypatch.setattr(sif.walk, "usable", lambda walker: False)  # the workers' read-ahead
    # Deep and wide enough that work batches leave directories behind for the queue.
    for a in range(6):
        for b in range(30):
            for c in range(3):
                write(tmp_path / f"a{a}/b{b}/c{c}/f", f"{a}{b}{c}".encode())
    write(tmp_path / "top", b"t")
    serial, stats = parallel_walk([tmp_path], WalkOptions())
    pool = fork_pool(2)
    try:
        shared, pstats = parallel_walk([tmp_path], WalkOptions(), pool=pool, jobs=2)
    finally:
        pool.shutdown()
    assert len(serial) == 6 * 30 * 3 + 1
    assert sorted(shared.paths) == sorted(serial.paths)
    assert pstats.files == stats.files
    assert pstats.directories == stats.directories


@pytest.mark.skipif(not usable(Walker(WalkOptions())), reason="the C walk is not built")
def test_parallel_walk_with_a_pool_is_the_c_walk_with_helper_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pool: object
) -> None:
    """With a pool and no patterns, the walk runs here in C, ``jobs - 1`` helper threads
    reading ahead (the workers wait): the records are the serial walk's, in its order."""
    import sif.treewalk
    import sif.walk
    from sif.walk import parallel_walk

    for a in range(5):
        for b in range(12):
            write(tmp_path / f"a{a}/b{b}/f{a}{b}", f"{a}{b}".encode())
    write(tmp_path / "a0/.hidden", b"h")
    threads: list[int] = []
    real = sif.treewalk.walk_tree

    def spy(*args: object, **kwargs: object) -> object:
        threads.append(cast(int, args[4] if len(args) > 4 else kwargs.get("threads", 0)))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sif.walk, "walk_tree", spy)
    shared, pstats = parallel_walk([tmp_path], WalkOptions(), pool=pool, jobs=2)
    alone, stats = parallel_walk([tmp_path], WalkOptions())
    assert threads == [1, 0]
    serial = [r.path for r in Walker(WalkOptions()).walk([str(tmp_path)])]
    assert shared.paths == alone.paths == serial
    assert (pstats.files, pstats.directories) == (stats.files, stats.directories) == (61, 66)


def test_walk_helpers_are_one_a_job_within_the_cores() -> None:
    from sif.treewalk import walk_helpers

    cores = len(os.sched_getaffinity(0))
    assert walk_helpers(1) == 0
    assert walk_helpers(2) == min(2, cores) - 1
    assert walk_helpers(64) == min(cores, 8) - 1  # more threads than cores only slow it
    # A process bound to one core (taskset, a cgroup's cpuset) walks with no helper.
    code = "import os; os.sched_setaffinity(0, {0}); from sif.treewalk import walk_helpers; "
    code += "print(walk_helpers(8))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


# --- the parallel walk gives exactly the serial walk's records --------------------------

NAMES = ("a", "b", "c")


@st.composite
def trees_and_roots(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    """Directories (paths like ``a/b/c``), files in them, and a list of roots among both.

    Roots may nest, repeat, be spelled ``x/./y`` or ``x/../x/y``, be symlinks
    to a directory of the tree (another name for a directory walked anyway), or
    reach their file or directory through a symlink to its parent (``via:``:
    another name for the same entry, which a file root once gave twice).
    """
    paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=6).map("/".join)
    dirs = sorted(set(draw(st.lists(paths, min_size=1, max_size=12))))
    every = sorted({"/".join(d.split("/")[:i]) for d in dirs for i in range(1, d.count("/") + 2)})
    files = sorted(
        {f"{d}/f{i}" for d in draw(st.lists(st.sampled_from(every), max_size=15)) for i in (1, 2)}
    )
    spelled = st.sampled_from(every + files).flatmap(
        lambda p: st.sampled_from([p, p.replace("/", "/./", 1), p + "/", "link:" + p, "via:" + p])
    )
    roots = draw(st.lists(spelled, min_size=1, max_size=5))
    return every, files, roots


def make_tree(top: Path, dirs: list[str], files: list[str], roots: list[str]) -> list[str]:
    for d in dirs:
        (top / d).mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        write(top / f, f"{i}".encode() * (i + 1))
    out = []
    for i, r in enumerate(roots):
        if r.startswith("link:"):
            link = top / f"root-link{i}"
            os.symlink(top / r[5:], link)
            out.append(str(link))
        elif r.startswith("via:"):  # the parent through a link: the same entry, named anew
            link = top / f"parent-link{i}"
            os.symlink((top / r[4:]).parent, link)
            out.append(f"{link}/{Path(r[4:]).name}")
        else:
            out.append(f"{top}/{r}")
    return out


@pytest.fixture(scope="module")
def pool() -> Iterator[object]:
    from sif.executors import fork_pool

    p = fork_pool(2)
    try:
        yield p
    finally:
        p.shutdown()


def serial_and_parallel(
    roots: list[str], pool: object, batch: int = 2, levels: int = 0, **opts: object
) -> tuple[list[FileRecord], list[ScanWarning], list[FileRecord], list[ScanWarning]]:
    """The serial walk's records and warnings, then the parallel walk's (two processes).

    Batches of ``batch`` directories after ``levels`` read here: small, so that
    the worker gets much of the work even in a small tree. The parallel walk is
    the workers' read-ahead (where the C walk would serve, it is turned off);
    its columns are held to the walk of this process alone (the C walk where
    it is built).
    """
    import sif.walk
    from sif.walk import parallel_walk

    options = WalkOptions(**opts)  # type: ignore[arg-type]
    serial_warnings: list[ScanWarning] = []
    serial = list(Walker(options, serial_warnings.append).walk(roots))
    shared_warnings: list[ScanWarning] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sif.walk, "BATCH_DIRS", batch)
        mp.setattr(sif.walk, "SPLIT_LEVELS", levels, raising=False)
        mp.setattr(sif.walk, "usable", lambda walker: False)
        cols, _ = parallel_walk(roots, options, shared_warnings.append, pool=pool, jobs=2)
    alone, _ = parallel_walk(roots, options)
    assert cols.digest() == alone.digest()
    return serial, serial_warnings, list(cols), shared_warnings


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(trees_and_roots(), st.sampled_from([1, 2, 3, 256]), st.sampled_from([0, 1, 4]))
def test_parallel_walk_gives_the_serial_records(
    pool: object, tree: tuple[list[str], list[str], list[str]], batch: int, levels: int
) -> None:
    dirs, files, roots = tree
    with tempfile.TemporaryDirectory() as top:
        root_paths = make_tree(Path(top), dirs, files, roots)
        serial, sw, shared, pw = serial_and_parallel(root_paths, pool, batch, levels)
        assert len(set(serial)) == len(serial)  # no file twice
        assert len(set(shared)) == len(shared)
        assert set(shared) == set(serial)
        assert sorted(pw, key=str) == sorted(sw, key=str)
        names = [(r.dev, r.ino) for r in serial if not r.symlink]  # a linked root is a name
        assert len(set(names)) == len(names)  # no file of the tree under two names
        assert len({(r.dev, r.ino) for r in shared if not r.symlink}) == len(names)


def test_nested_roots_under_two_jobs_list_a_file_once(tmp_path: Path, pool: object) -> None:
    for i in range(20):
        write(tmp_path / f"t/a/b/c{i}/f", b"x")
    write(tmp_path / "t/g", b"y")
    for roots in (["t", "t/a/b"], ["t/a/b", "t"], ["t", "t/a/b/c3", "t/a/b/c3/f"]):
        paths = [str(tmp_path / r) for r in roots]
        serial, _, shared, _ = serial_and_parallel(paths, pool, batch=256, levels=4)
        assert len(serial) == 21
        assert sorted(shared) == sorted(serial)


def test_a_file_root_named_twice_is_one_file_and_its_hard_links_stay(
    tmp_path: Path, pool: object
) -> None:
    """``d/f``, ``/abs/d/f``, ``link/f`` and a bind mount's ``f`` are one entry: one record
    (two made ``sif dupes`` call the file a replica of itself, and ``sif remove`` then
    deleted the only copy). A hard link of it is another entry: it stays."""
    write(tmp_path / "d/f", b"precious\n")
    write(tmp_path / "d/g", b"other\n")
    os.link(tmp_path / "d/g", tmp_path / "d/g2")
    os.symlink(tmp_path / "d", tmp_path / "link")
    os.symlink("f", tmp_path / "d/sf")  # a name of its own (it protects f in the actions)
    os.symlink("g2", tmp_path / "d/sg")
    (tmp_path / "bound").mkdir()
    rel = os.path.relpath(tmp_path / "d/f")
    names = [rel, str(tmp_path / "d/f"), str(tmp_path / "link/f"), str(tmp_path / "bound/f")]
    sf, sg = str(tmp_path / "d/sf"), str(tmp_path / "d/sg")
    with mounted(tmp_path / "d", tmp_path / "bound"):
        for roots in (names, list(reversed(names))):
            g = [str(tmp_path / "d/g"), str(tmp_path / "link/g"), str(tmp_path / "d/g2")]
            serial, _, shared, _ = serial_and_parallel([sf, *roots, *g, sg], pool)
            for records in (serial, shared):
                assert [r.path for r in records] == [sf, roots[0], g[0], g[2], sg]
                assert [r.symlink for r in records] == [True, False, False, False, True]


def mounted(source: Path, target: Path) -> contextlib.AbstractContextManager[None]:
    """``mount --bind source target`` for the block; we run as root (CI too)."""

    @contextlib.contextmanager
    def bound() -> Iterator[None]:
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", str(target)], check=True)

    return bound()


def test_bind_mount_loop_walked_once_in_parallel(tmp_path: Path, pool: object) -> None:
    for i in range(10):
        write(tmp_path / f"t/d{i}/e/f", b"x" * (i + 1))
    (tmp_path / "t/d3/e/loop").mkdir()
    with mounted(tmp_path / "t", tmp_path / "t/d3/e/loop"):  # t inside itself
        serial, sw, shared, pw = serial_and_parallel([str(tmp_path / "t")], pool)
    assert len(serial) == 10
    assert sorted(shared) == sorted(serial)
    assert [w.path for w in sw] == [w.path for w in pw] == [str(tmp_path / "t/d3/e/loop")]
    assert "loop" in sw[0].cause


def test_bind_mounted_sibling_walked_once_in_parallel(tmp_path: Path, pool: object) -> None:
    for i in range(10):
        write(tmp_path / f"t/x/d{i}/f", b"x" * (i + 1))
        write(tmp_path / f"t/y/d{i}/g", b"y" * (i + 1))
    (tmp_path / "t/y/d5/m").mkdir()
    with mounted(tmp_path / "t/x", tmp_path / "t/y/d5/m"):  # one directory, two names
        serial, _, shared, _ = serial_and_parallel([str(tmp_path / "t")], pool)
        nested, _, nested_shared, _ = serial_and_parallel(
            [str(tmp_path / "t/y"), str(tmp_path / "t")], pool
        )
    assert len(serial) == len(nested) == 20
    assert sorted(shared) == sorted(serial)
    assert sorted(nested_shared) == sorted(nested)
    # The walk takes a directory under the first name it meets: here t/y/d5/m.
    assert any("/t/y/d5/m/" in r.path for r in nested)


def test_skip_dirs_are_never_entered(tmp_path: Path, pool: object) -> None:
    write(tmp_path / "t/keep/f", b"1")
    write(tmp_path / "t/idx/segments/x", b"2")
    write(tmp_path / "t/idx/y", b"3")
    st_ = os.stat(tmp_path / "t/idx")
    skip = frozenset({(st_.st_dev, st_.st_ino)})
    kept = [str(tmp_path / "t/keep/f")]
    for roots, expected in (
        ([tmp_path / "t"], kept),
        ([tmp_path / "t/idx", tmp_path / "t"], kept),  # a root that is the skipped directory
        ([tmp_path / "t/idx/segments", tmp_path / "t/idx/y"], []),  # roots under it
    ):
        paths, warnings, _ = scan(*roots, skip_dirs=skip)
        assert (paths, warnings) == (expected, [])
        serial, _, shared, _ = serial_and_parallel([str(r) for r in roots], pool, skip_dirs=skip)
        assert sorted(shared) == sorted(serial)
    assert WalkOptions(skip_dirs=[[st_.st_dev, st_.st_ino]]).skip_dirs == skip  # type: ignore[arg-type]
    assert scan(tmp_path / "t")[0] == sorted(
        str(tmp_path / p) for p in ("t/keep/f", "t/idx/segments/x", "t/idx/y")
    )


def test_records_say_which_names_are_symlinks(tmp_path: Path) -> None:
    write(tmp_path / "d/f", b"1")
    os.symlink(tmp_path / "d/f", tmp_path / "d/link")
    os.symlink(tmp_path / "d/f", tmp_path / "rootlink")
    records = Walker(WalkOptions(follow_symlinks=True)).walk(
        [tmp_path / "d", tmp_path / "rootlink"]
    )
    assert sorted((Path(r.path).name, r.symlink) for r in records) == [
        ("f", False),
        ("link", True),
        ("rootlink", True),
    ]
    [plain] = Walker().walk([tmp_path / "d"])
    assert not plain.symlink


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_directories_are_read_through_descriptors_that_are_closed(tmp_path: Path) -> None:
    # Each directory is opened once, read, and closed, whatever happens to it.
    for d in range(30):
        write(tmp_path / f"d{d}/sub/f", b"x" * (d + 1))
    write(tmp_path / "swapped", b"now a file")
    before = open_fds()
    paths, warnings, walker = scan(tmp_path)
    assert len(paths) == 31 and warnings == []
    cols = RecordColumns()
    # A directory swapped for a file, or gone, between its listing and its read.
    for name, cause in (("swapped", "Not a directory"), ("gone", "vanished during the scan")):
        d = walker._read_dir(str(tmp_path / name), (0, 0), cols)
        assert (d.start, d.stop, d.subdirs) == (0, 0, [])
        assert d.warnings == [ScanWarning(str(tmp_path / name), cause)]
    assert open_fds() == before


def test_warnings_and_path_globs_name_the_whole_path(tmp_path: Path) -> None:
    write(tmp_path / "keep/a.txt", b"1")
    write(tmp_path / "skip/b.txt", b"2")
    os.symlink("nowhere", tmp_path / "keep/broken")
    paths, warnings, _ = scan(tmp_path, follow_symlinks=True, exclude=(f"{tmp_path}/skip",))
    assert paths == [str(tmp_path / "keep/a.txt")]
    assert warnings == [ScanWarning(str(tmp_path / "keep/broken"), "broken symlink")]
