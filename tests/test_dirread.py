"""The C directory reader (sif._dirc) against the Python one: the same outcome on any tree."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.actionutil import open_fds, tool

import sif.dirread as dirread
from sif.dirread import DirReader
from sif.events import ScanWarning
from sif.records import RecordColumns
from sif.walkoptions import WalkOptions


@pytest.fixture(autouse=True)
def _built() -> None:
    """The C reader must be there: .ci/run installs a compiler, and a skip would hide a
    build that failed (as tests/exact/conftest.py does for sif.exact._firstc)."""
    if dirread._dirc is None:
        pytest.fail("sif._dirc is not built (pip install -e . builds it)")


COLUMNS = ("dirs", "dir_of", "names", "dev", "ino", "size", "mtime_ns", "nlink", "ctime_ns")


def both(path: Path, trust_type: bool = True, **options: object) -> tuple[object, object]:
    """What each reader makes of one directory: (its _Dir, its columns), C then Python."""
    out = []
    for which in ("read_c", "read_py"):
        reader = DirReader(WalkOptions(**options))  # type: ignore[arg-type]
        reader.trust_type = trust_type
        cols = RecordColumns()
        cols.add_dir("/elsewhere")  # rows already there: the reader appends after them
        d = getattr(reader, which)(str(path), (1, 2), cols)
        out.append((d, {c: list(getattr(cols, c)) for c in (*COLUMNS, "symlink")}))
    return out[0], out[1]


def hostile_tree(root: Path) -> None:
    """Every kind of entry a directory can hold, and names of every kind."""
    root.mkdir(exist_ok=True)
    for name, size in (("a.txt", 10), ("empty", 0), (".hidden", 3), ("big", 5000), ("é.txt", 7)):
        (root / name).write_bytes(b"x" * size)
    os.link(root / "a.txt", root / "hardlink")
    (root / "sub").mkdir()
    (root / ".hidden_dir").mkdir()
    raw = os.fsencode(root)
    for bad in (b"\xff\xfe.txt", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"ok\xe2\x82"):
        fd = os.open(raw + b"/" + bad, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"bad name")
        os.close(fd)
    os.mkdir(raw + b"/dir\xff")
    os.mkfifo(root / "fifo")  # opened, it would block
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    sock.close()
    os.symlink("a.txt", root / "to_file")
    os.symlink("sub", root / "to_dir")
    os.symlink("nowhere", root / "broken")
    os.symlink("loop", root / "loop")


@pytest.mark.parametrize("trust_type", [True, False])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"hidden": False},
        {"empty": True},
        {"min_size": 8, "max_size": 4000},
    ],
)
def test_c_reader_equals_python_reader_on_a_hostile_directory(
    tmp_path: Path, options: dict[str, object], trust_type: bool
) -> None:
    hostile_tree(tmp_path / "d")
    c, py = both(tmp_path / "d", trust_type, **options)
    assert c == py
    d, cols = c
    assert d.warnings.count(d.warnings[0]) == 1 and all(not w.skipped for w in d.warnings)
    assert len(d.warnings) == 6  # the six names that are not UTF-8; nothing else is wrong
    assert "fifo" not in cols["names"] and "sock" not in cols["names"]  # type: ignore[index]


def test_skip_dirs_and_a_directory_that_is_gone(tmp_path: Path) -> None:
    hostile_tree(tmp_path / "d")
    st_sub = os.stat(tmp_path / "d" / "sub")
    c, py = both(tmp_path / "d", skip_dirs=frozenset({(st_sub.st_dev, st_sub.st_ino)}))
    assert c == py and "sub" not in c[0].subdirs  # type: ignore[attr-defined]
    for name, cause in (("gone", "vanished during the scan"), ("d/a.txt", "Not a directory")):
        c, py = both(tmp_path / name)
        assert c == py
        assert c[0].warnings == [ScanWarning(str(tmp_path / name), cause)]  # type: ignore[attr-defined]


names = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.dictionaries(
        names, st.sampled_from(["file", "empty", "dir", "link", "fifo"]), max_size=25
    ),
    hidden=st.booleans(),
    trust_type=st.booleans(),
)
def test_c_reader_equals_python_reader_on_random_names(
    entries: dict[bytes, str], hidden: bool, trust_type: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.fsencode(tmp)
        for name, kind in entries.items():
            path = raw + b"/" + name
            if kind in ("file", "empty"):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT)
                os.write(fd, name if kind == "file" else b"")
                os.close(fd)
            elif kind == "dir":
                os.mkdir(path)
            elif kind == "link":
                os.symlink(name, path)
            else:
                os.mkfifo(path)
        c, py = both(Path(tmp), trust_type, hidden=hidden)
        assert c == py
        shown = {n for n in entries if hidden or not n.startswith(b".")}
        d, cols = c
        got = set(map(os.fsencode, [*cols["names"], *d.subdirs]))  # type: ignore[index,attr-defined]
        assert got == {n for n in shown if entries[n] in ("file", "dir")}


def test_entries_that_cannot_be_stat_ed_are_warnings_as_in_python(tmp_path: Path) -> None:
    # A directory others may list but not search: as nobody, every fstatat fails (EACCES).
    base = Path(tempfile.mkdtemp(prefix="sif-dirread-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        hostile_tree(base / "d")
        os.chmod(base / "d", 0o744)
        script = (
            "import sys\n"
            "from pathlib import Path\n"
            "from tests.test_dirread import both\n"
            "c, py = both(Path(sys.argv[1]))\n"
            "assert c == py, (c, py)\n"
            "print(sorted({w.cause for w in c[0].warnings}))\n"
        )
        drop = [tool("setpriv"), "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'src'}"}
        p = subprocess.run(
            [*drop, sys.executable, "-c", script, str(base / "d")],
            capture_output=True,
            text=True,
            env=env,
            cwd=base,
        )
        assert p.returncode == 0, p.stderr
        assert (
            p.stdout.strip() == "['name is not valid UTF-8 (shown escaped)', 'permission denied']"
        )
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=True)


def test_ctrl_c_in_a_large_directory_leaves_no_descriptor(tmp_path: Path) -> None:
    # In memory where there is a tmpfs: 17k names on a disk take seconds to make.
    shm = Path("/dev/shm")
    big = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path / "big"
    big.mkdir(exist_ok=True)
    for i in range(17_000):  # two signal checks of the C loop (every 8192 entries)
        os.close(os.open(big / f"f{i}", os.O_WRONLY | os.O_CREAT))
    reader = DirReader(WalkOptions())

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = open_fds()
    old = signal.signal(signal.SIGALRM, interrupt)
    stopped = 0
    try:
        for _ in range(20):
            signal.setitimer(signal.ITIMER_REAL, 0.002)
            try:
                d = reader.read_c(str(big), (0, 0), RecordColumns())
                assert d.stop - d.start == 17_000
            except KeyboardInterrupt:
                stopped += 1
                break
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        subprocess.run(["rm", "-rf", str(big)], check=True)
    assert stopped > 0
    assert open_fds() == before
