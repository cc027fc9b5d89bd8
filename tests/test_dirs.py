"""``sif similar --dirs`` and ``sif dupes --dirs``: directories by content, in one tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sif
from corpus import source, source_tree
from sif.compare.dirs import identical_directories, similar_directories


def two_releases(root: Path) -> Path:
    """``proj-1.0``, ``proj-1.1`` (a few files edited, one added, one removed) and an
    unrelated package ``other-2.0``, side by side under ``root/src``."""
    top = root / "src"
    old = top / "proj-1.0"
    source_tree(old, 20, seed=21)
    new = top / "proj-1.1"
    shutil.copytree(old, new)
    for name in ("pkg2/mod2.py", "pkg5/mod5.py", "pkg9/mod9.py"):
        p = new / name
        data = p.read_bytes()
        p.write_bytes(data[:800] + b"    log.debug('here')\n" + data[800:])
    (new / "pkg3" / "mod3.py").unlink()
    (new / "pkg3" / "feature.py").write_bytes(source(4321, 4000))
    source_tree(top / "other-2.0", 12, seed=77)
    return top


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return two_releases(tmp_path_factory.mktemp("dirs"))


def test_two_releases_pair_once_and_the_other_package_with_nothing(
    releases: Path, tmp_path: Path
) -> None:
    result = sif.find_similar([releases], tmp_path / "index", options=sif.SimilarOptions(50))
    pairs = similar_directories(result.pairs, [releases], 50)
    old, new = str(releases / "proj-1.0"), str(releases / "proj-1.1")
    assert [(p.a, p.b) for p in pairs] == [(old, new)]
    p = pairs[0]
    assert 0.85 < p.a_in_b < 1 and 0.85 < p.b_in_a < 1
    assert p.files_a == 20 and p.files_b == 20
    assert p.bytes_a == sum(f.stat().st_size for f in Path(old).rglob("*.py"))


def test_cli_similar_dirs_json(releases: Path, tmp_path: Path) -> None:
    p = run(
        "similar",
        "--dirs",
        "-t",
        "50",
        releases,
        "--index",
        tmp_path / "index",
        "-q",
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["a"], r["b"]) for r in rows] == [
        (str(releases / "proj-1.0"), str(releases / "proj-1.1"))
    ]
    text = run("similar", "--dirs", "-t", "50", releases, "--index", tmp_path / "index", "-q")
    assert text.returncode == 0 and "proj-1.0/" in text.stdout and "other-2.0" not in text.stdout


def identical_tree(root: Path) -> Path:
    """``a`` and its copy ``b``; ``c``, the copy with every file renamed; ``d`` differs."""
    top = root / "t"
    source_tree(top / "a", 8, seed=5)
    shutil.copytree(top / "a", top / "b")
    shutil.copytree(top / "a", top / "c")
    for d, _, names in os.walk(top / "c"):
        for n in names:
            os.rename(os.path.join(d, n), os.path.join(d, "renamed_" + n))
    shutil.copytree(top / "a", top / "d")
    (top / "d" / "pkg0" / "extra.py").write_bytes(source(55, 3000))
    return top


def test_identical_directories_with_and_without_names(tmp_path: Path) -> None:
    top = identical_tree(tmp_path)
    groups = list(sif.find_duplicates([str(top)]))
    found = identical_directories([str(top)], groups)
    # a, b and c hold the same content; d holds more; their subdirectories are not
    # repeated, but those of d that equal theirs are shown once with one of them.
    assert found[0].paths == tuple(str(top / x) for x in "abc")
    rest = {g.paths for g in found[1:]}
    assert rest == {(str(top / "a" / f"pkg{i}"), str(top / "d" / f"pkg{i}")) for i in range(1, 8)}
    assert found[0].files == 8
    named = identical_directories([str(top)], groups, match_names=True)
    assert named[0].paths == (str(top / "a"), str(top / "b"))
    assert all(str(top / "c") not in p for g in named for p in g.paths)


def test_cli_dupes_dirs(tmp_path: Path) -> None:
    top = identical_tree(tmp_path)
    p = run("dupes", "--dirs", "--match-names", top, "--format", "json", "-q")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert rows[0]["paths"] == [str(top / "a"), str(top / "b")] and len(rows) == 8
    bad = run("dupes", "--match-names", top)
    assert bad.returncode == 2 and "--match-names goes with --dirs" in bad.stderr
