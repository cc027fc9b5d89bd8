"""``sif similar --exact``: a known exact score always decides."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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
    exact = run(50, exact=True)
    assert names(exact) == {("a.txt", "b.txt")}
    assert exact.stats.exact_pairs == 0  # type: ignore[attr-defined]  # nothing to score again
    # --fast stores pairs of its own (no small-file pass, nothing read again): it has
    # only the estimate, under -t 50.
    assert names(run(50, exact=False)) == set()


def test_identical_files_under_the_window_are_reported_as_exact_copies(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    write(tmp_path / "t/x/__init__.py", b"from .core import run\n")  # 22 bytes
    write(tmp_path / "t/y/__init__.py", b"from .core import run\n")
    write(tmp_path / "t/z/__init__.py", b"from .core import walk\n")  # same size as none
    write(tmp_path / "t/w/__init__.py", b"from .core import ran\n")  # same size, not alike
    result = find_similar([tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(), jobs=1)
    (p,) = result.pairs
    assert {p.a.path, p.b.path} == {str(tmp_path / f"t/{d}/__init__.py") for d in "xy"}
    assert p.identical and p.score == 100.0 and p.exact_a_in_b == p.exact_b_in_a == 1.0
    # Stored with the counts: a re-threshold at 100 reuses and keeps it.
    again = find_similar(
        [tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(threshold=100), jobs=1
    )
    assert again.stats.reused and again.pairs == result.pairs
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sif",
            "similar",
            "-q",
            "--index",
            str(tmp_path / "idx"),
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1:] == [
        "",
        f"R100 {tmp_path / 't/x/__init__.py'} 22",
        f" 100 {tmp_path / 't/y/__init__.py'} 22  (exact copy)",
    ]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sif",
            "similar",
            "-q",
            "--format",
            "json",
            "--index",
            str(tmp_path / "idx"),
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
    )
    (record,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert record["identical"] is True and record["score"] == 100.0


def test_more_identical_tiny_files_than_max_df_pair_none(tmp_path: Path) -> None:
    for i in range(4):
        write(tmp_path / f"t/{i}/__init__.py", b"# package\n")
    three = find_similar([tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(max_df=3))
    four = find_similar([tmp_path / "t"], tmp_path / "idx", options=SimilarOptions(max_df=4))
    assert three.pairs == () and len(four.pairs) == 6


def test_the_exact_pass_and_the_decision_in_slices_score_as_in_one(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Families of files sharing passages, so that several larger files have partners;
    # slices of 2 pairs (cut only between larger files) must give the same scores.
    from sif.similar import exact as exact_mod

    for fam in range(4):
        base = text(10 + fam, 3000)
        for k in range(4):
            write(tmp_path / f"t/f{fam}/m{k}.txt", base[: 1500 + 400 * k] + text(50 + k, 500))

    def run(index: str) -> list[tuple[str, str, float | None, float | None]]:
        opts = SimilarOptions(threshold=10)
        r = find_similar([tmp_path / "t"], tmp_path / index, options=opts, jobs=1)
        return [(p.a.path, p.b.path, p.exact_a_in_b, p.exact_b_in_a) for p in r.pairs]

    whole = run("idx1")
    monkeypatch.setattr(exact_mod, "EXACT_SLICE_PAIRS", 2)
    cut = exact_mod._slices
    seen: list[int] = []
    monkeypatch.setattr(exact_mod, "_slices", lambda *a: seen.append(len(s := cut(*a))) or s)
    sliced = run("idx2")
    assert len(whole) >= 16 and all(x[2] is not None for x in whole)
    assert seen and seen[0] >= 4  # four families: four larger files at least
    assert sliced == whole
    # and the decision over the collated pairs, three at a time
    from sif.similar import score as score_mod

    monkeypatch.setattr(score_mod, "SCORE_SLICE", 3)
    assert run("idx3") == whole


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=60),
    st.lists(st.integers(0, 5), min_size=10, max_size=10),
    st.integers(1, 8),
)
def test_exact_slices_cover_every_pair_once_by_runs_of_larger_files(
    pairs: list[tuple[int, int]], sizes: list[int], slice_pairs: int
) -> None:
    # The histogram cut of the exact pass: every pair in one slice, all pairs of a larger
    # file in one slice, the slices runs of larger files in the tree's order or in the
    # clusters' order (cluster_rank), each about the slice's size (one more larger file's
    # pairs at most).
    from sif.similar import exact as exact_mod

    files = {"size": np.asarray(sizes, dtype=np.int64)}
    ia = np.asarray([p[0] for p in pairs], dtype=np.int32)
    ib = np.asarray([p[1] for p in pairs], dtype=np.int32)
    for rank in (None, exact_mod.cluster_rank(len(sizes), ia, ib)):
        _check_slices(exact_mod, files, ia, ib, slice_pairs, rank)


def _check_slices(
    exact_mod: Any, files: Any, ia: Any, ib: Any, slice_pairs: int, rank: Any
) -> None:
    old = exact_mod.EXACT_SLICE_PAIRS
    exact_mod.EXACT_SLICE_PAIRS = slice_pairs
    try:
        parts = exact_mod._slices(ia, ib, files, rank)
    finally:
        exact_mod.EXACT_SLICE_PAIRS = old
    got = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    assert sorted(got.tolist()) == list(range(len(ia)))
    _, big, _ = exact_mod._larger(ia, ib, files)
    if rank is not None:
        big = rank[big]
    spans = [(int(big[p].min()), int(big[p].max())) for p in parts if len(p)]
    for (_, hi), (lo, _) in itertools.pairwise(spans):
        assert hi < lo  # runs of larger files, in order, none in two slices
    for p in parts:
        most = int(np.bincount(big[p]).max()) if len(p) else 0
        assert len(p) < slice_pairs + most  # about the slice's size


@settings(max_examples=100, deadline=None)
@given(
    st.sets(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=50),
    st.sets(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=50),
    st.integers(1, 7),
)
def test_small_pass_candidates_known_as_collated_pairs(
    collated: set[tuple[int, int]], found: set[tuple[int, int]], slice_pairs: int
) -> None:
    from sif.similar import smallpass

    cols = {
        "a": np.asarray([p[0] for p in collated], dtype=np.uint32),
        "b": np.asarray([p[1] for p in collated], dtype=np.uint32),
    }
    key = np.unique(np.asarray([(a << 32) | b for a, b in found], dtype=np.uint64))
    old = smallpass.KNOWN_SLICE
    smallpass.KNOWN_SLICE = slice_pairs
    try:
        known = smallpass._known(key, cols)
    finally:
        smallpass.KNOWN_SLICE = old
    expect = [((int(k) >> 32), int(k) & 0xFFFFFFFF) in collated for k in key]
    assert known.tolist() == expect


#: ``n`` nodes and up to 60 edges (or pairs) between them.
_GRAPHS = st.integers(1, 30).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60),
    )
)


def _components_by_search(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Each node's component, named by its lowest node: a plain search, the reference."""
    near: dict[int, set[int]] = {i: set() for i in range(n)}
    for x, y in edges:
        near[x].add(y)
        near[y].add(x)
    out = [-1] * n
    for start in range(n):
        if out[start] >= 0:
            continue
        seen, todo = {start}, [start]
        while todo:
            for y in near[todo.pop()] - seen:
                seen.add(y)
                todo.append(y)
        for v in seen:
            out[v] = start  # the lowest: nodes are met in order
    return out


