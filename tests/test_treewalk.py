"""The walk in C (sif._treec, sif.treewalk) against the Python walk: the same outcome.

The reference is the walk of sif.walk.Walker with the Python directory reader
(sif.dirread.DirReader.read_py): the same files in the same order, the same
columns, warnings and counts, on hostile trees, with and without helper threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.actionutil import open_fds, tool
from tests.test_dirread import hostile_tree

import sif.dirread
import sif.treewalk as treewalk
from sif.events import ScanWarning
from sif.keyedwalk import keyed_walk
from sif.pathkeys import new_secret, path_keys, walk_keys
from sif.records import FileRecord, RecordColumns
from sif.walk import Walker, WalkOptions, parallel_walk
from treeutil import threads_switched_often, write


@pytest.fixture(autouse=True)
def _built() -> None:
    """The C walk must be there (a skip would hide a build that failed)."""
    if treewalk._treec is None:
        pytest.fail("sif._treec is not built (pip install -e . builds it)")


#: The path keys' secret of these tests (an index's is random: sif.pathkeys).
SECRET = new_secret()

COLUMNS = ("dirs", "dir_of", "names", "dev", "ino", "size", "mtime_ns", "nlink", "ctime_ns")

Outcome = tuple[dict[str, list[object]], list[ScanWarning], dict[str, int]]


def _columns(cols: RecordColumns) -> dict[str, list[object]]:
    return {c: list(getattr(cols, c)) for c in (*COLUMNS, "symlink")}


def python_walk(roots: list[str], trust_type: bool = True, **options: object) -> Outcome:
    """The Python walk (Walker._resolve, DirReader.read_py), as parallel_walk gives it."""
    warnings: list[ScanWarning] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sif.dirread, "_dirc", None)  # the Python reader; then no C walk either
        walker = Walker(WalkOptions(**options), warnings.append)  # type: ignore[arg-type]
        assert not treewalk.usable(walker)
        walker._reader.trust_type = trust_type
        cols = RecordColumns()
        file_roots = []
        for item in walker._resolve(
            walker._stat_roots(roots), lambda u: walker._read_dir(u[0], u[1], cols)
        ):
            if isinstance(item, FileRecord):
                file_roots.append(item)
        cols.extend(file_roots)
    return _columns(cols), warnings, asdict(walker.stats)


def c_walk(
    roots: list[str], trust_type: bool = True, threads: int = 0, **options: object
) -> tuple[Outcome, np.ndarray]:
    """The C walk (sif.treewalk.walk_tree), and the keys it computed."""
    from array import array

    warnings: list[ScanWarning] = []
    walker = Walker(WalkOptions(**options), warnings.append)  # type: ignore[arg-type]
    assert treewalk.usable(walker)
    walker._reader.trust_type = trust_type
    cols = RecordColumns()
    keys = array("Q")
    advanced: list[int] = []
    file_roots = treewalk.walk_tree(
        walker, walker._stat_roots(roots), cols, advanced.append, threads, keys, SECRET
    )
    assert sum(advanced) == len(cols)
    n = len(cols)
    cols.extend(file_roots)
    out = np.frombuffer(keys, dtype=np.uint64).reshape(-1, 2)
    assert len(out) == n
    return (_columns(cols), warnings, asdict(walker.stats)), out


def assert_same(roots: list[str], trust_type: bool = True, **options: object) -> Outcome:
    """Both walks agree, with 0, 1 and 3 helper threads; the keys are those of Python."""
    want = python_walk(roots, trust_type, **options)
    for threads in (0, 1, 3):
        got, keys = c_walk(roots, trust_type, threads, **options)
        assert got == want, threads
        cols = RecordColumns()
        cols.dirs, cols.dir_of, cols.names = got[0]["dirs"], got[0]["dir_of"], got[0]["names"]  # type: ignore[assignment]
        n = len(keys)
        cols.names = cols.names[:n]
        cols.dir_of = cols.dir_of[:n]
        assert np.array_equal(keys, walk_keys(cols, SECRET))
    return want


def nested_hostile(root: Path) -> None:
    """Hostile directories at three levels, and files between them."""
    hostile_tree(root)
    hostile_tree(root / "sub" / "deeper")
    hostile_tree(root / "sub" / "deeper" / "sub" / "deepest")
    write(root / "sub" / "f1", b"one")
    os.mkdir(os.fsencode(root / "sub") + b"/\xff-dir")
    write(os.fsencode(root / "sub") + b"/\xff-dir/g", b"under a bad name")


@pytest.mark.parametrize("trust_type", [True, False])
@pytest.mark.parametrize(
    "options",
    [{}, {"hidden": False}, {"empty": True}, {"min_size": 8, "max_size": 4000}],
)
def test_c_walk_equals_python_walk_on_hostile_trees(
    tmp_path: Path, options: dict[str, object], trust_type: bool
) -> None:
    nested_hostile(tmp_path / "t")
    cols, warnings, stats = assert_same([str(tmp_path / "t")], trust_type, **options)
    assert stats["directories"] >= 8 and len(cols["names"]) >= 10
    assert any("\udcff" in w.path for w in warnings)  # names not UTF-8, shown escaped


def test_roots_nested_repeated_missing_and_files(tmp_path: Path) -> None:
    nested_hostile(tmp_path / "t")
    write(tmp_path / "f", b"a file root")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "t" / "sub", tmp_path / "link")
    t = str(tmp_path / "t")
    for roots in (
        [t, f"{t}/sub", f"{t}/sub/f1"],  # under a root walked: once
        [f"{t}/sub", t],  # the inner one first
        [str(tmp_path / "link"), t],  # a link root: followed
        [str(tmp_path / "gone"), str(tmp_path / "f"), str(tmp_path / "fifo"), t, t],
        [f"{t}/a.txt", f"{t}/sub/deeper"],
    ):
        assert_same(roots)


def test_skip_dirs_and_one_file_system(tmp_path: Path) -> None:
    nested_hostile(tmp_path / "t")
    st_ = os.stat(tmp_path / "t" / "sub" / "deeper")
    skip = frozenset({(st_.st_dev, st_.st_ino)})
    cols, _, _ = assert_same([str(tmp_path / "t")], skip_dirs=skip)
    assert not any("deeper" in d for d in cols["dirs"])  # type: ignore[operator]
    assert_same([str(tmp_path / "t" / "sub" / "deeper"), str(tmp_path / "t")], skip_dirs=skip)
    subprocess.run(["mount", "-t", "tmpfs", "none", str(tmp_path / "t" / "sub")], check=True)
    try:  # another file system under the root
        write(tmp_path / "t" / "sub" / "x" / "on-tmpfs", b"t")
        cols, _, _ = assert_same([str(tmp_path / "t")], one_file_system=True)
        assert not any("/sub/" in d for d in cols["dirs"])  # type: ignore[operator]
        cols, _, _ = assert_same([str(tmp_path / "t")])
        assert "on-tmpfs" in cols["names"]  # type: ignore[operator]
        assert_same([str(tmp_path / "t" / "sub")], one_file_system=True)  # its own root
    finally:
        subprocess.run(["umount", str(tmp_path / "t" / "sub")], check=True)


names = st.binary(min_size=1, max_size=8).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


@st.composite
def trees(draw: st.DrawFn) -> list[tuple[bytes, str]]:
    """Entries of a small tree: (relative path, kind), parents before children."""
    out: list[tuple[bytes, str]] = []
    dirs = [b""]
    for _ in range(draw(st.integers(0, 30))):
        parent = draw(st.sampled_from(dirs))
        name = draw(names)
        path = parent + b"/" + name if parent else name
        if any(p == path for p, _ in out):
            continue
        kind = draw(st.sampled_from(["file", "empty", "dir", "dir", "link", "dirlink", "fifo"]))
        out.append((path, kind))
        if kind == "dir":
            dirs.append(path)
    return out


def make(top: bytes, entries: list[tuple[bytes, str]]) -> None:
    for path, kind in entries:
        full = top + b"/" + path
        if kind in ("file", "empty"):
            fd = os.open(full, os.O_WRONLY | os.O_CREAT)
            os.write(fd, path if kind == "file" else b"")
            os.close(fd)
        elif kind == "dir":
            os.mkdir(full)
        elif kind == "link":
            os.symlink(b"nowhere", full)
        elif kind == "dirlink":
            os.symlink(top, full)  # back to the top: never followed
        else:
            os.mkfifo(full)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(entries=trees(), hidden=st.booleans(), trust_type=st.booleans(), empty=st.booleans())
def test_c_walk_equals_python_walk_on_random_trees(
    entries: list[tuple[bytes, str]], hidden: bool, trust_type: bool, empty: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        make(os.fsencode(tmp), entries)
        cols, _, stats = assert_same([tmp], trust_type, hidden=hidden, empty=empty)
        files = {p for p, k in entries if k == "file" or (empty and k == "empty")}
        shown = {p for p in files if hidden or not any(s.startswith(b".") for s in p.split(b"/"))}
        assert len(cols["names"]) == len(shown) == stats["files"]


def test_unreadable_directories_warn_as_in_python() -> None:
    # As nobody: a directory it may not open, one it may list but not search.
    base = Path(tempfile.mkdtemp(prefix="sif-treewalk-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        nested_hostile(base / "t")
        os.chmod(base / "t" / "sub", 0o744)  # listed, its entries not stat-ed
        os.chmod(base / "t" / "sub" / "deeper", 0o700)  # not opened (and not stat-ed)
        os.chmod(base / "t" / ".hidden_dir", 0o000)
        script = (
            "import sys\n"
            "import tests.test_treewalk as t\n"
            "cols, warnings, _ = t.assert_same([sys.argv[1]])\n"
            "print(sorted({w.cause for w in warnings}))\n"
        )
        drop = [tool("setpriv"), "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        root = Path(__file__).resolve().parent.parent
        env = {
            **os.environ,
            "PYTHONPATH": f"{root}{os.pathsep}{root / 'src'}{os.pathsep}{root / 'tests'}",
        }
        p = subprocess.run(
            [*drop, sys.executable, "-c", script, str(base / "t")],
            capture_output=True,
            text=True,
            env=env,
            cwd=base,
        )
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == (
            "['name is not valid UTF-8 (shown escaped)', 'permission denied']"
        )
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=True)


def _names(chunk: tuple[object, ...]) -> list[str]:
    """The names of a chunk of sif._treec: their bytes and offsets, decoded."""
    blob, offset_bytes = chunk[2]  # type: ignore[misc]
    offsets = np.frombuffer(offset_bytes, dtype=np.int64).tolist()
    return [os.fsdecode(blob[a:b]) for a, b in itertools.pairwise(offsets)]


def test_a_directory_gone_before_it_is_read(tmp_path: Path) -> None:
    # The walk takes a directory when it reads its parent, and reads it later.
    for d in ("a", "b", "c"):
        write(tmp_path / "t" / d / "f", b"x")
    write(tmp_path / "t" / "f0", b"y")
    st_ = os.stat(tmp_path / "t")
    tree = treewalk._treec.Walker(False, 1, 1 << 40, True, False, b"", 0, b"")  # type: ignore[union-attr]
    try:
        assert tree.add_root(os.fsencode(tmp_path / "t"), st_.st_dev, st_.st_ino)
        assert not tree.add_root(os.fsencode(tmp_path / "t"), st_.st_dev, st_.st_ino)
        first = tree.read(1)  # t itself (one file): its subdirectories taken, not read
        assert _names(first) == ["f0"] and first[6][0] == 1
        os.rename(tmp_path / "t" / "b", tmp_path / "b")
        got = []
        while (chunk := tree.read(1)) is not None:
            got.append(chunk)
    finally:
        tree.close()
    problems = [p for c in got for p in c[5]]
    assert problems == [(3, str(tmp_path / "t" / "b"), 2)]  # ENOENT: "vanished during the scan"
    assert [n for c in got for n in _names(c)] == ["f", "f"]
    assert sum(c[6][0] for c in got) == 3  # b counted as read, as the Python walk does


def test_keys_are_those_of_python(tmp_path: Path) -> None:
    """The C walk's keys are keyed BLAKE2b-128 of the paths' bytes, as hashlib makes them
    (paths of every length around BLAKE2b's 128-byte blocks)."""
    rng = np.random.default_rng(5)
    raw = os.fsencode(tmp_path)
    made = []
    for length in [*range(1, 80), *range(100, 140), 200, 250, 255]:
        name = bytes(rng.integers(1, 256, length, dtype=np.uint8)).replace(b"/", b"_")
        if name in (b".", b".."):
            continue
        with contextlib.suppress(FileExistsError):
            write(raw + b"/" + name, b"k")
            made.append(name)
    (cols, _, _), keys = c_walk([str(tmp_path)])
    dirs, dir_of, names = cols["dirs"], cols["dir_of"], cols["names"]
    paths = [os.fsencode(dirs[d] + n) for d, n in zip(dir_of, names, strict=True)]  # type: ignore[index,operator]
    assert len(paths) == len(made)
    assert np.array_equal(keys, path_keys(paths, len(paths), SECRET))
    digests = [hashlib.blake2b(p, key=SECRET, digest_size=16).digest() for p in paths]
    assert np.array_equal(keys, np.frombuffer(b"".join(digests), dtype="<u8").reshape(-1, 2))


def test_keyed_walk_without_the_extension_gives_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested_hostile(tmp_path / "t")
    write(tmp_path / "f", b"file root")
    roots = [str(tmp_path / "t"), str(tmp_path / "f")]
    cols, stats, keys = keyed_walk(roots, WalkOptions(), threads=1, secret=SECRET)
    monkeypatch.setattr(treewalk, "_treec", None)
    cols_py, stats_py, keys_py = keyed_walk(roots, WalkOptions(), secret=SECRET)
    assert _columns(cols) == _columns(cols_py) and stats == stats_py
    assert np.array_equal(keys, keys_py) and len(keys) == len(cols)
    assert parallel_walk(roots, WalkOptions())[0].paths == cols.paths


def mounted(source: Path, target: Path) -> contextlib.AbstractContextManager[None]:
    @contextlib.contextmanager
    def bound() -> Iterator[None]:
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
        try:
            yield
        finally:
            subprocess.run(["umount", str(target)], check=True)

    return bound()


def test_bind_mounts_loops_and_second_names(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path / f"t/x/d{i}/f", b"x" * (i + 1))
    (tmp_path / "t/x/d3/loop").mkdir()
    (tmp_path / "t/y").mkdir()
    with (
        mounted(tmp_path / "t", tmp_path / "t/x/d3/loop"),
        mounted(tmp_path / "t/x", tmp_path / "t/y"),
    ):
        _, warnings, _ = assert_same([str(tmp_path / "t")])
        assert_same([str(tmp_path / "t/y"), str(tmp_path / "t")])
    assert [w.path for w in warnings] == [str(tmp_path / "t/x/d3/loop")]
    assert "loop" in warnings[0].cause


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


def test_ctrl_c_leaves_no_descriptor_and_no_thread(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    big = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path / "big"
    for d in range(400):
        os.mkdir(big / f"d{d}")
        for i in range(50):
            os.close(os.open(big / f"d{d}" / f"f{i}", os.O_WRONLY | os.O_CREAT))
    options = WalkOptions(empty=True)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before, tasks = open_fds(), threads_now()
    old = signal.signal(signal.SIGALRM, interrupt)
    stopped = 0
    try:
        for delay in (0.0005, 0.001, 0.002, 0.004, 0.008) * 4:
            signal.setitimer(signal.ITIMER_REAL, delay)
            try:
                cols, _, _ = keyed_walk([str(big)], options, threads=2)
                assert len(cols) == 20_000
            except KeyboardInterrupt:
                stopped += 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            assert open_fds() == before and threads_now() == tasks
    finally:
        signal.signal(signal.SIGALRM, old)
        subprocess.run(["rm", "-rf", str(big)], check=True)
    assert stopped > 0


def test_a_negative_row_counts_from_the_end_past_decoded_names() -> None:
    from array import array

    cols = RecordColumns()
    cols.add_dir("/d")
    cols.names.extend(["a", "b"])
    cols.add_raw_names(b"cd", array("q", [0, 1, 2]))
    cols.dir_of.extend(array("I", [0] * 4))
    assert [cols.name(-1), cols.name(-2), cols.name(-3), cols.path(-1)] == ["d", "c", "b", "/d/d"]
    with pytest.raises(IndexError):
        cols.name(-5)


@pytest.mark.parametrize("compiled", [True, False], ids=["c", "python"])
@settings(max_examples=100, deadline=None)
@given(
    parts=st.lists(st.lists(names, max_size=6), max_size=5),  # never a NUL or a slash
    before=st.lists(st.text(st.characters(exclude_characters="\0/"), min_size=1), max_size=3),
)
def test_raw_names_read_as_decoded_names(
    compiled: bool, parts: list[list[bytes]], before: list[str]
) -> None:
    """RecordColumns.add_raw_names (the C walk's names: bytes and offsets) gives, row by
    row and all at once, what os.fsdecode gives; names decoded before stay first. All
    at once, the names are decoded by ``_treec.decode_names`` or, without it, in Python."""
    import sif.records

    assert sif.records._c_decode_names is not None, "sif._treec is not built"
    with pytest.MonkeyPatch.context() as mp:
        if not compiled:
            mp.setattr(sif.records, "_c_decode_names", None)
        _check_raw_names(parts, before)


def _check_raw_names(parts: list[list[bytes]], before: list[str]) -> None:
    from array import array

    raw = RecordColumns()
    raw.add_dir("/d")
    for name in before:
        raw.dir_of.append(0)
        raw.names.append(name)
    want = list(before)
    for chunk in parts:
        offsets = array("q", [0])
        for name in chunk:
            offsets.append(offsets[-1] + len(name))
        raw.add_raw_names(b"".join(chunk), offsets)
        raw.dir_of.extend(array("I", [0]) * len(chunk))
        want += [os.fsdecode(n) for n in chunk]
    assert len(raw) == len(want)
    assert [raw.name(i) for i in range(len(want))] == want
    assert [raw.name(i - len(want)) for i in range(len(want))] == want  # from the end
    for outside in (len(want), -len(want) - 1):
        with pytest.raises(IndexError):
            raw.name(outside)
    assert [raw.path(i) for i in range(len(want))] == ["/d/" + n for n in want]
    state = raw.__getstate__()  # decodes them all, once
    assert raw.names == want and len(raw) == len(want)
    again = RecordColumns()
    again.__setstate__(state)
    assert again.names == want
    raw.extend([FileRecord("/e/x", 1, 2, 3, 4)])
    assert raw.names == [*want, "x"] and raw.path(len(want)) == "/e/x"


def test_decode_names_takes_a_slice_of_the_blob_and_refuses_bad_offsets() -> None:
    from array import array

    from sif._treec import decode_names  # type: ignore[import-not-found,unused-ignore]

    blob = "aé".encode() + b"\xff\xfe" + b"xyz"
    assert decode_names(blob, array("q", [1, 3, 5, 8])) == ["é", "\udcff\udcfe", "xyz"]
    assert decode_names(b"", array("q", [0])) == []
    for offsets in ([0, 3, 2], [0, 9], [-1, 2], []):
        with pytest.raises(ValueError):
            decode_names(blob, array("q", offsets))
    for offsets in (b"\0" * 16, array("i", [0, 1]), array("Q", [0, 1])):
        with pytest.raises(TypeError):
            decode_names(blob, offsets)  # not int64


def _ask(cols: RecordColumns, start: Any, got: list[list[str]]) -> None:
    start.wait()
    got.append(cols.names)


def test_raw_names_decoded_by_two_threads_at_once() -> None:
    """Two threads asking for RecordColumns.names together (``sif dupes -j 2`` makes a
    worker's table in the pool's feeder thread while this one refines its own share)
    both get every name once, in order: before, both extended one list at once."""
    import threading
    from array import array

    names = [f"n{i:06d}".encode() for i in range(200_000)]
    want = [n.decode() for n in names]
    with threads_switched_often():
        for _ in range(3):
            cols = RecordColumns()
            for part in (names[:100_000], names[100_000:]):
                offsets = array("q", [0])
                offsets.extend(itertools.accumulate(map(len, part)))
                cols.add_raw_names(b"".join(part), offsets)
            got: list[list[str]] = []
            start = threading.Barrier(2)
            threads = [threading.Thread(target=_ask, args=(cols, start, got)) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert got[0] == want and got[1] == want
            assert cols.names == want and len(cols) == len(want)
            assert [cols.name(i) for i in (0, 99_999, 100_000, -1)] == [
                want[0],
                want[99_999],
                want[100_000],
                want[-1],
            ]


def test_a_file_root_leaves_the_walks_names_raw(tmp_path: Path) -> None:
    """keyed_walk appends file roots to the C walk's columns without decoding every name
    (RecordColumns.extend keeps raw names raw, adding the roots' raw too)."""
    for i in range(5):
        write(tmp_path / "t" / f"f{i}", b"x")
    write(tmp_path / "r\xe9", b"root")
    cols, _, _ = keyed_walk([str(tmp_path / "t"), str(tmp_path / "r\xe9")], WalkOptions())
    assert cols._raw and not cols._names  # nothing decoded yet
    want = [*(f"f{i}" for i in range(5)), "r\xe9"]
    assert sorted(cols.name(i) for i in range(5)) == want[:5] and cols.name(5) == "r\xe9"
    assert cols.path(-1) == str(tmp_path / "r\xe9") and sorted(cols.names) == want
