"""The walker on real trees: filters, links, special files, bad names, errors."""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

import pytest

from sif.errors import ConfigError
from sif.events import ScanWarning
from sif.walk import Walker, WalkOptions, parse_size, read_path_list
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
