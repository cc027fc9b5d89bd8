"""sif query: exact copies, tiny files, sizes, the threshold's range (subprocess runs)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from textgen import edited, text
from treeutil import write


def sif(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("q")
    big = text(103, 120_000)  # long enough to be sampled: its copy was estimated at 91%
    write(root / "t/big.txt", big)
    write(root / "t/copy.txt", big)
    write(root / "t/tiny1", b"MIT licence, see COPYING\n")  # 25 bytes: no 50-byte window
    write(root / "t/tiny2", b"MIT licence, see COPYING\n")
    write(root / "t/tiny3", b"BSD licence, see COPYING\n")
    write(root / "t/doc.txt.gz", gzip.compress(text(5, 20_000), mtime=0))
    write(root / "plain.txt", text(5, 20_000))  # not indexed: the query
    assert sif("index", "-q", "--index", root / "idx", root / "t").returncode == 0
    return root


def records(run: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_an_exact_copy_scores_100(indexed: Path) -> None:
    for by in ("similarity", "containment", "percent"):
        run = sif(
            "query",
            "--index",
            indexed / "idx",
            "-t",
            "100",
            "--by",
            by,
            "--format",
            "json",
            indexed / "t/big.txt",
        )
        (r,) = records(run)
        assert r["path"] == str(indexed / "t/copy.txt") and r["exact"] is True
        assert r["similarity"] == 100.0 and r["exact_file_in_query"] == 100.0
        assert r["score"] == 100.0 and r["score_exact"] is True


def test_identical_files_under_the_window_are_matched_by_digest(indexed: Path) -> None:
    run = sif("query", "--index", indexed / "idx", "-t", "100", indexed / "t/tiny1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"R100 {indexed / 't/tiny1'} 25",
        f" 100 {indexed / 't/tiny2'} 25  (exact copy)",
    ]
    (r,) = records(
        sif("query", "--index", indexed / "idx", "--format", "json", indexed / "t/tiny2")
    )
    assert r["path"] == str(indexed / "t/tiny1") and r["exact"] is True and r["percent"] == 100.0


def test_sizes_are_the_files_with_the_content_where_it_differs(indexed: Path) -> None:
    gz = indexed / "t/doc.txt.gz"
    run = sif("query", "--index", indexed / "idx", indexed / "plain.txt")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"R100 {indexed / 'plain.txt'} 20000",
        f" 100 {gz} {gz.stat().st_size} (content 20000)  (exact copy)",
    ]
    run = sif("query", "--index", indexed / "idx", "--format", "json", indexed / "plain.txt")
    (r,) = records(run)
    assert (r["size"], r["content_size"]) == (gz.stat().st_size, 20000)
    run = sif("query", "--index", indexed / "idx", "--format", "csv", indexed / "plain.txt")
    head, row = run.stdout.splitlines()
    assert dict(zip(head.split(","), row.split(","), strict=True))["content_size"] == "20000"


@pytest.mark.parametrize("command", ["query", "similar"])
@pytest.mark.parametrize("value", ["150", "-1"])
def test_a_threshold_outside_0_to_100_is_a_usage_error(
    indexed: Path, command: str, value: str
) -> None:
    run = sif(command, "--index", indexed / "idx", "-t", value, indexed / "t/big.txt")
    assert run.returncode == 2
    assert "-t" in run.stderr and "Traceback" not in run.stderr


def test_the_library_rejects_such_a_threshold_too(indexed: Path) -> None:
    from sif.errors import ConfigError
    from sif.index import open_reader
    from sif.query import query_files

    reader = open_reader(indexed / "idx")
    try:
        with pytest.raises(ConfigError, match=r"0\.\.100"):
            list(query_files([indexed / "t/big.txt"], reader, threshold=150))
    finally:
        reader.close()


CHECK_IMPORTS = """
import sys
from sif.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert exc.code == 0, exc.code
heavy = ["sif.index.build", "sif.exact", "sif.exact.pipeline", "sif.walk", "sif.executors",
         "sif.similar", "sif.index.duck", "duckdb", "multiprocessing", "concurrent.futures",
         "numba", "llvmlite", "rich", "dask", "distributed", "pandas", "pyarrow", "sif.html",
         "sif.compare", "sif.passages", "sif.index.compaction", "sif.index.pairs",
         "sif.normalizers", "csv", "pygments"]
