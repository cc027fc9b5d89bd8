"""``sif compare A B``: a generated source release copied to B with every kind of change.

Each file of A and B gets its expected status and pass; the roll-up, the
summary, the index (a second run reads nothing), the CLI's formats and exit
statuses are checked on real files and a real index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sif
from actionutil import tool
from corpus import source, source_tree
from sif.compare.passes import _pair_by_name, direction
from textgen import text

#: (A's path, B's path) -> (status, pass) for every file that is not ``same``.
EXPECTED = {
    ("pkg0/mod0.py", "pkg0/mod0_renamed.py"): ("moved", 2),
    ("pkg1/mod1.py", "pkg2/mod1.py"): ("moved", 2),
    ("pkg3/mod3.py", "pkg3/mod3.py"): ("changed", 1),
    ("pkg4/mod4.py", "pkg5/mod4_new.py"): ("moved+changed", 3),
    ("pkg6/mod6.py", "pkg6/mod6.py"): ("changed", 1),
    ("pkg7/mod7.py", "pkg6/mod6.py"): ("moved+changed", 3),
    (None, "pkg8/added.py"): ("only-b", 4),
    ("pkg9/mod9.py", None): ("only-a", 4),
    ("docs/y.txt", "notes/y.txt"): ("moved", 2),
    ("tie/alpha.txt", "tie2/alpha.txt"): ("moved", 2),
    ("tie/beta.txt", "tie2/beta.txt"): ("moved", 2),
    ("dup/two.txt", "dup2/two.txt"): ("moved", 2),
    ("dup/one.txt", "dup2/two.txt"): ("duplicate", 2),
    ("pkg10/mod10.py", "pkg10/mod10.py/__init__.py"): ("moved", 2),
}


def _edit(data: bytes, at: int, insert: bytes) -> bytes:
    return data[:at] + insert + data[at:]


def make_trees(root: Path) -> tuple[Path, Path]:
    """A: a release (modules, docs); B: a copy with every change of :data:`EXPECTED`."""
    a, b = root / "A", root / "B"
    source_tree(a, 24, seed=14)
    (a / "docs").mkdir()
    (a / "docs" / "x.txt").write_bytes(text(1, 3000))
    (a / "docs" / "y.txt").write_bytes(text(1, 3000))  # identical to x.txt
    (a / "tie").mkdir()
    (a / "tie" / "alpha.txt").write_bytes(text(2, 2500))
    (a / "tie" / "beta.txt").write_bytes(text(2, 2500))
    (a / "dup").mkdir()
    (a / "dup" / "one.txt").write_bytes(text(3, 2000))
    (a / "dup" / "two.txt").write_bytes(text(3, 2000))
    (a / "pkg2" / "empty.py").write_bytes(b"")
    shutil.copytree(a, b)
    (b / "pkg0" / "mod0.py").rename(b / "pkg0" / "mod0_renamed.py")
    (b / "pkg1" / "mod1.py").rename(b / "pkg2" / "mod1.py")
    m3 = b / "pkg3" / "mod3.py"
    m3.write_bytes(_edit(m3.read_bytes(), 700, b"    # checked again\n"))
    m4 = (b / "pkg4" / "mod4.py").read_bytes()
    (b / "pkg4" / "mod4.py").unlink()
    (b / "pkg5" / "mod4_new.py").write_bytes(_edit(m4, 1200, b"RETRIES = 3\n"))
    m6 = b / "pkg6" / "mod6.py"
    m6.write_bytes(m6.read_bytes() + (b / "pkg7" / "mod7.py").read_bytes())
    (b / "pkg7" / "mod7.py").unlink()
    (b / "pkg8" / "added.py").write_bytes(source(777, 6000))
    (b / "pkg9" / "mod9.py").unlink()
    (b / "notes").mkdir()
    (b / "docs" / "y.txt").rename(b / "notes" / "y.txt")
    (b / "tie").rename(b / "tie2")
    (b / "dup2").mkdir()
    (b / "dup" / "two.txt").rename(b / "dup2" / "two.txt")
    shutil.rmtree(b / "dup")
    m10 = (b / "pkg10" / "mod10.py").read_bytes()
    (b / "pkg10" / "mod10.py").unlink()
    (b / "pkg10" / "mod10.py").mkdir()
    (b / "pkg10" / "mod10.py" / "__init__.py").write_bytes(m10)
    return a, b


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    a, b = make_trees(root)
    return a, b, root / "index"


@pytest.fixture(scope="module")
def result(trees: tuple[Path, Path, Path]) -> sif.CompareResult:
    a, b, index = trees
    return sif.compare_trees(a, b, index)


def _files(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names
    }


def test_every_file_gets_its_status_and_pass(
    trees: tuple[Path, Path, Path], result: sif.CompareResult
) -> None:
    a, b, _ = trees
    got = {(f.a, f.b): (f.status, f.pass_no) for f in result.files if f.status != "same"}
    assert got == EXPECTED
    same = {f.a for f in result.files if f.status == "same"}
    assert all(f.a == f.b and f.pass_no == 1 for f in result.files if f.status == "same")
    # Every file of each side is accounted for.
    assert {f.a for f in result.files if f.a is not None} == _files(a)
    assert {f.b for f in result.files if f.b is not None} == _files(b)
    assert "pkg2/empty.py" in same
    assert not result.identical


def test_scores_are_exact_and_say_their_direction(result: sif.CompareResult) -> None:
    by = {(f.a, f.b): f for f in result.files}
    edit = by[("pkg3/mod3.py", "pkg3/mod3.py")]
    assert edit.exact and 95 < edit.score < 100 and edit.direction is None
    assert by[("pkg4/mod4.py", "pkg5/mod4_new.py")].score > 95
    appended = by[("pkg6/mod6.py", "pkg6/mod6.py")]
    assert appended.a_in_b == 1.0 and appended.b_in_a < 0.5 and appended.direction == "a-in-b"
    held = by[("pkg7/mod7.py", "pkg6/mod6.py")]
    assert held.a_in_b == 1.0 and held.direction == "a-in-b" and held.exact
    # The names chose between identical candidates, and say so.
    assert by[("tie/alpha.txt", "tie2/alpha.txt")].by_name
    assert by[("dup/one.txt", "dup2/two.txt")].by_name is False
    assert not by[("pkg1/mod1.py", "pkg2/mod1.py")].by_name


def test_rollup_and_summary(trees: tuple[Path, Path, Path], result: sif.CompareResult) -> None:
    a, b, _ = trees
    dirs = {(d.side, d.path): d for d in result.directories}
    assert dirs[("a", "pkg9")].share == 0 and dirs[("a", "pkg9")].other is None
    assert dirs[("a", "pkg10")].share == 1 and dirs[("a", "pkg10")].other == "pkg10/mod10.py"
    assert dirs[("a", "tie")].other == "tie2" and dirs[("b", "tie2")].other == "tie"
    assert dirs[("a", "pkg7")].other == "pkg6"
    assert dirs[("b", "pkg6")].share > 0.99  # mod6 holds A's mod6 and mod7
    assert dirs[("a", ".")].bytes == sum(p.stat().st_size for p in a.rglob("*") if p.is_file())
    assert 0.8 < dirs[("a", ".")].share < 1
    s = result.summary()
    assert s["only-a"] == {"files": 1, "bytes": (a / "pkg9" / "mod9.py").stat().st_size}
    assert s["only-b"] == {"files": 1, "bytes": (b / "pkg8" / "added.py").stat().st_size}
    assert s["moved"]["files"] == 7 and s["changed"]["files"] == 2


def test_a_second_run_reads_only_what_changed(
    trees: tuple[Path, Path, Path], result: sif.CompareResult
) -> None:
    a, b, index = trees
    assert result.stats.index is not None and result.stats.index.files_read > 0
    again = sif.compare_trees(a, b, index)
    assert again.stats.index is not None and again.stats.index.files_read == 0
    assert again.files == result.files


def test_fast_says_its_scores_are_estimates(trees: tuple[Path, Path, Path]) -> None:
    a, b, index = trees
    fast = sif.compare_trees(a, b, index, exact=False)
    third = [f for f in fast.files if f.pass_no == 3]
    assert third and not any(f.exact for f in third)
    assert all(f.exact for f in fast.files if f.pass_no == 1)


def test_identical_trees(tmp_path: Path) -> None:
    a = tmp_path / "a"
    source_tree(a, 6, seed=2)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    r = sif.compare_trees(a, b, tmp_path / "index")
    assert r.identical and r.stats.index is None  # nothing left for pass 3: no index
    assert [d.share for d in r.directories] == [1.0] * len(r.directories)


def test_bad_trees_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(sif.ConfigError, match="not a directory"):
        sif.compare_trees(tmp_path / "f", tmp_path, tmp_path / "index")
    with pytest.raises(sif.ConfigError, match="no such file"):
        sif.compare_trees(tmp_path, tmp_path / "nope", tmp_path / "index")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(sif.ConfigError, match="not a directory"):
        sif.compare_trees(tmp_path / "fifo", tmp_path, tmp_path / "index")


def test_archives_are_compared_by_their_members(tmp_path: Path) -> None:
    import tarfile
    import zipfile

    a, b = make_trees(tmp_path)
    at = tmp_path / "proj-1.0.tar.gz"
    with tarfile.open(at, "w:gz") as tar:
        tar.add(a, arcname="proj-1.0")
    bz = tmp_path / "proj-1.1.zip"
    with zipfile.ZipFile(bz, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(b.rglob("*")):
            if p.is_file():
                z.write(p, "proj-1.1/" + str(p.relative_to(b)))
    r = sif.compare_trees(at, bz, tmp_path / "index")
    got = {(f.a, f.b): (f.status, f.pass_no) for f in r.files if f.status != "same"}
    assert got == EXPECTED
    assert {f.a for f in r.files if f.a is not None} == _files(a)
    # A directory against an archive of it: the same content under the same names.
    assert sif.compare_trees(a, at, tmp_path / "index").identical


# --- the command ----------------------------------------------------------------------


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_cli_json_one_record_per_file_and_exit_1(trees: tuple[Path, Path, Path]) -> None:
    a, b, index = trees
    p = run("compare", a, b, "--index", index, "--format", "json")
    assert p.returncode == 1, p.stderr
    records = [json.loads(line) for line in p.stdout.splitlines()]
    files = [r for r in records if r["record"] == "file"]
    got = {(r["a"], r["b"]): (r["status"], r["pass"]) for r in files if r["status"] != "same"}
    assert got == EXPECTED
    assert {r["record"] for r in records} == {"file", "directory", "summary"}
    assert records[-1]["record"] == "summary" and records[-1]["only-a"]["files"] == 1
    assert "Traceback" not in p.stderr


def test_cli_text_and_csv(trees: tuple[Path, Path, Path], result: sif.CompareResult) -> None:
    a, b, index = trees
    p = run("compare", a, b, "--index", index, "-q")
    assert p.returncode == 1 and p.stderr == ""
    lines = p.stdout.splitlines()
    assert any(
        line.startswith("moved ") and "pkg1/mod1.py -> pkg2/mod1.py" in line and "[pass 2]" in line
        for line in lines
    )
    assert any(line.startswith("only-a ") and "pkg9/mod9.py" in line for line in lines)
    assert any(
        "tie/alpha.txt -> tie2/alpha.txt" in line and "names chose" in line for line in lines
    )
    assert not any(line.startswith("same ") for line in lines)
    c = run("compare", a, b, "--index", index, "-q", "--format", "csv")
    assert c.returncode == 1
    header, *rows = c.stdout.splitlines()
    assert header.startswith("a,b,status,pass,score")
    assert len(rows) == len(result.files)


def test_cli_same_trees_exit_0(tmp_path: Path) -> None:
    a = tmp_path / "a"
    source_tree(a, 4, seed=3)
    shutil.copytree(a, tmp_path / "b")
    p = run("compare", a, tmp_path / "b", "--index", tmp_path / "index")
    assert p.returncode == 0, p.stderr
    assert "same" in p.stdout


@pytest.mark.parametrize("which", ["missing", "file", "fifo", "device"])
def test_cli_bad_tree_is_one_line_and_exit_2(tmp_path: Path, which: str) -> None:
    """A FIFO is never opened (it hung the run in open()), nor a device read (/dev/zero:
    until memory ran out)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "f").write_bytes(b"data")
    os.mkfifo(tmp_path / "fifo")
    bad = {
        "missing": tmp_path / "nope",
        "file": tmp_path / "f",
        "fifo": tmp_path / "fifo",
        "device": Path("/dev/zero"),
    }[which]
    p = run("compare", tmp_path / "a", bad, "--index", tmp_path / "index")
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    cause = (
        "no such file or directory"
        if which == "missing"
        else "not a directory (nor a zip or tar archive)"
    )
    assert lines == [f"sif: error: B {bad}: {cause}"]
    assert not (tmp_path / "index").exists()


