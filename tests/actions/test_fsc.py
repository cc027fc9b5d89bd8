"""The compiled system calls of a run (``sif.actions._fsc``) against the Python ones.

Both take the same files in every state a step can meet them in (unchanged,
vanished, a symbolic link now, replaced, not a regular file, figures or
bytes changed, shorter than the report said) and must give the same
outcome: the same two ``fstat`` figures, or the same :class:`Changed` with
the same message; and neither may leave a descriptor open when it refuses.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionutil import sif, tool
from sif.actions import verify
from sif.actions.plan import FileRef
from sif.actions.verify import Changed, Comparer, Expected, recheck_pair
from treeutil import write

FIELDS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size")
TIMES = ("st_mtime_ns", "st_ctime_ns", "st_mtime")  # not atime: the compare reads the files


def test_the_compiled_recheck_is_built() -> None:
    """The extension is optional for installs without a compiler; here (and in CI) it is built,
    so the tests below compare both."""
    assert verify._fsc is not None


def ref(path: Path) -> FileRef:
    st = os.lstat(path)
    return FileRef(str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def outcome(
    keep: FileRef, kwant: Expected, drop: FileRef, dwant: Expected, compiled: bool, block: int
) -> tuple[str, object]:
    """What ``recheck_pair`` gives, descriptors closed: ("ok", figures) or ("changed", text)."""
    before = open_fds()
    c = Comparer(block, compiled=compiled)
    try:
        kfd, kst, dfd, dst = recheck_pair(keep, kwant, drop, dwant, c)
    except Changed as exc:
        assert open_fds() == before
        return "changed", str(exc)
    try:
        for fd, st in ((kfd, kst), (dfd, dst)):
            now = os.fstat(fd)
            assert all(getattr(st, f) == getattr(now, f) for f in FIELDS + TIMES)
        figures = [tuple(getattr(st, f) for f in FIELDS + TIMES) for st in (kst, dst)]
        return "ok", (figures, c.bytes_read)
    finally:
        os.close(kfd)
        os.close(dfd)


def both(
    keep: FileRef, drop: FileRef, block: int = 1 << 20, **want: Expected
) -> tuple[str, object]:
    kwant = want.get("kwant", Expected.of(keep))
    dwant = want.get("dwant", Expected.of(drop))
    compiled = outcome(keep, kwant, drop, dwant, True, block)
    python = outcome(keep, kwant, drop, dwant, False, block)
    assert compiled == python
    return compiled


def fifo(p: Path) -> None:
    p.unlink()
    os.mkfifo(p)


def directory(p: Path) -> None:
    p.unlink()
    p.mkdir()


def device(p: Path) -> None:  # /dev/null's numbers: opening it does nothing
    p.unlink()
    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 3))


def unix_socket(p: Path) -> None:  # open() of a socket fails with ENXIO
    p.unlink()
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(p))


def symlink(p: Path) -> None:
    p.unlink()
    p.symlink_to(p.with_name("k"))


def replace(p: Path) -> None:
    write(p.with_name("new"), b"hello world\n")  # made while p exists: another inode
    os.replace(p.with_name("new"), p)


def restore_mtime(p: Path, data: bytes) -> None:
    st = os.stat(p)
    p.write_bytes(data)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


CASES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "unchanged": (lambda k, d: None, "ok"),
    "keep vanished": (lambda k, d: k.unlink(), "k: vanished since the report"),
    "drop vanished": (lambda k, d: d.unlink(), "d: vanished since the report"),
    "drop a symlink now": (lambda k, d: symlink(d), "d: is a symbolic link now"),
    "drop a FIFO now": (lambda k, d: fifo(d), "d: not a regular file (FIFO)"),
    "drop a directory now": (lambda k, d: directory(d), "d: not a regular file (directory)"),
    "keep a device now": (lambda k, d: device(k), "k: not a regular file (character device)"),
    "drop a socket now": (lambda k, d: unix_socket(d), "d: No such device or address"),
    "drop replaced": (lambda k, d: replace(d), "d: replaced by another file since the report"),
    "drop grew": (lambda k, d: d.write_bytes(b"hello world!!\n"), "d: size changed"),
    "keep touched": (lambda k, d: os.utime(k, ns=(1, 2)), "k: modified since the report"),
    "drop chmod": (lambda k, d: d.chmod(0o600), "d: changed since the report (ctime"),
    "bytes differ": (  # size and mtime restored; the ctime is not looked at (see below)
        lambda k, d: restore_mtime(d, b"hello_world\n"),
        "d: its bytes differ from the kept copy",
    ),
}
ANY_CTIME = {"bytes differ"}
"""Cases checked against figures without a ctime (as after a step whose outcome sif
inferred), so that the bytes are what tells the change."""


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("block", [1 << 20, 4])
def test_compiled_and_python_rechecks_agree(tmp_path: Path, case: str, block: int) -> None:
    k, d = tmp_path / "k", tmp_path / "d"
    write(k, b"hello world\n")
    write(d, b"hello world\n")
    keep, drop = ref(k), ref(d)
    change, expect = CASES[case]
    change(k, d)
    want = {"dwant": Expected(drop.size, drop.mtime_ns, None)} if case in ANY_CTIME else {}
    kind, what = both(keep, drop, block, **want)
    if expect == "ok":
        assert kind == "ok"
    else:
        assert kind == "changed"
        assert f"{tmp_path}/{expect}" in str(what)


def test_a_file_shorter_than_the_size_differs_and_ctime_none_accepts_any(tmp_path: Path) -> None:
    k, d = tmp_path / "k", tmp_path / "d"
    write(k, b"abcdef")
    write(d, b"abcdef")
    keep, drop = ref(k), ref(d)
    d.chmod(0o600)  # a new ctime, which an expectation without one accepts
    kind, _ = both(keep, drop, dwant=Expected(drop.size, drop.mtime_ns, None))
    assert kind == "ok"
    # More bytes to compare than both files hold (their figures as they are now).
    claim = FileRef(keep.path, keep.dev, keep.ino, 10, keep.mtime_ns, keep.ctime_ns)
    kind, what = both(claim, drop, kwant=Expected.of(keep), dwant=Expected.now(os.stat(d)))
    assert (kind, what) == ("changed", f"{d}: its bytes differ from the kept copy {k}")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(min_size=0, max_size=300),
    flip=st.one_of(st.none(), st.integers(0, 299)),
    block=st.sampled_from([1, 7, 64, 1 << 20]),
)
def test_both_rechecks_tell_equal_bytes_from_one_flipped_byte(
    tmp_path: Path, data: bytes, flip: int | None, block: int
) -> None:
    k, d = tmp_path / "k", tmp_path / "d"
    other = bytearray(data)
    if flip is not None and data:
        other[flip % len(data)] ^= 0xFF
    write(k, data)
    write(d, bytes(other))
    kind, what = both(ref(k), ref(d), block)
    assert (kind == "ok") == (bytes(other) == data)
    if kind == "ok":
        assert what[1] == 2 * len(data)  # type: ignore[index]


def test_close_all_closes_every_descriptor_and_ignores_a_closed_one(tmp_path: Path) -> None:
    from sif.actions import lanes

    write(tmp_path / "f", b"x")
    for fallback in (False, True):
        fds = [os.open(tmp_path / "f", os.O_RDONLY) for _ in range(5)]
        os.close(fds[2])  # already closed: ignored, as os.close's error would be
        before = open_fds()
        if fallback:
            saved, lanes._fsc = lanes._fsc, None
            try:
                lanes.close_all(fds)
            finally:
                lanes._fsc = saved
        else:
            assert lanes._fsc is not None
            lanes.close_all(fds)
        assert open_fds() == before - 4
        for fd in fds:
            with pytest.raises(OSError):
                os.fstat(fd)


def test_figures_no_file_has_are_refused_by_both_rechecks(tmp_path: Path) -> None:
    """A report can hold any integer: an inode of 2**64 + n (the compiled re-check's unsigned
    64-bit integers would wrap it to n, the inode it names), a ctime of -1 (the compiled
    re-check's "any ctime"), a size or an mtime beyond 64 bits or below 0. Both re-checks
    refuse them, with the same cause."""
    k, d = tmp_path / "k", tmp_path / "d"
    write(k, b"hello world\n")
    write(d, b"hello world\n")
    keep, drop = ref(k), ref(d)
    wrapped = FileRef(drop.path, drop.dev, drop.ino + 2**64, *astuple(drop)[3:])
    assert both(keep, wrapped) == ("changed", f"{d}: replaced by another file since the report")
    ctime = Expected(drop.size, drop.mtime_ns, -1)
    kind, what = both(keep, drop, dwant=ctime)
    assert (kind, str(what)) == ("changed", f"{d}: {CTIME}")
    for size in (-1, 2**63, 2**64 + drop.size):
        claim = FileRef(keep.path, keep.dev, keep.ino, size, keep.mtime_ns, keep.ctime_ns)
        kind, what = both(claim, drop, kwant=Expected.of(claim))
        assert (kind, what) == (
            "changed",
            f"{k}: size changed since the report ({size} -> 12 bytes)",
        )
    for mtime in (2**63, -(2**63) - 1):
        kind, what = both(keep, drop, kwant=Expected(keep.size, mtime, keep.ctime_ns))
        assert (kind, what) == ("changed", f"{k}: modified since the report (mtime differs)")
    kind, what = both(keep, drop, dwant=Expected(drop.size, drop.mtime_ns, 2**64))
    assert (kind, what) == ("changed", f"{d}: {CTIME}")


CTIME = "changed since the report (ctime differs: content, owner or mode)"


@pytest.mark.parametrize("bad", ["\0", "\ud800"])
def test_a_name_no_file_can_have_is_a_change_in_both_rechecks(tmp_path: Path, bad: str) -> None:
    """A name with a NUL byte (or a lone surrogate, which no encoding gives bytes) is a
    Changed naming it, as a vanished file is, not a ValueError that ends the run."""
    k, d = tmp_path / "k", tmp_path / "d"
    write(k, b"x")
    write(d, b"x")
    keep, drop = ref(k), ref(d)
    odd = FileRef(f"{drop.path}{bad}y", *astuple(drop)[1:])
    kind, what = both(keep, odd)
    assert kind == "changed"
    assert str(what).startswith(f"{odd.path}: not a possible file name (")
    kind, what = both(FileRef(f"{keep.path}{bad}", *astuple(keep)[1:]), drop)
    assert str(what).startswith(f"{keep.path}{bad}: not a possible file name (")


def test_a_report_naming_a_file_with_a_nul_byte_skips_it_with_one_line(tmp_path: Path) -> None:
    """From a crafted report: the file is named on one line and skipped (exit 1), the other
    steps run; no traceback, no fatal error."""
    tree = tmp_path / "t"
    for name in ("a", "b", "c", "d"):
        write(tree / name, b"one" if name in "ab" else b"two")
    out = sif("dupes", "--format", "json", str(tree), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    head, *groups = out.stdout.splitlines()
    docs = [json.loads(g) for g in groups]
    bad = next(g for g in docs if g["files"][1]["names"][0].endswith("/b"))
    bad["files"][1]["names"] = [bad["files"][1]["names"][0] + "\0x"]
    (tmp_path / "r.json").write_text("\n".join([head, *map(json.dumps, docs)]) + "\n")
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    run = sif("link", str(tmp_path / "r.json"), cwd=tmp_path, env=env)
    assert run.returncode == 1, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert f"{tree}/b" in warnings[0] and "not a possible file name" in warnings[0]
    assert "Traceback" not in run.stderr
    assert os.stat(tree / "c").st_ino == os.stat(tree / "d").st_ino  # the other group: linked
    assert os.stat(tree / "b").st_nlink == 1


def test_close_all_refuses_a_descriptor_beyond_an_int(tmp_path: Path) -> None:
    """2**32 + fd is no descriptor: refused (as os.close does), not cut down to fd and closed."""
    from sif.actions import lanes

    write(tmp_path / "f", b"x")
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        for fallback in (False, True):
            saved = lanes._fsc
            if fallback:
                lanes._fsc = None
            try:
                with pytest.raises(OverflowError):
                    lanes.close_all([2**32 + fd])
            finally:
                lanes._fsc = saved
            os.fstat(fd)  # still open
    finally:
        os.close(fd)


def test_mtimes_before_1970_agree(tmp_path: Path) -> None:
    """Negative nanoseconds: the compiled figures (tv_sec * 10**9 + tv_nsec) and the float
    times made of them are os.fstat's."""
    k, d = tmp_path / "k", tmp_path / "d"
    write(k, b"old")
    write(d, b"old")
    os.utime(k, ns=(-1, -1_500_000_001))
    os.utime(d, ns=(-(10**18), -999_999_999))
    kind, _ = both(ref(k), ref(d))
    assert kind == "ok"


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("compiled", [True, False])
def test_a_signal_stops_a_large_compare_and_both_files_are_closed(
    tmp_path: Path, compiled: bool
) -> None:
    """Ctrl-C (here SIGALRM whose handler raises) during the compare of a large file stops
    it within a few blocks, both descriptors closed, as the Python re-check's loop does; the
    compiled one compared all 4 GiB first (seconds; 16 GiB: 23 s) and then leaked both
    descriptors it returned."""
    refs = []
    for name in ("k", "d"):
        with open(tmp_path / name, "wb") as f:
            f.truncate(4 << 30)  # sparse: no disk space, read as zeros
        refs.append(ref(tmp_path / name))
    keep, drop = refs

    def handler(signum: int, frame: object) -> None:
        raise Interrupted

    before = open_fds()
    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        start = time.monotonic()
        with pytest.raises(Interrupted):
            recheck_pair(
                keep, Expected.of(keep), drop, Expected.of(drop), Comparer(compiled=compiled)
            )
        elapsed = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert open_fds() == before
    assert elapsed < 2, elapsed


PERMISSION = """
import json, sys
from sif.actions.plan import FileRef
from sif.actions.verify import Changed, Comparer, Expected, recheck_pair
k, d = (FileRef(*f) for f in json.loads(sys.argv[1]))
out = []
for keep, drop in ((k, d), (d, k)):
    for compiled in (True, False):
        try:
            c = Comparer(compiled=compiled)
            recheck_pair(keep, Expected.of(keep), drop, Expected.of(drop), c)
            out.append("ok")
        except Changed as exc:
            out.append(str(exc))
print(json.dumps(out))
"""


def test_permission_denied_is_the_same_change_in_both_rechecks() -> None:
    """Run as ``nobody``: a file it may not read is the same Changed in both, kept or dropped."""
    base = Path(tempfile.mkdtemp(prefix="sif-fsc-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        k, d = base / "k", base / "d"
        write(k, b"same\n")
        write(d, b"same\n")
        os.chmod(d, 0o600)  # root's, unreadable for nobody
        files = json.dumps([astuple(ref(k)), astuple(ref(d))])
        drop = [tool("setpriv"), "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        p = subprocess.run(
            [*drop, sys.executable, "-c", PERMISSION, files], capture_output=True, text=True
        )
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == [f"{d}: Permission denied"] * 4
    finally:
        shutil.rmtree(base)


def test_a_difference_in_the_last_partial_block_of_a_large_file(tmp_path: Path) -> None:
    """The real 1 MiB block: a file of two blocks and a bit, differing in its last byte only
    (size and mtime restored), is told apart by both; equal copies are not."""
    data = bytes(range(256)) * (4096 * 2) + b"tail!"
    k, d = tmp_path / "k", tmp_path / "d"
    write(k, data)
    write(d, data)
    keep, drop = ref(k), ref(d)
    kind, what = both(keep, drop)
    assert (kind, what[1]) == ("ok", 2 * len(data))  # type: ignore[index]
    restore_mtime(d, data[:-1] + b"?")
    kind, what = both(keep, drop, dwant=Expected(drop.size, drop.mtime_ns, None))
    assert (kind, what) == ("changed", f"{d}: its bytes differ from the kept copy {k}")
