"""Standard streams that fail or are missing: one line naming the stream, the documented exit
status, never a traceback or Python's exit 120 (sif.cli.streams).

Every test runs ``python -m sif`` in a process of its own: the streams are
replaced only there, not under click's CliRunner.
"""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

FULL = "/dev/full"  # every write: ENOSPC (Linux)

needs_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full")


def replica_tree(root: Path) -> Path:
    root.mkdir()
    for name in ("a", "b"):
        (root / name).mkdir()
        for i in range(40):
            (root / name / f"f{i}.txt").write_bytes(f"file {i}\n".encode() * (50 + i))
    return root


def sif_shell(redirect: str, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """``python -m sif ARGS`` with a shell's redirections (``>&-``, ``2>/dev/full``) applied."""
    return subprocess.run(
        ["sh", "-c", f'"$0" -m sif "$@" {redirect}', sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=120,
        **kw,  # type: ignore[arg-type]
    )


def assert_one_line(done: subprocess.CompletedProcess[str], line: str, status: int) -> None:
    assert done.returncode == status, done.stderr
    assert done.stderr.splitlines() == [line]


@needs_full
@pytest.mark.parametrize(
    "args",
    [
        ["dupes", "TREE"],
        ["fuzzysum", "TREE/a/f1.txt"],
        ["--help"],  # written by click before any command's handlers
        ["dupes", "--help"],
        ["--version"],
    ],
)
def test_a_full_disk_under_standard_output_is_named(tmp_path: Path, args: list[str]) -> None:
    tree = replica_tree(tmp_path / "t")
    args = [a.replace("TREE", str(tree)) for a in args]
    done = sif_shell(f">{FULL}", *args)
    assert_one_line(done, "sif: error: standard output: no space left on device", 3)


@needs_full
def test_a_full_disk_under_standard_output_of_a_report_larger_than_its_buffer(
    tmp_path: Path,
) -> None:
    # Over 64 KiB of groups: the first failed write comes from inside the report.
    tree = tmp_path / "t"
    tree.mkdir()
    for i in range(1500):
        for side in ("a", "b"):
            (tree / f"{side}{i:04d}-{'x' * 40}").write_bytes(f"content {i}\n".encode())
    done = sif_shell(f">{FULL}", "dupes", str(tree))
    assert_one_line(done, "sif: error: standard output: no space left on device", 3)


@needs_full
def test_a_full_disk_under_standard_error_changes_neither_the_report_nor_the_status(
    tmp_path: Path,
) -> None:
    tree = replica_tree(tmp_path / "t")
    done = sif_shell(f"2>{FULL}", "dupes", str(tree))
    assert done.returncode == 0
    assert done.stdout.count("\n\n") == 39  # 40 groups, a blank line between two
    # The usage error it cannot print still exits 2.
    assert sif_shell(f"2>{FULL}", "dupes", str(tmp_path / "missing")).returncode == 2


def test_a_closed_standard_output_is_one_line_for_a_report(tmp_path: Path) -> None:
    tree = replica_tree(tmp_path / "t")
    assert_one_line(
        sif_shell(">&-", "dupes", str(tree)), "sif: error: standard output is closed", 3
    )


def test_index_runs_with_standard_output_and_error_closed(tmp_path: Path) -> None:
    # It writes nothing on standard output; its summary and progress go nowhere. The
    # database does not take descriptor 1 or 2 (each is /dev/null): what a stray write
    # to them would put there cannot damage it.
    tree = replica_tree(tmp_path / "t")
    index = tmp_path / "ix"
    done = sif_shell(">&- 2>&-", "index", "--index", str(index), str(tree))
    assert done.returncode == 0
    query = subprocess.run(
        [sys.executable, "-m", "sif", "query", "--index", str(index), str(tree / "a/f3.txt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.returncode == 0, query.stderr
    assert str(tree / "a/f3.txt") in query.stdout


def test_descriptors_0_to_2_are_reserved_when_the_process_starts_without_them() -> None:
    script = (
        "import os, sys\n"
        "from sif.cli import streams\n"
        "streams.install()\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "null = all(os.path.realpath(f'/proc/self/fd/{n}') == os.devnull for n in (0, 1, 2))\n"
        "sys.exit(0 if fd == 3 and null else 1)\n"
    )
    done = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" "$2" <&- >&- 2>&-', sys.executable, script, __file__],
        timeout=60,
    )
    assert done.returncode == 0


@pytest.mark.parametrize("args", [["fuzzysum", "-"], ["similar", "--from-file", "-"]])
def test_a_closed_standard_input_is_one_line(args: list[str]) -> None:
    assert_one_line(sif_shell("<&-", *args), "sif: error: standard input is closed", 3)


def test_a_non_blocking_standard_output_is_waited_on_not_failed(tmp_path: Path) -> None:
    # A parent that made its pipe non-blocking and reads late: every write meets EAGAIN
    # once the pipe is full, and the report must still arrive whole.
    tree = tmp_path / "t"
    tree.mkdir()
    for i in range(3000):
        for side in ("a", "b"):
            (tree / f"{side}{i:04d}").write_bytes(f"content {i}\n".encode())
    expected = subprocess.run(
        [sys.executable, "-m", "sif", "dupes", str(tree)],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout
    assert len(expected) > 4 * 65536  # more than a pipe holds
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sif", "dupes", str(tree)], stdout=w, stderr=subprocess.PIPE
    )
    os.close(w)
    time.sleep(1.0)
    got = bytearray()
    with os.fdopen(r, "rb") as reader:
        while chunk := reader.read(1 << 16):
            got += chunk
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else b""
    assert bytes(got) == expected


def many_groups(root: Path, n: int = 3000) -> Path:
    root.mkdir()
    for i in range(n):
        for side in ("a", "b"):
            (root / f"{side}{i:04d}-{'x' * 60}").write_bytes(f"content {i}\n".encode())
    return root


def interrupt_when_stalled(proc: subprocess.Popen[bytes], what: str) -> None:
    """Ctrl-C ``proc`` once it waits in a write to a full pipe (``what``); it must end at
    once, 130, saying nothing."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/wchan") as f:
            if "pipe" in f.read():
                break
        time.sleep(0.05)
    else:
        pytest.fail(f"sif never blocked on {what}")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 130
    assert proc.stderr is not None and proc.stderr.read() == b""


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_ctrl_c_while_standard_output_is_stalled_exits_130_at_once(
    tmp_path: Path, unbuffered: str
) -> None:
    # The reader never reads: the report fills the pipe and sif blocks writing. A Ctrl-C
    # then drops what is buffered (flushing it would wait for the reader for good).
    tree = many_groups(tmp_path / "t")
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    r, w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sif", "dupes", str(tree)],
        stdout=w,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(w)
    try:
        interrupt_when_stalled(proc, "its standard output")
    finally:
        proc.kill()
        proc.wait()
        os.close(r)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["dupes", "TREE"]])
def test_a_reader_gone_before_the_first_write_is_a_quiet_exit_0(
    tmp_path: Path, args: list[str]
) -> None:
    # click's own handler answers a closed pipe with exit 1 (`sif --help | true`).
    tree = replica_tree(tmp_path / "t")
    r, w = os.pipe()
    os.close(r)
    done = subprocess.run(
        [sys.executable, "-m", "sif", *(a.replace("TREE", str(tree)) for a in args)],
        stdout=w,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    os.close(w)
    assert (done.returncode, done.stderr) == (0, b"")


def test_ctrl_c_while_a_fifo_given_to_o_is_stalled_exits_130_and_removes_nothing(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    words = " ".join(f"word{i}" for i in range(40_000))
    a.write_text(words)
    b.write_text(words + " and more")  # an HTML page of ~780 KB: more than a pipe holds
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    explain = [sys.executable, "-m", "sif", "explain", str(a), str(b)]
    proc = subprocess.Popen(
        [*explain, "--format", "html", "-o", str(fifo)],
        stderr=subprocess.PIPE,
    )
    reader = os.open(fifo, os.O_RDONLY)  # opened, never read
    try:
        interrupt_when_stalled(proc, "the FIFO")
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
    finally:
        proc.kill()
        proc.wait()
        os.close(reader)


FAIL_THIRD = """
import sys
import sif.cli.fuzzysum as fz
from sif.errors import SifError

real, seen = fz._digests_of, []

def third_fails(path, variants, warn):
    seen.append(path)
    if len(seen) == 3:
        raise {error}("the third file: it went wrong")
    return real(path, variants, warn)

fz._digests_of = third_fails
from sif.cli import run
sys.argv = ["sif", "fuzzysum", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(
    ("error", "line"),
    [
        ("SifError", "sif: error: the third file: it went wrong"),
        ("RuntimeError", "sif: error: RuntimeError: the third file: it went wrong"),
    ],
)
def test_the_part_of_a_report_made_before_a_fatal_error_comes_before_its_line(
    tmp_path: Path, error: str, line: str
) -> None:
    """Standard output and error into one pipe: the digests of the first two files (held in
    standard output's buffer), then the error's line, then nothing; exit 3. The
    interpreter's last flush let the two lines out after the error's."""
    files = [tmp_path / f"f{i}.txt" for i in range(4)]
    for i, f in enumerate(files):
        f.write_bytes(f"file {i} of some words\n".encode() * 40)
    script = FAIL_THIRD.format(error=error)
    done = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" "$2" "$3" "$4" "$5" 2>&1', sys.executable, script, *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stdout
    lines = done.stdout.splitlines()
    assert len(lines) >= 3 and lines[2] == line, lines
    assert [x.split("  ")[1] for x in lines[:2]] == [str(files[0]), str(files[1])]
    assert lines[3:] in ([], ["sif: (SIF_DEBUG=1 shows the traceback)"])


WAIT_FOR_ERROR = """
import os, sys, time
err, deadline = sys.argv[1], time.monotonic() + 30
while os.path.getsize(err) == 0 and time.monotonic() < deadline:
    time.sleep(0.05)
seen = os.path.getsize(err) > 0
print(seen, len(sys.stdin.buffer.read()))
"""


def test_a_stalled_reader_does_not_hold_up_a_fatal_errors_line(tmp_path: Path) -> None:
    """Standard output is a pipe whose reader takes nothing until the error's line is on
    standard error: the pipe is full and the report's last part still buffered when
    fuzzysum fails (standard input closed, after about 96 KB of digests), so letting it
    out first would wait on the reader for ever. The line comes anyway (within the second
    the report is given), then the whole report reaches the reader; exit 3."""
    names = [f"f{i:04d}.txt" for i in range(2200)]  # 44 bytes a line: ~96 KB
    for n in names:
        (tmp_path / n).write_bytes(n.encode() * 3)
    err = tmp_path / "err"
    pipeline = '"$0" -m sif fuzzysum "$@" - <&- 2>"$ERR" | "$0" -c "$WAIT" "$ERR"'
    done = subprocess.run(
        ["sh", "-c", pipeline, sys.executable, *names],
        cwd=tmp_path,
        env={**os.environ, "ERR": str(err), "WAIT": WAIT_FOR_ERROR},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["True", str(44 * len(names))], done.stderr
    assert err.read_text() == "sif: error: standard input is closed\n"


@pytest.mark.parametrize("fmt", ["text", "json", "html"])
def test_standard_output_is_utf8_whatever_pythons_encoding_of_it(tmp_path: Path, fmt: str) -> None:
    """Under PYTHONIOENCODING=ascii explain's text (its `│`), its json and its page go out as
    UTF-8, as the reports write them; a name that is not UTF-8 as its bytes. Before, the
    text failed on `│` with an encoding error (exit 3)."""
    text = b"caf\xc3\xa9 \xe2\x94\x82 a line long enough to hold a few windows of fifty bytes\n" * 3
    a = tmp_path / "a\xe9.txt".encode("latin-1").decode("utf-8", "surrogateescape")
    a.write_bytes(text)
    (tmp_path / "b.txt").write_bytes(text)
    done = subprocess.run(
        [sys.executable, "-m", "sif", "explain", "--format", fmt, str(a), str(tmp_path / "b.txt")],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode("utf-8")  # UTF-8 throughout
    assert "b.txt" in out
    if fmt == "text":
        assert "│" in out and "café" in out


@pytest.mark.parametrize("command", ["fuzzysum", "query"])
def test_an_unreadable_file_is_a_warning_and_the_others_go_on(command: str) -> None:
    """An unreadable FILE was click's usage error (3 lines, exit 2) and no other file was
    done: it is the command's warning (exit 1), as its help says."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="sif-unreadable-", dir="/tmp"))
    try:
        os.chmod(base, 0o777)
        text = "a line of words that fuzzysum keeps, long enough for a few windows\n" * 40
        for name in ("ok.txt", "locked.txt", "other.txt"):
            (base / name).write_text(text)
            os.chown(base / name, 65534, 65534)
        os.chown(base / "locked.txt", 0, 0)
        os.chmod(base / "locked.txt", 0o600)
        drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        env = {**os.environ, "HOME": str(base)}
        if command == "query":
            made = subprocess.run(
                [*drop, sys.executable, "-m", "sif", "index", "-q", "--index", "idx", "other.txt"],
                cwd=base, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
        args = ["--index", "idx"] if command == "query" else []
        done = subprocess.run(
            [*drop, sys.executable, "-m", "sif", command, *args, "ok.txt", "locked.txt"],
            cwd=base, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines() == ["sif: warning: locked.txt: Permission denied"]
        assert "ok.txt" in done.stdout
    finally:
        shutil.rmtree(base)
