"""Pair counts stored in the index: what makes them stale."""

from __future__ import annotations

from pathlib import Path

import pytest

import sif.similar.run
from sif.similar import SimilarOptions, find_similar
from textgen import text
from treeutil import write


def test_stored_pairs_of_other_scoring_rules_are_collated_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = text(1, 5000)
    write(tmp_path / "t/a.txt", body + text(2, 800))
    write(tmp_path / "t/b.txt", body + text(3, 800))

    def run() -> object:
        return find_similar([tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(), jobs=1)

    first = run()
    assert not first.stats.reused  # type: ignore[attr-defined]
    assert run().stats.reused  # type: ignore[attr-defined]
    monkeypatch.setattr(sif.similar.run, "RULES_VERSION", sif.similar.run.RULES_VERSION + 1)
    newer = run()
    assert not newer.stats.reused and newer.stats.fingerprints > 0  # type: ignore[attr-defined]
    assert newer.pairs == first.pairs  # type: ignore[attr-defined]
    assert run().stats.reused  # type: ignore[attr-defined]  # stored again, under the new rules


def test_a_memory_limit_too_small_is_one_clear_line_and_a_small_one_still_collates(
    tmp_path: Path,
) -> None:
    import json
    import subprocess
    import sys

    # 20 families of 15 versions of a 6 KB text: 2,100 pairs, ~33k fingerprint rows.
    for f in range(20):
        body = text(500 + f, 6000)
        for v in range(15):
            cut = (v * 397) % 5000
            write(
                tmp_path / f"t/{f}/{v}.txt",
                body[:cut] + text(10_000 + 100 * f + v, 600) + body[cut:],
            )

    def similar(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "sif",
                "similar",
                "-q",
                "-j",
                "2",
                "--format",
                "json",
                "--index",
                str(tmp_path / "idx"),
                *args,
                str(tmp_path / "t"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )

    full = similar()
    assert full.returncode == 0, full.stderr
    want = sorted((r["a"], r["b"]) for r in map(json.loads, full.stdout.splitlines()))
    assert len(want) == 20 * 15 * 14 // 2
    # --max-df changes the run key: each run collates again, under its limit.
    small = similar("--memory-limit", "16MB", "--max-df", "99")
    assert small.returncode == 0, small.stderr
    assert sorted((r["a"], r["b"]) for r in map(json.loads, small.stdout.splitlines())) == want
    tiny = similar("--memory-limit", "1MB", "--max-df", "98")
    assert tiny.returncode == 3
    assert tiny.stderr.count("\n") == 1 and "Traceback" not in tiny.stderr
    assert "out of memory" in tiny.stderr and "raise --memory-limit" in tiny.stderr
