"""sif explain on the command line: text, json and html outputs, bad inputs (subprocess runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from explainutil import close, spliced
from textgen import text


def sif(*args: str | os.PathLike[str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_json_gives_one_record_per_passage_then_the_summary(tmp_path: Path) -> None:
    a, b, expected = spliced(tmp_path)
    out = sif("explain", "--format", "json", a, b)
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    *passages, summary = records
    assert summary["summary"] is True and summary["passages"] == 3 == len(passages)
    for p in passages:
        assert {"a_start", "a_end", "b_start", "b_end", "a_lines", "b_lines"} <= set(p)
        assert p["a_end"] - p["a_start"] == p["b_end"] - p["b_start"] == p["length"]
    import sif as lib

    got = [
        lib.Passage(r["passage"], r["a_start"], r["a_end"], r["b_start"], r["b_end"])
        for r in passages
    ]
    for want in expected:
        assert sum(close(p, want) for p in got) == 1
    assert summary["a"]["path"] == str(a) and summary["b"]["gaps"] == 4
    gaps = summary["b"]["gap_ranges"]
    assert len(gaps) == 4 and sum(e - s for s, e in gaps) == summary["b"]["gap_bytes"]
    assert 0 < summary["a_in_b"] < 1 and summary["longest"]["length"] >= 2_500


def test_text_shows_both_files_side_by_side_with_gaps_elided(tmp_path: Path) -> None:
    a, b, _ = spliced(tmp_path)
    out = sif("explain", "--context", "1", a, b)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"A {a} (text, raw view, 40,000 bytes)")
    assert "3 shared passages" in out.stdout and "longest: passage" in out.stdout
    assert sum(" │ " in line for line in lines) > 60  # the two panes
    assert any("··· " in line and " lines ···" in line for line in lines)
    assert "\x1b[" not in out.stdout  # no colour into a pipe
    coloured = sif("explain", "--color", "always", a, b)
    assert "\x1b[30;48;5;" in coloured.stdout


def test_html_is_one_page_with_both_panes(tmp_path: Path) -> None:
    a, b, _ = spliced(tmp_path)
    page = tmp_path / "pair.html"
    out = sif("explain", "--format", "html", "-o", page, a, b)
    assert out.returncode == 0 and out.stdout == "", out.stderr
    html = page.read_text()
    assert html.count('class="pane"') == 2 and html.count('class="pbtn"') == 3
    assert 'data-p="3"' in html and "<script" in html
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html


def test_nothing_in_common_is_an_empty_list_and_zero_percent(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_bytes(text(1, 5_000))
    (tmp_path / "y.txt").write_bytes(text(2, 5_000))
    out = sif("explain", tmp_path / "x.txt", tmp_path / "y.txt")
    assert out.returncode == 0, out.stderr
    assert "0 shared passages" in out.stdout and "A in B 0.0%  B in A 0.0%" in out.stdout
    js = sif("explain", "--format", "json", tmp_path / "x.txt", tmp_path / "y.txt")
    [summary] = [json.loads(line) for line in js.stdout.splitlines()]
    assert summary["passages"] == 0 and summary["a_in_b"] == 0.0


def test_bad_inputs_are_one_line_and_status_2(tmp_path: Path) -> None:
    good = tmp_path / "t.txt"
    good.write_bytes(text(1, 2_000))
    (tmp_path / "b.bin").write_bytes(bytes(range(256)) * 8)
    os.mkfifo(tmp_path / "fifo")  # never opened: a reader would block without a writer
    (tmp_path / "dir").mkdir()
    cases = {
        "missing": "no such file or directory",
        "fifo": "a FIFO: not read",
        "dir": "is a directory",
        "b.bin": "only files of one kind",
    }
    for name, cause in cases.items():
        out = sif("explain", good, tmp_path / name, timeout=60)
        assert out.returncode == 2, (name, out.stderr)
        assert out.stderr.count("\n") == 1 and cause in out.stderr, out.stderr
        assert str(tmp_path / name) in out.stderr and "Traceback" not in out.stderr
        assert out.stdout == ""
    # A name that is not valid UTF-8, missing or a directory: quoted as the reports quote it.
    (tmp_path / os.fsdecode(b"dir\xfe")).mkdir()
    for raw, cause in ((b"nope\xff", "no such file or directory"), (b"dir\xfe", "is a directory")):
        args = [sys.executable, "-m", "sif", "explain", os.fsencode(good)]
        done = subprocess.run([*args, os.fsencode(tmp_path) + b"/" + raw], capture_output=True)
        shown = f"$'{tmp_path}/{raw.decode('latin-1').encode('unicode_escape').decode()}'"
        assert done.returncode == 2 and done.stdout == b""
        assert done.stderr.decode("utf-8") == f"sif: error: {shown}: {cause}" + (
            " (explain compares two files)\n" if raw.startswith(b"dir") else "\n"
        )


def test_binary_passages_show_as_offsets_and_hex(tmp_path: Path) -> None:
    import numpy as np

    rng = np.random.default_rng(4)
    core = rng.integers(0, 256, 3_000, dtype=np.uint8).tobytes()
    (tmp_path / "x.bin").write_bytes(b"\0\1" + rng.bytes(700) + core)
    (tmp_path / "y.bin").write_bytes(core + b"\0\xff" + rng.bytes(300))
    out = sif("explain", tmp_path / "x.bin", tmp_path / "y.bin")
    assert out.returncode == 0, out.stderr
    assert "(binary, raw view, 3,702 bytes)" in out.stdout
    assert f"@0x2be +3000: {core[:8].hex(' ')}" in out.stdout  # A's side: 2 + 700 bytes in
    assert f"@0x0 +3000: {core[:8].hex(' ')}" in out.stdout
    assert "··· 702 bytes ···" in out.stdout


def test_a_name_that_is_not_utf8_is_shown_escaped_as_by_the_other_reports(tmp_path: Path) -> None:
    """The text and html outputs show such a name in the shell's $'...' quoting (as
    ``similar`` and ``dupes`` do, :func:`sif.events.display_path`), never its raw bytes:
    the output is valid UTF-8 whatever the names."""
    a, b, _ = spliced(tmp_path)
    odd = tmp_path / os.fsdecode(b"caf\xe9 b.txt")
    os.rename(b, odd)
    args = [
        sys.executable,
        "-m",
        "sif",
        "explain",
        "--context",
        "1",
        os.fsencode(a),
        os.fsencode(odd),
    ]
    out = subprocess.run(args, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    shown = out.stdout.decode("utf-8")  # raises on a raw \xe9
    want = "$'" + str(tmp_path) + "/caf\\xe9 b.txt'"
    lines = shown.splitlines()
    assert lines[1].startswith(f"B {want} (text, raw view,")
    # The panes' heading (each name cut to its pane's width).
    assert any(line.startswith(f"A {str(a)[:40]}") and " │ B $'" in line for line in lines[2:])
    page = subprocess.run([*args, "--format", "html"], capture_output=True, timeout=120)
    assert page.returncode == 0, page.stderr
    html = page.stdout.decode("utf-8")
    assert "caf\\xe9 b.txt" in html and "\ufffd" not in html


def test_an_output_that_is_one_of_the_inputs_is_a_usage_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """`sif explain -o a a b` emptied a (then died of SIGBUS reading it, or wrote the report
    over it): refused as query refuses it, under any of its names, and for the archive of a
    member."""
    import zipfile

    a, b, _ = spliced(tmp_path)
    os.link(a, tmp_path / "alias")
    with zipfile.ZipFile(tmp_path / "z.zip", "w") as z:
        z.writestr("m.txt", Path(a).read_bytes())
    held = {p: Path(p).read_bytes() for p in (a, b, tmp_path / "z.zip")}
    for out, inputs in (
        (a, (a, b)),
        (b, (a, b)),
        (tmp_path / "alias", (a, b)),
        (tmp_path / "z.zip", (f"{tmp_path}/z.zip!/m.txt", b)),
    ):
        done = sif("explain", "-o", out, *inputs)
        assert done.returncode == 2, done.stderr
        assert "also an input" in done.stderr
        assert {p: Path(p).read_bytes() for p in held} == held
