"""A file the user asked for (``-o``): whole or not at all, a failure naming it (sif.outfile)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sif.outfile import OutputFileError, written, written_text
from treeutil import fill


def test_an_existing_file_is_written_in_place_as_by_the_shell(tmp_path: Path) -> None:
    # Its inode, mode and other hard links stay (a rename over it would lose them, and
    # its owner, and fail in a sticky directory).
    out = tmp_path / "report.txt"
    out.write_text("the old report, longer than the new one\n")
    out.chmod(0o640)
    other = tmp_path / "other-name.txt"
    os.link(out, other)
    before = out.stat()
    with written(out) as f:
        f.write(b"new\n")
    after = out.stat()
    assert (after.st_ino, stat.S_IMODE(after.st_mode)) == (before.st_ino, 0o640)
    assert other.read_bytes() == b"new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-name.txt", "report.txt"]


def test_a_name_as_long_as_the_file_system_allows_is_written(tmp_path: Path) -> None:
    out = tmp_path / ("r" * 255)  # no room for a temporary name's suffix
    with written_text(out) as f:
        f.write("whole\n")
    assert out.read_text() == "whole\n"


@pytest.mark.parametrize("existing", [False, True])
def test_a_failure_while_the_report_is_made_leaves_no_cut_report(
    tmp_path: Path, existing: bool
) -> None:
    # A file this run created is removed; one it was writing is left empty.
    out = tmp_path / "report.txt"
    if existing:
        out.write_text("the old report\n")
    with pytest.raises(KeyError), written_text(out) as f:
        f.write("half a report\n" * 10_000)  # some of it written already, some buffered
        raise KeyError("made while writing")
    if existing:
        assert out.read_text() == ""
    else:
        assert not out.exists()
    assert list(tmp_path.iterdir()) == ([out] if existing else [])


def test_what_is_buffered_is_dropped_on_a_failure_not_raised_over_it() -> None:
    # A flush to /dev/full on the way out would replace the error with "no space left".
    with pytest.raises(KeyboardInterrupt), written("/dev/full") as f:
        f.write(b"x" * 100)
        raise KeyboardInterrupt
    with pytest.raises(KeyError), written_text("/dev/full") as t:
        t.write("x" * 100)
        raise KeyError("the real error")


def test_an_oserror_of_the_code_making_the_report_is_not_called_a_write_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(FileNotFoundError), written(tmp_path / "r.txt") as f:
        f.write(b"x")
        open(tmp_path / "missing")  # noqa: SIM115 - reading an input fails
    assert list(tmp_path.iterdir()) == []


def test_a_link_is_written_through_and_its_target_keeps_its_permissions(
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
    assert list(tmp_path.iterdir()) == [fifo]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root; CI is root)")
def test_a_full_disk_names_the_file_and_leaves_no_cut_report(tmp_path: Path) -> None:
    from actionutil import tmpfs

    with tmpfs("1m") as where:
        out = where / "report.html"
        out.write_text("the old report\n")
        fill(where)
        with pytest.raises(OutputFileError) as caught, written_text(out) as f:
            f.write("a new report\n" * 100_000)
        assert str(caught.value) == f"{out}: no space left on device"
        assert out.read_text() == ""  # not a cut report
        new = where / "new.html"
        with pytest.raises(OutputFileError) as caught, written_text(new) as f:
            f.write("a new report\n" * 100_000)
        assert str(caught.value) == f"{new}: no space left on device"
        assert sorted(p.name for p in where.iterdir()) == ["filler", "report.html"]


def test_a_report_cut_by_its_last_flush_is_not_left(tmp_path: Path) -> None:
    # Under 8 KiB, the whole report is still buffered when the block ends: the write that
    # fails (here past a file size limit of 1 KiB, EFBIG) comes from the last flush.
    out = tmp_path / "report.html"
    out.write_text("the old report\n")
    script = (
        "import resource, signal, sys\n"
        "from sif.outfile import OutputFileError, written_text\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))\n"
        "try:\n"
        "    with written_text(sys.argv[1]) as f:\n"
        "        f.write('x' * 6000)\n"
        "except OutputFileError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, out], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == f"{out}: File too large\n", done.stderr
    assert out.read_text() == ""


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
    assert list(tmp_path.iterdir()) == [out]


def pair(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    words = " ".join(f"word{i}" for i in range(2_000))
    a.write_text(words)
    b.write_text(words + " and more")
    return a, b


def explain_into(shell: str, a: Path, b: Path, cwd: Path, **kw: object) -> Any:
    """``sif explain A B -o TARGET REDIRECTIONS`` (``shell`` says both) run by sh in ``cwd``."""
    return subprocess.run(
        ["sh", "-c", f'"$0" -m sif explain "$1" "$2" {shell}', sys.executable, a, b],
        cwd=cwd,
        capture_output="stdout" not in kw,
        text=True,
        timeout=120,
        **kw,  # type: ignore[arg-type]
    )


def test_dev_stdout_is_sif_s_standard_output_appended_to_a_log(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    log = tmp_path / "log"
    log.write_text("an earlier line\n")
    done = explain_into("-o /dev/stdout >> log", a, b, tmp_path)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith("an earlier line\nA ") and str(b) in text
    # /dev/fd/N is descriptor N, as in bash: appended to what it was opened on.
    log.write_text("an earlier line\n")
    done = explain_into("-o /dev/fd/3 3>> log", a, b, tmp_path)
    assert done.returncode == 0, done.stderr
    assert log.read_text() == text


def test_dev_stdout_on_an_unlinked_file_is_written_there(tmp_path: Path) -> None:
    # Reopening /proc/self/fd/1 (or renaming something to its target) would miss it.
    a, b = pair(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    with tempfile.TemporaryFile() as out:
        done = explain_into("-o /dev/stdout", a, b, work, stdout=out, stderr=subprocess.PIPE)
        assert done.returncode == 0, done.stderr
        out.seek(0)
        assert out.read().startswith(b"A ")
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    ("target", "closed", "why"),
    [
        ("/dev/stdout", ">&-", "standard output is closed"),
        ("/dev/stderr", "2>&-", "standard error is closed"),
        ("/dev/fd/9", "", "not an open descriptor"),
        ("/dev/stdin", "", "not open for writing"),
    ],
)
def test_a_descriptor_that_cannot_take_the_report_is_a_usage_error(
    tmp_path: Path, target: str, closed: str, why: str
) -> None:
    # Before any work; /dev/null, which holds a closed stream's number, takes nothing.
    a, b = pair(tmp_path)
    done = explain_into(f'-o {target} {closed} < "$1"', a, b, tmp_path)
    assert done.returncode == 2
    if target != "/dev/stderr":  # else the message went where it could not be read
        assert done.stderr.splitlines()[-1] == f"Error: {target}: {why}"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_dev_stderr_on_a_full_disk_is_exit_3_not_a_silent_loss(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    done = explain_into("-o /dev/stderr 2>/dev/full", a, b, tmp_path)
    assert done.returncode == 3


def test_a_reader_of_o_that_went_away_is_a_quiet_exit_0(tmp_path: Path) -> None:
    # -o >(head -c1): the reader leaves early, as `sif ... | head` on standard output.
    a, b = pair(tmp_path)
    r, w = os.pipe()
    os.close(r)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "sif",
                "explain",
                a,
                b,
                "--format",
                "html",
                "-o",
                f"/dev/fd/{w}",
            ],
            pass_fds=[w],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(w)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_non_blocking_descriptor_is_waited_on(tmp_path: Path) -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    got = bytearray()

    def read_late() -> None:
        time.sleep(0.5)
        while chunk := os.read(r, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=read_late, daemon=True)
    reader.start()
    try:
        with written(f"/dev/fd/{w}") as f:
            f.write(b"x" * 300_000)  # more than the pipe holds
    finally:
        os.close(w)
    reader.join(timeout=30)
    os.close(r)
    assert bytes(got) == b"x" * 300_000


def test_the_target_a_dangling_link_made_is_removed_on_a_failure(tmp_path: Path) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "target.txt")
    with pytest.raises(KeyError), written_text(link) as f:
        f.write("half\n")
        raise KeyError("failed")
    assert link.is_symlink() and not (tmp_path / "target.txt").exists()


@pytest.mark.parametrize("spelling", ["//dev/stdout", "/proc/thread-self/fd/1", "/dev/fd/1"])
def test_other_spellings_of_standard_output_append_too(tmp_path: Path, spelling: str) -> None:
    a, b = pair(tmp_path)
    log = tmp_path / "log"
    log.write_text("an earlier line\n")
    done = explain_into(f"-o {spelling} >> log", a, b, tmp_path)
    assert done.returncode == 0, done.stderr
    assert log.read_text().startswith("an earlier line\nA ")


def test_a_symlink_loop_and_an_input_given_to_o_are_usage_errors(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    done = explain_into("-o loop", a, b, tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("Error: loop: ")
    # sif query reads its FILES while it writes: -o one of them would empty it first.
    query = subprocess.run(
        [sys.executable, "-m", "sif", "query", "--index", str(tmp_path / "ix"), a, "-o", a],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.returncode == 2
    assert query.stderr.splitlines()[-1] == (
        f"Error: {a}: also an input (it would be emptied before it is read)"
    )
    assert a.stat().st_size > 0


def test_an_empty_output_path_is_a_usage_error(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    done = explain_into("-o ''", a, b, tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "Error: -o/--output: an empty path"
    assert done.stdout == ""


def test_out_of_descriptors_after_the_file_is_made_removes_it_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.txt"

    def no_more(fd: int) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(os, "dup", no_more)
    with pytest.raises(OutputFileError) as caught, written(out) as f:
        f.write(b"never")
    assert str(caught.value) == f"{out}: {os.strerror(errno.EMFILE)}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("target", "why"),
    [("/dev/fd/2147483648", "not an open descriptor"), ("out/", "is a directory")],
)
def test_an_impossible_descriptor_or_a_new_directory_is_a_usage_error(
    tmp_path: Path, target: str, why: str
) -> None:
    a, b = pair(tmp_path)
    done = explain_into(f"-o {target}", a, b, tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"Error: {target}: {why}"


@pytest.mark.parametrize("command", ["query", "similar"])
def test_o_inside_the_index_is_a_usage_error_and_the_index_stays(
    tmp_path: Path, command: str
) -> None:
    # Its files are mapped and read while the report is written: emptied, they ended
    # sif query with SIGBUS and lost the index.
    a, b = pair(tmp_path)
    index = tmp_path / "ix"
    sif = [sys.executable, "-m", "sif"]
    subprocess.run([*sif, "index", "-q", "--index", index, a, b], check=True, timeout=120)
    victim = next((index / "segments").glob("seg-*/fp.npy"))
    size = victim.stat().st_size
    args = [a] if command == "query" else [tmp_path]
    done = subprocess.run(
        [*sif, command, "--index", index, *args, "-o", victim],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"Error: {victim}: inside the index {index}"
    assert victim.stat().st_size == size
