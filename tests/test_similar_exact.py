"""``sif similar --exact``: a known exact score always decides."""

from __future__ import annotations

import os
from pathlib import Path

from sif.similar import SimilarOptions, find_similar
from textgen import text
from treeutil import write


def names(result: object) -> set[tuple[str, str]]:
    return {
        (os.path.basename(p.a.path), os.path.basename(p.b.path))
        for p in result.pairs  # type: ignore[attr-defined]
    }


def test_exact_keeps_a_pair_whose_stored_exact_score_passes_and_estimate_does_not(
    tmp_path: Path,
) -> None:
    # a and b share a boilerplate passage that c holds too: with max_df = 2 its
    # fingerprints are stop-fingerprints, so the estimate of (a, b) counts only the
    # passage x they alone share (about 12%), while the exact score is about 90%.
    boiler, x = text(1, 9000), text(2, 1500)
    write(tmp_path / "t/a.txt", boiler + x + text(3, 1000))
    write(tmp_path / "t/b.txt", boiler + x + text(4, 1000))
    write(tmp_path / "t/c.txt", boiler + text(5, 1000))

    def run(t: float, exact: bool) -> object:
        opts = SimilarOptions(threshold=t, max_df=2, exact=exact)
        return find_similar([tmp_path / "t"], tmp_path / "idx", options=opts, jobs=1)

    low = run(8, exact=True)  # candidates from 4%: (a, b) is scored exactly and stored
    (p,) = low.pairs  # type: ignore[attr-defined]
    assert p.exact_a_in_b is not None and p.score > 80
    assert 100 * max(p.a_in_b, p.b_in_a) < 25  # the estimate: under half of -t 50 below
    default = run(50, exact=False)
    exact = run(50, exact=True)
    assert names(default) == {("a.txt", "b.txt")}
    assert names(exact) == names(default)
    assert exact.stats.exact_pairs == 0  # type: ignore[attr-defined]  # nothing to score again
