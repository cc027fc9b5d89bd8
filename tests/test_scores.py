"""Scores a user can believe: exact by default, estimates with their evidence (issue 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core.evidence import CANDIDATE_Z, INTERVAL_Z, poisson_bounds, score_bounds
from sif.core.exactsets import (
    IndexedSet,
    intersection_size,
    intersection_size_jit,
    window_set,
    window_set_jit,
)
from textgen import text

SPDX = b"// SPDX-License-Identifier: GPL-2.0-or-later\n#include <linux/error-injection.h>\n"


def sif(*args: object, check: bool = True) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True
    )
    if check:
        assert run.returncode in (0, 1), run.stderr
    return run


def records(run: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(x) for x in run.stdout.splitlines()]


def truth(a: bytes, b: bytes) -> float:
    """max(C(A,B), C(B,A)) in percent, from the sets of 50-byte substrings themselves."""
    sa = {a[i : i + 50] for i in range(len(a) - 49)}
    sb = {b[i : i + 50] for i in range(len(b) - 49)}
    inter = len(sa & sb)
    return 100.0 * max(inter / len(sa), inter / len(sb))


# --- the exact sets: numpy and numba forms agree with the substrings -----------------


@settings(max_examples=60, deadline=None)
@given(
    st.binary(min_size=0, max_size=400),
    st.binary(min_size=0, max_size=400),
    st.integers(0, 300),
)
def test_exact_sets_agree_with_substring_sets(a: bytes, b: bytes, cut: int) -> None:
    b = b + a[cut:]  # share a tail, often
    sa, sb = window_set(a), window_set(b)
    assert len(sa) == len({a[i : i + 50] for i in range(len(a) - 49)})
    ja = window_set_jit(np.frombuffer(a, np.uint8)) if len(a) >= 50 else sa
    assert np.array_equal(sa, ja)
    want = len(
        {a[i : i + 50] for i in range(len(a) - 49)} & {b[i : i + 50] for i in range(len(b) - 49)}
    )
    assert intersection_size(sa, sb) == want
    assert intersection_size_jit(sa, sb) == want
    if len(sb):
        assert IndexedSet(sb).shared(sa) == want


def test_galloping_and_indexed_lookups_on_unequal_sets() -> None:
    big = text(1, 200_000)
    small = big[150_000:151_000] + text(2, 1000)
    sb, ss = window_set(big), window_set(small)
    want = intersection_size(sb, ss)
    assert want == 951  # the 1,000 shared bytes: 951 windows
    assert intersection_size_jit(sb, ss) == intersection_size_jit(ss, sb) == want
    assert IndexedSet(sb).shared(ss) == want


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2**32))
def test_indexed_set_bitmap_keeps_every_member_and_turns_away_most_others(
    n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    s = np.unique(rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64))
    ix = IndexedSet(s)
    assert ix.shared(s) == len(s)  # no member is ever turned away
    others = np.setdiff1d(rng.integers(-(2**63), 2**63 - 1, size=4000, dtype=np.int64), s)
    assert ix.shared(others) == 0
    # The filter's own test (two bits of one word a value), by numpy: no false negative,
    # and few absent values get past it.
    shift = np.uint64(64 - ix.fbits)
    one = np.uint64(1)

    def passes(v: np.ndarray) -> np.ndarray:
        u = v.view(np.uint64) ^ np.uint64(1 << 63)
        k = u >> shift
        second = (u >> (shift - np.uint64(6))) & np.uint64(63)
        mask = (one << (k & np.uint64(63))) | (one << second)
        return (ix.filter[(k >> np.uint64(6)).astype(np.int64)] & mask) == mask

    assert passes(s).all()
    if len(s) >= 64:  # 8-16 bits a member, two of them set: about 2-6% of absent values pass
        assert passes(others).mean() < 0.1


# --- evidence -----------------------------------------------------------------------


def test_one_shared_fingerprint_is_never_a_believable_score() -> None:
    low, high = score_bounds(np.array([1.0]), np.array([100.0]), INTERVAL_Z)
    assert low[0] < 12.5 and high[0] == 100.0  # under half of -t 25: --fast drops it
    lo, hi = poisson_bounds(np.array([0, 1, 4, 100]), 1.2816)
    # Garwood's exact 90% bounds: (0, 2.30), (0.105, 3.89), (1.74, 7.99), (87.4, 114.1)
    assert lo == pytest.approx([0, 0.105, 1.74, 87.42], abs=0.01)
    assert hi == pytest.approx([2.30, 3.89, 7.99, 114.07], rel=0.01)
    # The candidates' bound is wider than the interval shown.
    assert score_bounds([3], [30], CANDIDATE_Z)[1][0] > score_bounds([3], [30], INTERVAL_Z)[1][0]


def _kernel_like(root: Path) -> tuple[list[Path], list[Path]]:
    """Large files and small ones that share with them only a licence line and an include.

    As ``arch/csky/lib/error-inject.c`` and ``fs/btrfs/disk-io.c`` in Linux: a
    large file's sparse fingerprints fall in the shared line now and then, and
    then a small file's estimate rests on that one fingerprint.
    """
    bigs, smalls = [], []
    for i in range(30):
        p = root / f"fs/f{i}/disk-io.c"
        p.parent.mkdir(parents=True)
        p.write_bytes(SPDX + text(100 + i, 20_000))
        bigs.append(p)
    for i in range(12):
        p = root / f"arch/a{i}/error-inject.c"
        p.parent.mkdir(parents=True)
        p.write_bytes(SPDX + text(200 + i, 300))
        smalls.append(p)
    return bigs, smalls


def test_a_shared_licence_line_does_not_make_files_similar(tmp_path: Path) -> None:
    bigs, smalls = _kernel_like(tmp_path / "t")
    names = {str(p) for p in bigs + smalls}
    idx = tmp_path / "idx"
    # Every pair sharing a fingerprint, scored exactly (-t 0): the licence line makes
    # pairs of a small and a large file resting on one fingerprint, estimated high.
    every = records(sif("similar", "--index", idx, "-t", "0", "--format", "json", tmp_path / "t"))
    one = [r for r in every if r["shared"] == 1 and {r["a"], r["b"]} <= names]
    assert one, "the fixture must make pairs through the licence line"
    assert max(max(r["estimate_a_in_b"], r["estimate_b_in_a"]) for r in one) >= 50
    for r in one:
        a, b = Path(str(r["a"])).read_bytes(), Path(str(r["b"])).read_bytes()
        assert r["score_exact"] is True and r["score"] == pytest.approx(truth(a, b), abs=0.01)
        assert r["score"] < 25
    # -t 25 drops them, under --fast (the evidence rule) and by default (exact scores).
    for extra in (["--fast"], []):
        run = sif("similar", *extra, "--index", idx, "-t", "25", "--format", "json", tmp_path / "t")
        assert [r for r in records(run) if r["shared"] <= 1] == []


def _header_with_a_fingerprint(body: bytes) -> bytes:
    """A schema header whose windows hold one of the fingerprints of ``header + body``.

    Which window winnowing keeps depends on its neighbours, so a header line
    shared by two files yields a shared fingerprint in some files only: the
    first maintainer line (of a fixed list) that does.
    """
    import dataclasses

    from sif.fingerprint import fingerprint
    from sif.index.build import DEFAULT_PARAMS

    every = dataclasses.replace(DEFAULT_PARAMS, winnow_window=1, min_fingerprints=0)
    for j in range(200):
        header = (
            b"%YAML 1.2\n---\n$schema: http://devicetree.org/meta-schemas/core.yaml#\n"
            + f"maintainers:\n  - Maintainer {j} <m{j}@kernel.org>\n".encode()
        )
        kept = set(fingerprint(header + body, DEFAULT_PARAMS).tolist())
        if kept & set(fingerprint(header, every).tolist()):
            return header
    raise AssertionError("no header of the list yields a shared fingerprint")


def test_a_small_yaml_file_gets_its_exact_score_in_a_query(tmp_path: Path) -> None:
    """As ``power-supply.yaml`` (549 B) against ``ethernet-controller.yaml``: 75 estimated
    from 2 shared fingerprints, 11.8 exact. Schemas share their header lines."""
    body = text(300, 9_000)
    header = _header_with_a_fingerprint(body)
    tree = tmp_path / "t"
    tree.mkdir()
    big = tree / "ethernet-controller.yaml"
    big.write_bytes(header + body)
    query = tmp_path / "power-supply.yaml"
    query.write_bytes(header + text(299, 420))
    want = truth(query.read_bytes(), big.read_bytes())
    assert 5 < want < 25
    idx = tmp_path / "idx"
    sif("index", "--index", idx, tree)
    args = ["query", "--index", idx, "--by", "containment", "--format", "json"]
    (r,) = records(sif(*args, "-t", "1", query))
    assert r["score_exact"] is True and r["score"] == pytest.approx(want, abs=0.01)
    assert float(r["estimate_query_in_file"]) > 25  # what the estimate said
    assert records(sif(*args, "-t", "25", query)) == []
    # --fast: the estimate rests on one fingerprint: not enough evidence at -t 25.
    assert records(sif(*args, "-t", "25", "--fast", "--min-shared", "1", query)) == []


def test_a_file_changed_since_it_was_indexed_keeps_a_marked_estimate(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    body = text(400, 20_000)
    (tree / "a.txt").write_bytes(body)
    q = tmp_path / "q.txt"
    q.write_bytes(body[:15_000] + text(401, 5_000))
    idx = tmp_path / "idx"
    sif("index", "--index", idx, tree)
    (r,) = records(sif("query", "--index", idx, "-t", "10", "--format", "json", q))
    assert r["score_exact"] is True and r["score"] == pytest.approx(
        truth(q.read_bytes(), body), abs=0.01
    )
    # The same bytes reversed in halves: same size, other content; the index is stale.
    (tree / "a.txt").write_bytes(body[10_000:] + body[:10_000])
    run = sif("query", "--index", idx, "-t", "10", "--format", "json", q)
    (r,) = records(run)
    assert r["score_exact"] is False and r["score_low"] is not None and r["score_high"] is not None
    assert r["score_low"] <= r["score"] <= r["score_high"]
    text_run = sif("query", "--index", idx, "-t", "10", q)
    (line,) = [x for x in text_run.stdout.splitlines() if "a.txt" in x]
    assert line.startswith("~") and "(estimate, 90%:" in line


def test_text_report_shows_the_score_compared_with_the_threshold(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    base = text(500, 30_000)
    (tree / "a.txt").write_bytes(base)
    (tree / "b.txt").write_bytes(base[:12_000] + text(501, 18_000))  # 40% of a, 40% of b
    (tree / "c.txt").write_bytes(base + base[:5_000])  # holds all of a, repeated
    idx = tmp_path / "idx"
    pairs = records(sif("similar", "--index", idx, "--format", "json", tree))
    scores = {
        frozenset((os.path.basename(str(r["a"])), os.path.basename(str(r["b"])))): r for r in pairs
    }
    for r in pairs:
        assert r["score_exact"] is True
        assert r["score"] == max(r["exact_a_in_b"], r["exact_b_in_a"])  # percent, both
    run = sif("similar", "--index", idx, tree)
    lines = run.stdout.splitlines()
    ref = None
    for line in lines[1:]:
        if line.startswith("R100 "):
            ref = os.path.basename(line.split()[1])
        elif line.strip():
            figure, path = line.split()[:2]
            r = scores[frozenset((ref, os.path.basename(path)))]
            assert int(figure) == round(float(r["score"]))  # the score, not the paper's %
    run = sif("similar", "--index", idx, "--by", "percent", tree)
    assert "(the paper's percentages shown)" in run.stdout.splitlines()[0]
    figures = [
        line.split()[0] for line in run.stdout.splitlines()[1:] if line and not line.startswith("R")
    ]
    percents = {
        str(round(float(r[k]))) for r in pairs for k in ("percent_a_in_b", "percent_b_in_a")
    }
    assert set(figures) <= percents


def test_exact_is_the_default_and_fast_excludes_it(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    tree.mkdir()
    base = text(600, 8_000)
    (tree / "a.txt").write_bytes(base)
    (tree / "b.txt").write_bytes(base[:4_000] + text(601, 4_000))
    idx = tmp_path / "idx"
    default = sif("similar", "--index", idx, "--format", "json", tree).stdout
    assert (
        default
        and default == sif("similar", "--exact", "--index", idx, "--format", "json", tree).stdout
    )
    both = sif("similar", "--fast", "--exact", "--index", idx, tree, check=False)
    assert both.returncode == 2 and "exclude each other" in both.stderr


def test_window_sets_refuse_content_that_is_not_the_indexed_one(tmp_path: Path) -> None:
    """A file changed since it was indexed gives no set (its pairs keep their estimate)."""
    import blake3

    from sif.events import ScanWarning
    from sif.windowsets import WindowSets

    f = tmp_path / "a.txt"
    f.write_bytes(text(700, 3_000))
    digest = blake3.blake3(f.read_bytes()).digest()
    warnings: list[ScanWarning] = []
    sets = WindowSets(50, 1 << 20, "auto", {1: digest, 2: digest}, warnings.append, jit=False)
    src = (str(f), str(f), "raw")
    got = sets.get(1, src)
    assert got is not None and np.array_equal(got, window_set(f.read_bytes()))
    f.write_bytes(text(701, 3_000))  # same size, other bytes
    assert sets.get(2, src) is None and sets.changed == 1
    f.unlink()
    assert WindowSets(50, 1 << 20, "auto", {3: digest}, warnings.append).get(3, src) is None
    assert [w.path for w in warnings] == [str(f)]  # a vanished file is one warning


def test_window_sets_over_budget_drop_the_set_needed_last(tmp_path: Path) -> None:
    """With a budget of two sets, the one needed again soonest stays (Belady's rule);
    without a clock, the least recently used goes (and is read again)."""
    import blake3

    from sif.windowsets import WindowSets

    files = {}
    for i in (1, 2, 3):
        f = tmp_path / f"{i}.txt"
        f.write_bytes(text(800 + i, 3_000))
        files[i] = (str(f), str(f), "raw")
    digests = {i: blake3.blake3(Path(src[0]).read_bytes()).digest() for i, src in files.items()}
    one = len(window_set(Path(files[1][0]).read_bytes())) * 8
    budget = 2 * one + one // 2  # room for two sets, not three

    def reads(order: list[int], clock: bool) -> int:
        sets = WindowSets(50, budget, "auto", digests, lambda w: None, jit=False)
        for k, fid in enumerate(order):
            nxt = next((j for j in range(k + 1, len(order)) if order[j] == fid), -1)
            got = sets.get(fid, files[fid], nxt if clock else None)
            assert got is not None and len(got) > 0
        return sets.files_read

    # When 3 is made, 1 is needed again and 2 never: Belady drops 2, LRU drops 1.
    order = [1, 2, 3, 1, 3, 1]
    assert reads(order, clock=True) == 3  # each file made once
    assert reads(order, clock=False) == 4  # 1 read again