print(" ".join(m for m in heavy if m in sys.modules))
"""


def test_a_query_imports_neither_the_index_builder_nor_the_exact_pipeline(indexed: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            CHECK_IMPORTS,
            "query",
            "--index",
            str(indexed / "idx"),
            str(indexed / "t/big.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"R100 {indexed / 't/big.txt'} 120000"
    assert lines[-1] == ""  # none of them was imported


CHECK_GC = """
import atexit, gc, sys
own = sys.argv.pop(1) == "own"
atexit.register(lambda: print(gc.get_freeze_count() > 0, gc.isenabled(), file=sys.stderr))
from sif.cli import main, run
import sif.cli.query  # the command's module, so that the host's freezing shows
(run if own else main)()  # either reads sys.argv
"""


@pytest.mark.parametrize("own", [True, False])
def test_a_query_freezes_the_gc_only_in_its_own_process(indexed: Path, own: bool) -> None:
    # In `sif query`'s own process the objects its imports made, then all that is
    # left at the end, are frozen (the GC's passes over them cost ~25 ms of a cold
    # query); a host process (a test's CliRunner, a caller of main()) keeps its GC.
    run = subprocess.run(
        [
            *(sys.executable, "-c", CHECK_GC, "own" if own else "host", "query", "--index"),
            *(str(indexed / "idx"), str(indexed / "t/big.txt")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == f"R100 {indexed / 't/big.txt'} 120000"
    assert run.stderr.splitlines()[-1] == f"{own} True"


def recording_shifts(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Any]:
    """The shift of every window set made from now on (0: every window), and the
    function that makes them."""
    from sif.core import exactsets

    shifts: list[int] = []
    real = exactsets.window_set

    def seen(data, window=exactsets.WINDOW, jit=False, shift=0):  # type: ignore[no-untyped-def]
        shifts.append(shift)
        return real(data, window, jit, shift)

    monkeypatch.setattr(exactsets, "window_set", seen)
    return shifts, real


def test_two_large_files_are_scored_on_a_sample_with_an_interval_that_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query and a candidate both large (SAMPLE_FROM lowered: a few KB is large) are
    scored on the window sample sif similar takes: an estimate, its interval holding
    the exact score, the candidate's set made of the sample only; a small candidate
    stays exact. A 100 MB candidate's whole set was 800 MB."""
    from sif.core import exactsets
    from sif.index import build_index, open_reader
    from sif.query import query_files

    monkeypatch.setattr(exactsets, "SAMPLE_FROM", 1024)
    base = text(21, 60_000)
    changed = edited(base, 4, 300)  # about 85% alike
    write(tmp_path / "t/edited.txt", changed)
    write(tmp_path / "t/piece.txt", base[20_000:21_500])  # under the sample: exact
    build_index([tmp_path / "t"], tmp_path / "idx")
    write(tmp_path / "q.txt", base)
    shifts, real = recording_shifts(monkeypatch)
    [res] = query_files([tmp_path / "q.txt"], open_reader(tmp_path / "idx"), threshold=1)
    by = {Path(m.path).name: m for m in res.matches}
    big, piece = by["edited.txt"], by["piece.txt"]
    assert not big.scored_exactly and big.score_low is not None and big.score_high is not None
    whole_q = real(np.frombuffer(base, np.uint8))
    whole_b = real(np.frombuffer(changed, np.uint8))
    exact_qb, _ = exactsets.containment(whole_q, whole_b)
    assert big.score_low <= 100 * exact_qb <= big.score_high
    assert abs(big.score("similarity") - 100 * exact_qb) < 3
    assert piece.scored_exactly and piece.exact_file_in_query == 1.0
    assert max(shifts) >= 4  # the large candidate's set: a sample of 1/16 or sparser


def test_a_sampled_similarity_has_the_interval_of_the_query_s_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The similarity is a share of the query's sample: its interval is that sample's,
    also when the candidate (here a quarter of the query) holds fewer values."""
    from sif.core import exactsets
    from sif.core.evidence import INTERVAL_Z, share_bounds
    from sif.index import build_index, open_reader
    from sif.query import query_files

    monkeypatch.setattr(exactsets, "SAMPLE_FROM", 1024)
    base = text(22, 80_000)
    write(tmp_path / "t/part.txt", base[:20_000])
    build_index([tmp_path / "t"], tmp_path / "idx")
    write(tmp_path / "q.txt", base)
    shifts, real = recording_shifts(monkeypatch)
    [res] = query_files([tmp_path / "q.txt"], open_reader(tmp_path / "idx"), threshold=1)
    [m] = res.matches
    assert not m.scored_exactly and max(shifts) > 0
    n_q = len(exactsets.sampled(real(np.frombuffer(base, np.uint8)), max(shifts)))
    lo, hi = share_bounds(m.query_in_file, n_q, INTERVAL_Z)
    assert (m.score_low, m.score_high) == pytest.approx((float(lo), float(hi)))
    assert 20 < m.score("similarity") < 30
