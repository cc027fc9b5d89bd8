"""``sif dupes --archives``: archive members as their stored bytes."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from sif.exact import find_duplicates
from treeutil import write

TEXT = b"a member that is a compressed copy of a plain file\n" * 200


def groups_of(root: Path) -> set[frozenset[str]]:
    return {frozenset(g.paths) for g in find_duplicates([str(root)], jobs=1, archives=True)}


def test_compressed_member_is_its_stored_bytes(tmp_path: Path) -> None:
    stored = gzip.compress(TEXT, mtime=0)
    write(tmp_path / "x.txt", TEXT)  # the member's decompressed content: not a replica
    write(tmp_path / "copy/x.txt.gz", stored)  # the member's bytes: a replica
    with zipfile.ZipFile(tmp_path / "a.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.txt.gz", stored)
    with tarfile.open(tmp_path / "b.tar.gz", "w:gz") as tf:  # the tar's own gzip is opened
        info = tarfile.TarInfo("d/x.txt.gz")
        info.size = len(stored)
        tf.addfile(info, io.BytesIO(stored))
    assert groups_of(tmp_path) == {
        frozenset(
            {
                f"{tmp_path}/copy/x.txt.gz",
                f"{tmp_path}/a.zip!/x.txt.gz",
                f"{tmp_path}/b.tar.gz!/d/x.txt.gz",
            }
        )
    }


def test_nested_archive_member_and_its_members(tmp_path: Path) -> None:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("y.txt", TEXT)
    write(tmp_path / "y.txt", TEXT)
    write(tmp_path / "in.zip", inner.getvalue())
    with tarfile.open(tmp_path / "outer.tar", "w") as tf:
        info = tarfile.TarInfo("in.zip")
        info.size = len(inner.getvalue())
        tf.addfile(info, io.BytesIO(inner.getvalue()))
    assert groups_of(tmp_path) == {
        frozenset({f"{tmp_path}/in.zip", f"{tmp_path}/outer.tar!/in.zip"}),
        frozenset(
            {
                f"{tmp_path}/y.txt",
                f"{tmp_path}/in.zip!/y.txt",
                f"{tmp_path}/outer.tar!/in.zip!/y.txt",
            }
        ),
    }


def test_dupes_archives_cli(tmp_path: Path) -> None:
    stored = gzip.compress(TEXT, mtime=0)
    write(tmp_path / "x.txt", TEXT)
    write(tmp_path / "x.txt.gz", stored)
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        zf.writestr("x.txt.gz", stored)
    done = subprocess.run(
        [sys.executable, "-m", "sif", "dupes", "--archives", "--format", "fdupes", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    groups = [set(block.splitlines()) for block in done.stdout.strip().split("\n\n")]
    assert groups == [{f"{tmp_path}/x.txt.gz", f"{tmp_path}/a.zip!/x.txt.gz"}]


def test_broken_compressed_member_is_compared_by_its_bytes_without_a_warning(
    tmp_path: Path,
) -> None:
    from sif.events import ScanWarning

    cut = gzip.compress(TEXT, mtime=0)[:-30]  # a truncated gzip: still bytes to compare
    write(tmp_path / "cut.gz", cut)
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as zf:
        zf.writestr("cut.gz", cut)
        zf.writestr("plain.gz", gzip.compress(b"not an archive\n" * 100))
    warnings: list[ScanWarning] = []
    groups = find_duplicates([str(tmp_path)], jobs=1, archives=True, on_warning=warnings.append)
    assert {frozenset(g.paths) for g in groups} == {
        frozenset({f"{tmp_path}/cut.gz", f"{tmp_path}/a.zip!/cut.gz"})
    }
    assert warnings == []


def test_a_fifo_swapped_in_for_a_plain_file_is_a_warning_not_a_hang(tmp_path: Path) -> None:
    """The plain file a member would join is re-read for its digest: never through a FIFO."""
    import os
    import threading

    from sif.events import ScanWarning
    from sif.exact.members import archive_members, merge_members
    from sif.walk import WalkOptions, parallel_walk

    write(tmp_path / "plain.txt", b"member content " * 10)
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as z:
        z.writestr("m.txt", b"member content " * 10)
    cols, _ = parallel_walk([str(tmp_path)], WalkOptions())
    warnings: list[ScanWarning] = []
    members = archive_members(cols, warnings.append)
    os.unlink(tmp_path / "plain.txt")
    os.mkfifo(tmp_path / "plain.txt")  # open() for reading would wait for a writer forever
    done: list[object] = []
    worker = threading.Thread(
        target=lambda: done.append(merge_members([], members, cols, warnings.append)),
        daemon=True,
    )
    worker.start()
    worker.join(20)
    assert done, "merge_members hung on a FIFO"
    assert done[0] == []  # no group: the plain file is gone, one member alone
    assert ScanWarning(str(tmp_path / "plain.txt"), "not a regular file (FIFO)") in warnings
