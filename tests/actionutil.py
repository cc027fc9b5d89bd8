"""Helpers for the action tests: reports of real trees, snapshots, sif in a subprocess."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sif.actions.report import Report, dupes_header, read_report
from sif.exact import find_duplicates
from sif.report import write_dupes


def report_of(*roots: Path, path: Path | None = None, **options: object) -> Report:
    """What ``sif dupes --format json ROOTS`` would write, read back (and saved to ``path``)."""
    groups = find_duplicates([str(r) for r in roots], jobs=1, **options)  # type: ignore[arg-type]
    buf = io.BytesIO()
    write_dupes(groups, buf, "json", header=dupes_header([str(r) for r in roots], ["dupes"]))
    if path is not None:
        path.write_bytes(buf.getvalue())
    buf.seek(0)
    return read_report(buf)


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Every name under ``root``: (kind, bytes or link text, inode)."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p), st.st_ino)
            else:
                out[p] = ("file", Path(p).read_bytes(), st.st_ino)
    return out


def contents(root: Path) -> dict[str, bytes]:
    """Every name under ``root`` and the bytes it reads (a symlink is followed)."""
    return {p: Path(p).read_bytes() for p in snapshot(root)}


def sif(
    *args: str, env: dict[str, str] | None = None, nobody: bool = False, **kw: object
) -> subprocess.CompletedProcess[str]:
    """``python -m sif ARGS`` in a subprocess (as user ``nobody`` with ``nobody``)."""
    drop = (
        [tool("setpriv"), "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if nobody else []
    )
    return subprocess.run(
        [*drop, sys.executable, "-m", "sif", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        **kw,  # type: ignore[call-overload]
    )


def open_fds() -> set[str]:
    """This process's open descriptors."""
    return set(os.listdir("/proc/self/fd"))


def assert_stopped_cleanly(root: Path, before: dict[str, bytes], fds_before: set[str]) -> None:
    """After a Ctrl-C: no descriptor left open, no temporary name, every file's bytes."""
    assert open_fds() <= fds_before
    assert [p for p in map(str, root.rglob("*")) if ".sif-" in p] == []
    assert contents(root) == before


def assert_resume_finishes(journal: Path, root: Path, before: dict[str, bytes]) -> None:
    """``sif resume JOURNAL`` succeeds and every file still reads as ``before``."""
    r = sif("resume", str(journal))
    assert r.returncode == 0, r.stderr
    assert contents(root) == before


def tool(name: str) -> str:
    """A system tool, found on PATH or in the sbin directories (CI's PATH may lack them)."""
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    assert found is not None, f"{name} is not installed (.ci/run installs it)"
    return found


@contextlib.contextmanager
def tmpfs(size: str = "64m") -> Iterator[Path]:
    """A fresh tmpfs mount (we are root), unmounted afterwards."""
    where = Path(tempfile.mkdtemp(prefix="sif-tmpfs-", dir="/tmp"))
    subprocess.run(
        [tool("mount"), "-t", "tmpfs", "-o", f"size={size}", "none", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run([tool("umount"), "-l", str(where)], check=True)
        where.rmdir()


@contextlib.contextmanager
def loopfs(kind: str = "btrfs") -> Iterator[Path]:
    """A loop-mounted Btrfs or XFS image (btrfs-progs, xfsprogs), unmounted afterwards."""
    where = Path(tempfile.mkdtemp(prefix=f"sif-{kind}-", dir="/tmp"))
    image = where.with_suffix(".img")
    with open(image, "wb") as f:
        f.truncate((128 if kind == "btrfs" else 320) * 1024 * 1024)  # XFS needs 300 MB
    mkfs = (
        [tool("mkfs.btrfs"), "-q"]
        if kind == "btrfs"
        else [tool("mkfs.xfs"), "-q", "-m", "reflink=1"]
    )
    subprocess.run([*mkfs, str(image)], check=True, capture_output=True)
    subprocess.run([tool("mount"), "-o", "loop", str(image), str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run([tool("umount"), str(where)], check=True)
        where.rmdir()
        image.unlink()
