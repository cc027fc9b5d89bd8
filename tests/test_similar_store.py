"""Pair counts stored in the index: what makes them stale."""

from __future__ import annotations

from pathlib import Path

import pytest

import sif.similar
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
    monkeypatch.setattr(sif.similar, "RULES_VERSION", sif.similar.RULES_VERSION + 1)
    newer = run()
    assert not newer.stats.reused and newer.stats.fingerprints > 0  # type: ignore[attr-defined]
    assert newer.pairs == first.pairs  # type: ignore[attr-defined]
    assert run().stats.reused  # type: ignore[attr-defined]  # stored again, under the new rules