def test_cli_unusable_index_is_one_line_and_exit_3(tmp_path: Path) -> None:
    a, b = make_trees(tmp_path)
    index = tmp_path / "not-an-index"
    index.mkdir()
    (index / "mine.txt").write_bytes(b"someone else's file\n")
    p = run("compare", a, b, "--index", index, "--format", "json")
    assert p.returncode == 3
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sif: error: ") and str(index) in lines[0]


def test_cli_unreadable_file_is_a_warning_and_exit_1() -> None:
    base = Path(tempfile.mkdtemp(prefix="sif-compare-", dir="/tmp"))
    try:
        os.chmod(base, 0o777)
        a, b = base / "a", base / "b"
        source_tree(a, 3, seed=8)
        shutil.copytree(a, b)
        for p in [a, b, *a.rglob("*"), *b.rglob("*")]:
            os.chown(p, 65534, 65534)  # nobody
        locked = a / "pkg1" / "mod1.py"
        os.chown(locked, 0, 0)
        os.chmod(locked, 0o600)
        drop = [tool("setpriv"), "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        cmd = [*drop, sys.executable, "-m", "sif", "compare", str(a), str(b), "--format", "json"]
        p = subprocess.run(
            [*cmd, "--index", str(base / "index")],
            capture_output=True,
            text=True,
            cwd=base,
            env={**os.environ, "HOME": str(base)},
        )
        assert p.returncode == 1, p.stderr
        warnings = [line for line in p.stderr.splitlines() if line.startswith("sif: warning")]
        assert warnings == [f"sif: warning: {locked}: Permission denied"]
        rec = {r["a"]: r for r in map(json.loads, p.stdout.splitlines()) if r["record"] == "file"}
        assert rec["pkg1/mod1.py"]["status"] == "changed" and rec["pkg1/mod1.py"]["score"] is None
        assert rec["pkg0/mod0.py"]["status"] == "same"
        assert "Traceback" not in p.stderr
    finally:
        shutil.rmtree(base)


# --- invariants -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text("abc/", min_size=1, max_size=6), max_size=8, unique=True),
    st.lists(st.text("abc/", min_size=1, max_size=6), max_size=8, unique=True),
)
def test_pairing_by_name_is_one_to_one_and_complete(a: list[str], b: list[str]) -> None:
    pairs, rest_a, rest_b = _pair_by_name(a, b)
    assert len(pairs) == min(len(a), len(b))
    assert sorted([x for x, _, _ in pairs] + rest_a) == sorted(a)
    assert sorted([y for _, y, _ in pairs] + rest_b) == sorted(b)
    # A name found on both sides is paired with itself.
    assert {(x, x) for x in set(a) & set(b)} <= {(x, y) for x, y, _ in pairs}