@settings(max_examples=200, deadline=None)
@given(_GRAPHS)
def test_components_are_those_of_a_plain_search(case: tuple[int, list[tuple[int, int]]]) -> None:
    from sif.similar.exact import components

    n, edges = case
    x = np.asarray([e[0] for e in edges], dtype=np.int64)
    y = np.asarray([e[1] for e in edges], dtype=np.int64)
    assert components(n, x, y).tolist() == _components_by_search(n, edges)


@settings(max_examples=200, deadline=None)
@given(_GRAPHS)
def test_cluster_rank_puts_each_cluster_together_in_the_trees_order(
    case: tuple[int, list[tuple[int, int]]],
) -> None:
    # A cluster: the files linked, each to its partner of the lowest row. The rank is a
    # permutation; each cluster is a run of it, the files of a run in row order.
    from sif.similar.exact import cluster_rank

    n, pairs = case
    ia = np.asarray([p[0] for p in pairs], dtype=np.int32)
    ib = np.asarray([p[1] for p in pairs], dtype=np.int32)
    rank = cluster_rank(n, ia, ib).tolist()
    assert sorted(rank) == list(range(n))
    lowest = {}
    for a, b in pairs:
        lowest[a] = min(lowest.get(a, n), b)
        lowest[b] = min(lowest.get(b, n), a)
    cluster = _components_by_search(n, list(lowest.items()))
    by_rank = sorted(range(n), key=rank.__getitem__)
    runs = [c for c, _ in itertools.groupby(cluster[f] for f in by_rank)]
    assert len(runs) == len(set(runs))  # each cluster one run
    for f, g in itertools.pairwise(by_rank):
        if cluster[f] == cluster[g]:
            assert f < g


def test_the_exact_pass_reads_a_family_spread_over_the_tree_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Four families of edited copies, their files interleaved in the tree (file k of
    # directory order in family k % 4). With slices of one family's pairs and one chunk a
    # slice, the pass reads each file once: in the tree's order alone, a slice held
    # larger files of every family and read their partners again in each.
    from sif.similar import exact as exact_mod

    for k in range(16):
        fam = k % 4
        base = text(100 + fam, 4000)
        write(tmp_path / f"t/d{k:02d}/m.txt", base[: 2000 + 400 * (k // 4)] + text(200 + k, 300))
    monkeypatch.setattr(exact_mod, "EXACT_SLICE_PAIRS", 6)
    monkeypatch.setattr(exact_mod, "EXACT_CHUNKS_PER_JOB", 1)

    def run(index: str) -> tuple[int, list[tuple[str, str, float | None]]]:
        r = find_similar(
            [tmp_path / "t"], tmp_path / index, options=SimilarOptions(threshold=10), jobs=1
        )
        return r.stats.exact_files_read, [(p.a.path, p.b.path, p.exact_a_in_b) for p in r.pairs]

    reads, pairs = run("idx1")
    assert len(pairs) == 24 and all(p[2] is not None for p in pairs)  # 4 families, 6 pairs
    assert reads == 16
    monkeypatch.setattr(exact_mod, "cluster_rank", lambda n, ia, ib: np.arange(n))
    tree_reads, tree_pairs = run("idx2")
    assert tree_pairs == pairs and tree_reads > reads
