"""A file the user asked for (``-o``): whole or not at all, a failure naming it (sif.outfile)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sif.outfile import OutputFileError, written, written_text


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def fill(where: Path) -> None:
    """Take every free block of the file system at ``where`` (a file ``filler``)."""
    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as full:
            while True:
                os.write(fd, b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_the_content_appears_whole_at_the_end_and_not_before(tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    out.write_text("the old report\n")
    with written(out) as f:
        f.write(b"new " * 10_000)
        f.flush()
        assert out.read_text() == "the old report\n"  # still the old one
    assert out.read_bytes() == b"new " * 10_000
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("existing", [False, True])
def test_a_failure_while_the_report_is_made_leaves_no_file_and_the_old_one_intact(
    tmp_path: Path, existing: bool
) -> None:
    out = tmp_path / "report.txt"
    if existing:
        out.write_text("the old report\n")
    with pytest.raises(KeyError), written_text(out) as f:
        f.write("half a report\n" * 1000)
        raise KeyError("made while writing")
    assert (out.read_text() if existing else out.exists()) == (
        "the old report\n" if existing else False
    )
    assert leftovers(tmp_path) == []


def test_an_oserror_of_the_code_making_the_report_is_not_called_a_write_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(FileNotFoundError), written(tmp_path / "r.txt") as f:
        f.write(b"x")
        open(tmp_path / "missing")  # noqa: SIM115 - reading an input fails
    assert list(tmp_path.iterdir()) == []


def test_the_file_replaced_keeps_its_permissions_and_a_link_is_written_through(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with written_text(link) as f:
        f.write("new\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    # -o /dev/stdout, -o a FIFO, -o /dev/null: the path is opened, never renamed over
    # (as root, a rename over /dev/null would replace the device with a regular file).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with written(fifo) as f:
        f.write(b"through the pipe\n")
    reader.join(timeout=30)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root; CI is root)")
def test_a_full_disk_names_the_file_and_leaves_the_old_one(tmp_path: Path) -> None:
    from actionutil import tmpfs

    with tmpfs("1m") as where:
        out = where / "report.html"
        out.write_text("the old report\n")
        fill(where)
        with pytest.raises(OutputFileError) as caught, written_text(out) as f:
            f.write("a new report\n" * 100_000)
        assert str(caught.value) == f"{out}: no space left on device"
        assert out.read_text() == "the old report\n"
        assert leftovers(where) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root; CI is root)")
@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_explain_output_on_a_full_disk_is_one_line_and_exit_3(tmp_path: Path, fmt: str) -> None:
    from actionutil import tmpfs

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    words = " ".join(f"word{i}" for i in range(20_000))
    a.write_text(words)
    b.write_text(words + " and more")
    with tmpfs("256k") as where:
        fill(where)
        out = where / f"e.{fmt}"
        done = subprocess.run(
            [sys.executable, "-m", "sif", "explain", str(a), str(b), "--format", fmt, "-o", out],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 3
        assert done.stderr.splitlines() == [f"sif: error: {out}: no space left on device"]
        assert sorted(p.name for p in where.iterdir()) == ["filler"]


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_a_read_only_file_is_refused_as_open_would(tmp_path: Path) -> None:
    # A user protected the old report: renaming over it (which the directory would allow)
    # is refused like open() for writing. Run as nobody: root may write anything.
    tmp_path.chmod(0o777)
    out = tmp_path / "report.txt"
    out.write_text("protected\n")
    out.chmod(0o444)
    os.chown(out, 65534, 65534)
    script = (
        "import sys\n"
        "from sif.outfile import OutputFileError, written\n"
        "try:\n"
        "    with written(sys.argv[1]) as f:\n"
        "        f.write(b'new')\n"
        "except OutputFileError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", script, str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.stdout == f"{out}: Permission denied\n", done.stderr
    assert out.read_text() == "protected\n"
    assert leftovers(tmp_path) == []