@given(st.floats(0, 1), st.floats(0, 1))
def test_direction_only_when_one_is_held_whole(ab: float, ba: float) -> None:
    d = direction(ab, ba)
    assert d in (None, "a-in-b", "b-in-a")
    if d == "a-in-b":
        assert ab >= 0.99 > ba
    if d == "b-in-a":
        assert ba >= 0.99 > ab


def test_a_second_run_hashes_only_what_changed(tmp_path: Path) -> None:
    """Passes 1 and 2 take the index's digests of files it holds unchanged; an edit that
    keeps the size and puts the mtime back is still read (its ctime moved)."""
    a, b = make_trees(tmp_path)
    index = tmp_path / "index"
    first = sif.compare_trees(a, b, index)  # files are left for pass 3: the index is built
    assert first.stats.index is not None and first.stats.files_hashed > 0
    again = sif.compare_trees(a, b, index)
    assert again.files == first.files
    assert again.stats.files_hashed == 0 and again.stats.bytes_hashed == 0
    assert again.stats.files_known > 0
    same = next(f.a for f in first.files if f.status == "same" and (a / f.a).stat().st_size > 8)
    target = b / same
    st = target.stat()
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, same size
    target.write_bytes(bytes(data))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime put back
    third = sif.compare_trees(a, b, index)
    (rec,) = [f for f in third.files if f.a == same]
    assert rec.status == "changed" and rec.pass_no == 1
    assert third.stats.files_hashed >= 1


def test_a_compressed_file_is_never_taken_for_its_indexed_digest(tmp_path: Path) -> None:
    """A .gz is indexed by its decompressed content: two .gz files of equal content but
    other bytes (their headers' times) must not be called the same from the index."""
    import gzip

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    body = text(5, 4000)
    (a / "x.gz").write_bytes(gzip.compress(body, mtime=1))
    (b / "x.gz").write_bytes(gzip.compress(body, mtime=2))  # same size, other bytes
    (a / "only.txt").write_bytes(text(6, 3000))  # something for pass 3: the index is built
    index = tmp_path / "index"
    for _ in range(2):  # the second run has the index's digests at hand
        r = sif.compare_trees(a, b, index)
        (rec,) = [f for f in r.files if f.a == "x.gz"]
        assert rec.status == "changed"
