"""``sif index --info``, the parameter sets in words, and the ``--anchors`` rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sif.index.duck import SCHEMA_VERSION
from treeutil import write


def sif(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    rng = np.random.default_rng(9)
    base = rng.integers(97, 123, 20_000, np.uint8).tobytes()
    write(tmp_path / "t" / "a.txt", base)
    for i in range(4):
        write(tmp_path / "t" / f"o{i}.txt", rng.integers(97, 123, 8000, np.uint8).tobytes())
    write(tmp_path / "q.txt", base)
    return tmp_path


def test_info_shows_the_sets_in_words_with_entries_size_and_last_run(corpus: Path) -> None:
    idx, t = corpus / "idx", corpus / "t"
    assert sif("index", "-q", "-j", "1", "-k", "3", "--index", idx, t).returncode == 0
    assert sif("index", "-q", "-j", "1", "--scheme", "sif94", "--index", idx, t).returncode == 0
    proc = sif("index", "--info", "--index", idx)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    want = f"on disk, schema {SCHEMA_VERSION}, 2 parameter sets"
    assert lines[0].startswith(f"index {idx}: ") and want in lines[0]
    assert lines[1] == "  winnow w=50 k=3 min-fingerprints=20 normalize=auto"
    assert lines[2].startswith("    5 entries, ") and lines[2].endswith(" in 1 segment")
    assert lines[3].startswith("    last run ") and lines[3].endswith(f" UTC: {t}")
    assert lines[4] == "  sif94 w=50 k=8 min-fingerprints=0 normalize=auto (last used)"
    assert len(lines) == 7
    proc = sif("index", "--info", "--index", idx, t)
    assert proc.returncode == 2 and "take no PATH" in proc.stderr
    proc = sif("index", "--info", "--index", corpus / "none")
    assert proc.returncode == 3 and "no index at" in proc.stderr


def test_the_mismatch_message_speaks_the_options_words(corpus: Path) -> None:
    idx = corpus / "idx"
    assert sif("index", "-q", "-j", "1", "-k", "3", "--index", idx, corpus / "t").returncode == 0
    proc = sif("query", "--index", idx, "--scheme", "sif94", "-k", "5", corpus / "q.txt")
    assert proc.returncode == 3
    [line] = proc.stderr.splitlines()
    assert (
        "the index holds: winnow w=50 k=3 min-fingerprints=20 normalize=auto; "
        "asked: sif94 w=50 k=5 min-fingerprints=0; use the same options" in line
    )
    assert "{" not in line and "another --index" in line


def test_anchors_without_scheme_anchors_is_a_usage_error(corpus: Path) -> None:
    anchors = corpus / "a.json"
    assert sif("anchors", "learn", "-q", "-o", anchors, corpus / "t").returncode == 0
    for cmd in ("index", "similar"):
        proc = sif(cmd, "-q", "--anchors", anchors, "--index", corpus / "idx", corpus / "t")
        assert proc.returncode == 2 and "--anchors FILE goes with --scheme anchors" in proc.stderr
    proc = sif("query", "--anchors", anchors, "--index", corpus / "idx", corpus / "q.txt")
    assert proc.returncode == 2 and "--anchors FILE goes with --scheme anchors" in proc.stderr
    assert not (corpus / "idx").exists()


def test_scheme_anchors_alone_uses_the_one_anchor_set_the_index_holds(corpus: Path) -> None:
    idx, t, q = corpus / "idx", corpus / "t", corpus / "q.txt"
    first, second = corpus / "a.json", corpus / "b.json"
    assert sif("anchors", "learn", "-q", "-o", first, t).returncode == 0
    assert sif("anchors", "learn", "-q", "--length", "5", "-o", second, t).returncode == 0
    proc = sif("index", "-q", "-j", "1", "--scheme", "anchors", "--index", idx, t)
    assert proc.returncode == 2 and "needs --anchors FILE" in proc.stderr  # no index yet
    assert sif("index", "-q", "-j", "1", "--index", idx, t).returncode == 0  # winnow
    proc = sif("query", "--scheme", "anchors", "--index", idx, q)
    assert proc.returncode == 2 and "the index holds no anchor set" in proc.stderr
    proc = sif(
        "index", "-q", "-j", "1", "--scheme", "anchors", "--anchors", first, "--index", idx, t
    )
    assert proc.returncode == 0, proc.stderr
    proc = sif("query", "-t", "50", "--scheme", "anchors", "--index", idx, q)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == f" 100 {t}/a.txt 20000  (exact copy)"
    proc = sif("index", "-j", "1", "--scheme", "anchors", "--index", idx, t)
    assert proc.returncode == 0 and "0 new, 0 changed, 5 unchanged" in proc.stderr, proc.stderr
    proc = sif("similar", "-q", "-j", "1", "--scheme", "anchors", "--index", idx, t)
    assert proc.returncode == 0, proc.stderr
    cmd = ["index", "-q", "-j", "1", "--scheme", "anchors", "--anchors", second, "--index", idx]
    assert sif(*cmd, t).returncode == 0
    proc = sif("query", "--scheme", "anchors", "--index", idx, q)
    assert proc.returncode == 2 and "holds 2 anchor sets" in proc.stderr
    assert "name one with --anchors" in proc.stderr
    proc = sif("index", "-q", "--rebuild", "--scheme", "anchors", "--index", idx, t)
    assert proc.returncode == 2 and "--rebuild --scheme anchors needs --anchors" in proc.stderr


def test_a_damaged_anchor_set_is_named(corpus: Path) -> None:
    idx, t, q = corpus / "idx", corpus / "t", corpus / "q.txt"
    anchors = corpus / "a.json"
    assert sif("anchors", "learn", "-q", "-o", anchors, t).returncode == 0
    cmd = ["index", "-q", "-j", "1", "--scheme", "anchors", "--anchors", anchors, "--index", idx]
    assert sif(*cmd, t).returncode == 0
    [stored] = (idx / "anchors").iterdir()
    stored.write_text(stored.read_text().replace("[", "[1, ", 1))
    for proc in (
        sif("index", "--verify", "--index", idx),
        sif("query", "--index", idx, q),
        sif("index", "-q", "-j", "1", "--index", idx, t),
    ):
        assert proc.returncode == 3, proc.stderr
        [line] = proc.stderr.splitlines()
        assert line.startswith(f"sif: error: index corrupt: {stored} ("), line


def test_info_quotes_a_root_as_the_reports_quote_names(tmp_path: Path) -> None:
    """A root holding a newline or a byte that is not UTF-8 broke the 'last run' line (or
    printed raw bytes): it is quoted as the reports quote names."""
    root = tmp_path / "a\nb"
    odd = tmp_path / os.fsdecode(b"c\xff")
    for d in (root, odd):
        d.mkdir()
        (d / "f.txt").write_text("text of a file, long enough to fingerprint: more than fifty\n")
    index = str(tmp_path / "idx")

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "sif", *args], capture_output=True, timeout=120
        )

    assert run("index", "-q", "--index", index, str(root), str(odd)).returncode == 0
    done = run("index", "--info", "--index", index)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode("utf-8").splitlines()
    last = [line for line in lines if line.startswith("    last run ")]
    assert len(last) == 1
    assert last[0].endswith(f" UTC: $'{tmp_path}/a\\nb' $'{tmp_path}/c\\xff'")
