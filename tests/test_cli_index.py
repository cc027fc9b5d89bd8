"""``sif index`` and ``sif query`` in-process: summary, formats, errors and exit codes."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sif.cli import main
from sif.index import open_store
from treeutil import write


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout_bytes, result.stderr


def corpus(root: Path) -> Path:
    rng = np.random.default_rng(3)
    base = rng.integers(97, 123, 20_000, np.uint8).tobytes()
    write(root / "t" / "orig.txt", base)
    write(
        root / "t" / "half.txt", base[:10_000] + rng.integers(97, 123, 10_000, np.uint8).tobytes()
    )
    write(root / "t" / "other.txt", rng.integers(97, 123, 20_000, np.uint8).tobytes())
    write(root / "q.txt", base)
    return root


def test_index_summary_then_query_in_three_formats(tmp_path: Path) -> None:
    corpus(tmp_path)
    idx = str(tmp_path / "idx")
    code, _, err = run("index", "--index", idx, "-j", "1", str(tmp_path / "t"))
    assert code == 0
    assert "3 new, 0 changed, 0 unchanged, 0 removed files; 3 files read" in err
    code, _, err = run("index", "-j", "1", str(tmp_path / "t"), env={"SIF_INDEX": idx})
    assert "0 new, 0 changed, 3 unchanged" in err and "0 files read" in err
    code, out, _ = run("query", "--index", idx, "-t", "30", str(tmp_path / "q.txt"))
    lines = out.decode().splitlines()
    assert lines[0] == f"R100 {tmp_path}/q.txt 20000"
    assert lines[1] == f" 100 {tmp_path}/t/orig.txt 20000  (exact copy)"
    assert lines[2].endswith(f" {tmp_path}/t/half.txt 20000") and len(lines) == 3
    code, out, _ = run(
        "query", "--index", idx, "-t", "30", "--format", "json", str(tmp_path / "q.txt")
    )
    docs = [json.loads(line) for line in out.decode().splitlines()]
    assert [d["exact"] for d in docs] == [True, False]
    assert 35 < docs[1]["percent"] < 65 and docs[1]["exact_file_in_query"] > 35
    assert docs[1]["score_exact"] is True and docs[1]["score"] == docs[1]["similarity"]
    code, out, _ = run(
        "query", "--index", idx, "-t", "30", "--format", "csv", str(tmp_path / "q.txt")
    )
    rows = list(csv.DictReader(io.StringIO(out.decode())))
    assert [r["path"] for r in rows] == [f"{tmp_path}/t/orig.txt", f"{tmp_path}/t/half.txt"]


def test_errors_name_the_problem(tmp_path: Path) -> None:
    corpus(tmp_path)
    idx = str(tmp_path / "idx")
    code, _, err = run("query", "--index", idx, str(tmp_path / "q.txt"))
    assert code == 3 and "no index at" in err
    run("index", "--index", idx, "-j", "1", str(tmp_path / "t"))
    code, _, err = run("query", "--index", idx, "--scheme", "sif94", str(tmp_path / "q.txt"))
    assert (
        code == 3
        and "holds: winnow w=50 k=8 min-fingerprints=20 normalize=auto; asked: sif94 w=50 k=8"
        in err
    )
    with open_store(idx):  # type: ignore[attr-defined]
        code, _, err = run("index", "--index", idx, "-j", "1", str(tmp_path / "t"))
    assert code == 3 and "index in use (pid" in err
    (tmp_path / "idx" / "catalog.duckdb").write_bytes(b"\0garbage" * 5000)
    code, _, err = run("index", "--index", idx, "-j", "1", str(tmp_path / "t"))
    assert code == 3 and "index corrupt: " in err and "run with --rebuild" in err
    code, _, err = run("index", "--index", idx, "--rebuild", "-j", "1", str(tmp_path / "t"))
    assert code == 0 and "3 new" in err
    code, _, err = run("query", "--index", idx, "--scheme", "anchors", str(tmp_path / "q.txt"))
    assert code == 2 and "--anchors" in err


@pytest.mark.parametrize("command", ["index", "similar"])
def test_a_from_file_path_gone_since_the_list_was_made_is_a_warning(
    tmp_path: Path, command: str
) -> None:
    """As the README says (and sif dupes does): the list may be older than the tree. It was
    a usage error, and nothing was done. A list of which nothing is left is one."""
    for i in range(2):
        (tmp_path / "t").mkdir(exist_ok=True)
        (tmp_path / "t" / f"f{i}.txt").write_text("the same few lines of text\n" * 40)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{tmp_path}/t\n{tmp_path}/gone-since\n")
    index = str(tmp_path / "index")
    done = subprocess.run(
        [sys.executable, "-m", "sif", command, "--index", index, "--from-file", str(listing)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    assert f"sif: warning: {tmp_path}/gone-since: no such file or directory (listed by" in (
        done.stderr
    )
    if command == "similar":
        assert "f0.txt" in done.stdout and "f1.txt" in done.stdout
    else:
        assert "2 new" in done.stderr
    listing.write_text(f"{tmp_path}/gone-since\n")
    done = subprocess.run(
        [sys.executable, "-m", "sif", command, "--index", index, "--from-file", str(listing)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2


@pytest.mark.parametrize("bad", ["", "ix\udcff", "fifo"])
@pytest.mark.parametrize("command", ["index", "query"])
def test_an_index_path_no_index_can_have_is_a_usage_error(
    tmp_path: Path, bad: str, command: str
) -> None:
    """An empty --index wrote the default index unasked; a name that is not UTF-8 failed in
    DuckDB (std::bad_cast) after files were made there; a FIFO was an error no one
    foresaw. Each is a usage error, and nothing is made."""
    import os

    (tmp_path / "f.txt").write_text("some words of text, more than a window of fifty bytes\n")
    os.mkfifo(tmp_path / "fifo")
    before = sorted(os.listdir(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "sif", command, "--index", bad, "f.txt"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 2, done.stderr
    assert b"Invalid value for '--index'" in done.stderr
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize(
    "args",
    [
        ["similar", "--memory-limit", "5"],  # DuckDB's parser error, and only at a collation
        ["similar", "--memory-limit", "99999999TB"],
        ["similar", "--memory-limit", "150%"],
        ["similar", "--size-ratio", "nan"],  # every range let it through: no pair, no word
        ["dupes", "--max-size", "9223372036854775808"],  # OverflowError deep in the walk
        ["index", "--min-size", "99999999999999999999999T"],
        ["explain", "--context", "999999999999999999999", "f.txt"],  # OverflowError
    ],
)
def test_option_values_out_of_reach_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    import os

    (tmp_path / "f.txt").write_text("some words of text, more than a window of fifty bytes\n")
    done = subprocess.run(
        [sys.executable, "-m", "sif", *args, "--index", "idx", "f.txt"]
        if args[0] != "explain" and args[0] != "dupes"
        else [sys.executable, "-m", "sif", *args, "f.txt"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Error" in done.stderr
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["index", "--index", "idx", "--from-file", "/dev/zero"],
        ["index", "--index", "idx", "--scheme", "anchors", "--anchors", "/dev/zero", "f.txt"],
        ["fuzzysum", "-m", "/dev/zero", "f.txt"],
    ],
)
def test_a_device_given_as_a_list_or_anchor_file_is_refused(
    tmp_path: Path, args: list[str]
) -> None:
    """Read whole, /dev/zero took every byte of memory (the OOM killer ended it): refused,
    one line, exit 3. (The test runs under a memory limit: without the check it fails
    with an out-of-memory line, not a kernel's kill.)"""
    import os
    import resource

    (tmp_path / "f.txt").write_text("some words of text, more than a window of fifty bytes\n")

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "sif", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 3, done.stderr
    assert (
        done.stderr.splitlines()[-1] == "sif: error: /dev/zero: a device, not a file to read whole"
    )
