"""What ``sif similar`` keeps in the index, and which files a run's filters put in scope."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sif.similar import SimilarOptions, find_similar
from sif.walk import WalkOptions
from textgen import text
from treeutil import write


def sif(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def tree(root: Path) -> None:
    body = text(1, 6000)
    write(root / "src/a.c", body + text(2, 500))
    write(root / "src/b.c", body + text(3, 500))
    write(root / "src/a.h", text(4, 3000))
    write(root / "src/b.h", text(4, 3000) + text(5, 200))


def test_a_filtered_run_keeps_the_filtered_files_in_the_index(tmp_path: Path) -> None:
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    assert sif("index", "-q", "--index", idx, tmp_path / "t").returncode == 0
    run = sif(
        "similar", "-q", "--index", idx, "--exclude", "*.h", "--format", "json", tmp_path / "t"
    )
    assert run.returncode == 0, run.stderr
    pairs = [json.loads(line) for line in run.stdout.splitlines()]
    # The run's scope is narrowed: the .h pair is not reported...
    assert {(os.path.basename(p["a"]), os.path.basename(p["b"])) for p in pairs} == {("a.c", "b.c")}
    # ... but the .h files are still indexed: a query finds them.
    q = sif("query", "--index", idx, "--format", "json", tmp_path / "t/src/b.h")
    assert q.returncode == 0, q.stderr
    assert [os.path.basename(json.loads(x)["path"]) for x in q.stdout.splitlines()] == ["a.h"]
    # and a run without the filter reads nothing again and pairs them.
    full = sif("similar", "--index", idx, "--format", "json", tmp_path / "t")
    assert full.returncode == 0, full.stderr
    assert "0 files read" in full.stderr
    assert len(full.stdout.splitlines()) == 2


def test_only_files_gone_from_disk_or_changed_leave_the_index(tmp_path: Path) -> None:
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    opts = SimilarOptions(threshold=25)
    first = find_similar([tmp_path / "t"], idx, options=opts, jobs=1)
    assert len(first.pairs) == 2
    os.unlink(tmp_path / "t/src/b.c")  # gone: it leaves, filtered or not
    write(tmp_path / "t/src/b.h", text(9, 3000))  # changed while out of scope: stale, it leaves
    walk = WalkOptions(include=("a.*",))
    narrowed = find_similar([tmp_path / "t"], idx, options=opts, walk=walk, jobs=1)
    assert narrowed.pairs == () and narrowed.stats.files == 2
    assert narrowed.stats.index is not None and narrowed.stats.index.removed == 2
    again = find_similar([tmp_path / "t"], idx, options=opts, jobs=1)
    assert again.stats.index is not None
    assert again.stats.index.read_paths == [str(tmp_path / "t/src/b.h")]  # a.c, a.h kept
    assert again.pairs == ()
