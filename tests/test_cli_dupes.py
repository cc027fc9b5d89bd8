"""``sif dupes`` in-process: formats, names that are not UTF-8, exit codes, summary."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sif.cli import main
from treeutil import write


def run(*args: str, input: bytes | None = None) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(main, ["dupes", *args], input=input)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout_bytes, result.stderr


def tree(tmp: Path) -> Path:
    write(tmp / "a/one", b"same bytes\n")
    write(tmp / "b/two", b"same bytes\n")
    os.link(tmp / "a/one", tmp / "a/one-link")
    write(tmp / "c/three", b"other\n")
    write(tmp / "c/four", b"other\n")
    write(tmp / "lonely", b"unique content\n")
    return tmp


def test_text_format_groups_sizes_and_hardlinks(tmp_path: Path) -> None:
    code, out, err = run(str(tree(tmp_path)))
    assert code == 0
    text = out.decode()
    blocks = text.strip().split("\n\n")
    assert len(blocks) == 2
    assert blocks[0].startswith("2 files of 11 bytes")
    assert f"  = {tmp_path}/a/one-link  (hardlink)" in blocks[0]
    assert "2 groups of replicas, 2 redundant files" in err


def test_fdupes_format_matches_fdupes_layout(tmp_path: Path) -> None:
    _, out, _ = run("--format", "fdupes", "-q", str(tree(tmp_path)))
    groups = [set(b.split("\n")) for b in out.decode().rstrip("\n").split("\n\n")]
    assert {f"{tmp_path}/a/one", f"{tmp_path}/a/one-link", f"{tmp_path}/b/two"} in groups
    assert {f"{tmp_path}/c/three", f"{tmp_path}/c/four"} in groups


def test_json_and_csv(tmp_path: Path) -> None:
    _, out, _ = run("--format", "json", "-q", str(tree(tmp_path)))
    header, *docs = [json.loads(line) for line in out.decode().splitlines()]
    assert header["report"] == "sif dupes"
    first = docs[0]
    assert first["size"] == 11
    assert first["digest"].startswith("xxh3-128:")
    assert first["paths"] == [f"{tmp_path}/a/one", f"{tmp_path}/b/two"]
    assert first["hardlinks"] == [[f"{tmp_path}/a/one-link"], []]
    _, out, _ = run("--format", "csv", "-q", str(tmp_path))
    rows = list(csv.DictReader(io.StringIO(out.decode())))
    assert {r["path"] for r in rows if r["group"] == "1"} == {
        f"{tmp_path}/a/one",
        f"{tmp_path}/a/one-link",
        f"{tmp_path}/b/two",
    }
    assert [r["hardlink_of"] for r in rows if r["path"].endswith("one-link")] == [
        f"{tmp_path}/a/one"
    ]


def test_undecodable_and_newline_names_round_trip(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/bad\xffname"
    write(raw, b"payload\n")
    write(tmp_path / "new\nline", b"payload\n")
    code, out, err = run(str(tmp_path))
    assert code == 0  # the bad name is a note: nothing was skipped
    assert "sif: note: $'" in err and "name is not valid UTF-8 (shown escaped)" in err
    assert "sif: warning" not in err and ", 0 warnings," in err
    assert b"$'" + os.fsencode(tmp_path) + b"/bad\\xffname'" in out
    assert b"$'" + os.fsencode(tmp_path) + b"/new\\nline'" in out
    # -0: raw bytes, NUL-terminated, a group ends with an extra NUL.
    _, out, _ = run("-0", "-q", str(tmp_path))
    assert out.endswith(b"\0\0")
    assert set(out.rstrip(b"\0").split(b"\0")) == {raw, os.fsencode(tmp_path) + b"/new\nline"}
    # json: the undecodable byte is \udcff, which Python turns back into the byte.
    _, out, _ = run("--format", "json", "-q", str(tmp_path))
    doc = json.loads(out.splitlines()[1])
    assert raw in [os.fsencode(p) for p in doc["paths"]]
    assert "\\udcff" in out.decode("utf-8")


def test_warning_names_path_and_cause_exit_1(tmp_path: Path) -> None:
    write(tmp_path / "x", b"1")
    listed = f"{tmp_path}\n{tmp_path}/missing\n".encode()
    code, _, err = run("--from-file", "-", input=listed)  # a stale list: a warning
    assert code == 1
    assert f"sif: warning: {tmp_path}/missing: vanished during the scan" in err
    assert "1 warnings" in err


def test_null_with_json_or_csv_is_a_usage_error(tmp_path: Path) -> None:
    tree(tmp_path)
    for fmt in ("json", "csv"):
        code, out, err = run("-0", "--format", fmt, str(tmp_path))
        assert code == 2 and out == b""
        assert f"-0 writes the names ending in NUL, not {fmt}" in err
    code, out, _ = run("-0", "--format", "fdupes", "-q", str(tmp_path))
    assert code == 0 and out.endswith(b"\0\0")


def test_from_file_and_stdin_nul(tmp_path: Path) -> None:
    tree(tmp_path)
    listing = f"{tmp_path}/c/three\0{tmp_path}/c/four\0".encode()
    code, out, _ = run("--from-file", "-", "-0", "-q", input=listing)
    assert code == 0
    assert out == f"{tmp_path}/c/four\0{tmp_path}/c/three\0\0".encode()
    lst = tmp_path / "list.txt"
    lst.write_text(f"{tmp_path}/c/three\n{tmp_path}/c/four\n")
    _, out, _ = run("--from-file", str(lst), "--format", "fdupes", "-q")
    assert out == f"{tmp_path}/c/four\n{tmp_path}/c/three\n\n".encode()  # fdupes's layout


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run()[0] == 2  # no path
    assert run("--min-size", "lots", str(tmp_path))[0] == 2
    assert run("--min-size", "10", "--max-size", "5", str(tmp_path))[0] == 2
    assert run("--format", "xml", str(tmp_path))[0] == 2


def test_filters_and_empty(tmp_path: Path) -> None:
    write(tmp_path / "e1", b"")
    write(tmp_path / "e2", b"")
    write(tmp_path / ".h1", b"hidden\n")
    write(tmp_path / ".h2", b"hidden\n")
    assert run("-q", "--no-hidden", str(tmp_path))[1] == b""
    _, out, _ = run("-q", "--format", "fdupes", "--empty", "--no-hidden", str(tmp_path))
    assert set(out.decode().split()) == {f"{tmp_path}/e1", f"{tmp_path}/e2"}
    _, out, _ = run("-q", "--format", "fdupes", "--exclude", ".h2", str(tmp_path))
    assert out == b""


def test_python_m_sif_and_help() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "sif", "dupes", "--help"], capture_output=True, text=True, check=True
    )
    assert "Exit status" in out.stdout


def _writes(tmp: Path, env: dict[str, str], *args: str) -> tuple[int, bytes]:
    """Write system calls of ``sif ARGS > out`` (a bash reaps it: Linux adds a reaped
    child's counters to its parent's /proc/PID/io) and the output."""
    import subprocess
    import sys

    out = tmp / "out"
    script = 'exec 3>"$1"; shift; "$@" >&3 2>/dev/null; grep ^syscw: /proc/$$/io'
    probe = "grep ^syscw: /proc/$$/io"
    cmd = [sys.executable, "-m", "sif", *args]
    full = {**os.environ, **env}
    got = subprocess.run(
        ["bash", "-c", script, "-", str(out), *cmd],
        env=full,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    idle = subprocess.run(
        ["bash", "-c", probe], env=full, capture_output=True, text=True, check=True
    ).stdout
    return int(got.split()[1]) - int(idle.split()[1]), out.read_bytes()


def test_a_report_is_written_in_blocks_under_pythonunbuffered(tmp_path: Path) -> None:
    # PYTHONUNBUFFERED (set in many container images) makes sys.stdout.buffer the raw
    # file: each line of a report was a system call (21,455 for sif dupes /usr).
    for g in range(300):
        for k in range(2):
            write(tmp_path / f"t/{k}/f{g:03d}", f"group {g}\n".encode() * 3)
    plain = {"PYTHONUNBUFFERED": ""}
    raw = {"PYTHONUNBUFFERED": "1"}
    n_plain, text_plain = _writes(tmp_path, plain, "dupes", "-j", "1", str(tmp_path / "t"))
    n_raw, text_raw = _writes(tmp_path, raw, "dupes", "-j", "1", str(tmp_path / "t"))
    assert text_raw == text_plain and text_plain.count(b"\n") > 1000
    assert n_raw <= n_plain + 5  # before: 1,201 against 18 (a write per line)


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_reader_that_goes_away_stops_sif_quietly_with_status_0(
    tmp_path: Path, unbuffered: str
) -> None:
    # `sif dupes | head -1`: a report larger than the pipe holds. Buffered (the default),
    # the interpreter's last flush met the closed pipe again and the status was 120.
    import subprocess
    import sys

    for g in range(1000):
        for k in range(2):
            write(tmp_path / f"t/{k}/file-with-a-long-name-{g:04d}", f"group {g}\n".encode())
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    p = subprocess.Popen(
        [sys.executable, "-m", "sif", "dupes", "-q", "-j", "1", str(tmp_path / "t")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline().startswith(b"2 files of")
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0 and err == b""


def test_report_output_buffers_a_raw_stdout_and_drops_its_buffer_when_stopped(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from sif.cli.common import report_output

    raw = io.FileIO(tmp_path / "out", "wb")
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(raw, write_through=True))  # as -u
    fds = len(os.listdir("/proc/self/fd"))
    with report_output() as out:
        assert out is not raw  # buffered
        out.write(b"report\n")
        assert (tmp_path / "out").read_bytes() == b""  # in the buffer yet
    assert (tmp_path / "out").read_bytes() == b"report\n"
    with pytest.raises(KeyboardInterrupt), report_output() as out:
        out.write(b"dropped\n")
        raise KeyboardInterrupt
    assert (tmp_path / "out").read_bytes() == b"report\n"
    assert len(os.listdir("/proc/self/fd")) == fds  # the duplicates closed
    raw.close()
