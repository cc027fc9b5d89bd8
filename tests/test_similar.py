"""sif similar (all-against-all) on real files in temporary trees."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.cli import main
from sif.similar import (
    SimilarFile,
    SimilarOptions,
    SimilarPair,
    collate,
    exact_containment,
    find_similar,
    pair_estimates,
    sampling_tier,
    similar_groups,
    similar_sets,
    window_set,
)
from textgen import licence, text
from treeutil import write

LICENCE = licence(3000)  # a boilerplate header many files share


def module(i: int) -> bytes:
    """Unrelated source-like files of 24-54 KB (generated: the same on every host)."""
    return text(1000 + i, 24_000 + (i * 7919) % 30_000)


def run(tree: Path, index: Path, **opts: object) -> object:
    options = SimilarOptions(**opts)  # type: ignore[arg-type]
    return find_similar([tree], index, options=options, jobs=1)


def pair_of(result: object, a: str, b: str) -> SimilarPair | None:
    for p in result.pairs:  # type: ignore[attr-defined]
        names = {os.path.basename(p.a.path), os.path.basename(p.b.path)}
        if names == {a, b}:
            return p
    return None


def test_contained_file_is_found(tmp_path: Path) -> None:
    small = module(0)[:8000]
    write(tmp_path / "t/small.py", small)
    write(tmp_path / "t/large.py", module(1) + small + module(2))
    write(tmp_path / "t/other.py", module(3))
    result = run(tmp_path / "t", tmp_path / "idx")
    p = pair_of(result, "small.py", "large.py")
    assert p is not None
    small_in_large = p.a_in_b if p.a.path.endswith("small.py") else p.b_in_a
    assert small_in_large >= 0.9
    assert p.score >= 90
    assert len(result.pairs) == 1  # type: ignore[attr-defined]


def test_small_files_in_a_large_one_are_found_with_the_tier(tmp_path: Path) -> None:
    # Five 3 KB passages of unrelated modules, each whole inside one large file.
    smalls = [module(20 + i)[5000:8000] for i in range(5)]
    write(tmp_path / "t/large.py", b"".join(s + module(30 + i) for i, s in enumerate(smalls)))
    for i, s in enumerate(smalls):
        write(tmp_path / f"t/s{i}.py", s)
    result = run(tmp_path / "t", tmp_path / "idx")
    scores = []
    for i in range(5):
        p = pair_of(result, f"s{i}.py", "large.py")
        assert p is not None, i
        small = p.a if p.a.path.endswith(f"s{i}.py") else p.b
        assert small.n_fp >= 20  # the tier: at least 20 fingerprints (W = 147, not 511)
        scores.append(p.score)
    # Density-aware: about 100%; shared / n_distinct(small) would give about 147 / 511.
    assert 75 <= float(np.mean(scores)) <= 100


def test_pairs_of_small_files_are_scored_exactly_and_stored(tmp_path: Path) -> None:
    from sif.similar import SMALL_EXACT_BYTES

    text = module(20)
    a, b = text[:900], text[300:900] + module(21)[:300]
    assert max(len(a), len(b)) < SMALL_EXACT_BYTES
    write(tmp_path / "t/a.txt", a)
    write(tmp_path / "t/b.txt", b)
    write(tmp_path / "t/c.txt", module(22))  # large: its pairs keep the estimate
    want = exact_containment(window_set(b, 50), window_set(a, 50))[0]
    first = run(tmp_path / "t", tmp_path / "idx", threshold=25)
    assert first.stats.exact_pairs == 1  # type: ignore[attr-defined]
    p = pair_of(first, "a.txt", "b.txt")
    assert p is not None and p.exact_b_in_a == pytest.approx(want)
    assert p.score == pytest.approx(100 * want)
    # Stored with the counts: a re-threshold reads nothing and the exact score decides.
    edge = 100 * want
    above = run(tmp_path / "t", tmp_path / "idx", threshold=edge - 0.01)
    below = run(tmp_path / "t", tmp_path / "idx", threshold=edge + 0.01)
    assert above.stats.reused and above.stats.exact_pairs == 0  # type: ignore[attr-defined]
    assert len(above.pairs) == 1 and below.pairs == ()  # type: ignore[attr-defined]


def test_pair_estimates_scale_to_the_sparser_side() -> None:
    from sif import fingerprint as fpmod
    from sif.index.build import DEFAULT_PARAMS

    sizes = np.array([49, 50, 60, 200, 1000, 5000, 10_268, 10_269, 10_270, 10**6])
    expected = [fpmod._effective(DEFAULT_PARAMS, int(n)) if n >= 50 else 1 for n in sizes]
    assert sampling_tier(DEFAULT_PARAMS, sizes).tolist() == expected
    # Alike (two large files): shared over each side's distinct fingerprints.
    ab, ba, jac = pair_estimates(
        np.array([50.0]), [10**6], [4000], [4000], [10**6], [5000], [5000], DEFAULT_PARAMS
    )
    assert (ab[0], ba[0]) == pytest.approx((50 / 4000, 50 / 5000))
    assert jac[0] == pytest.approx(50 / 8950)
    # A small file (1,049 bytes, 1,000 windows, W = 50: 40 fingerprints) and a large one
    # (1 / 256 of its windows): 4 shared = 4 * 256 = 1,024 windows: all of the small one.
    ab, ba, _ = pair_estimates(
        np.array([2.0, 4.0]),
        [1049, 1049],
        [40, 40],
        [40, 40],
        [256_049] * 2,
        [1000] * 2,
        [1000] * 2,
        DEFAULT_PARAMS,
    )
    assert ab.tolist() == pytest.approx([0.512, 1.0])
    assert ba.tolist() == pytest.approx([2 / 1000, 4 / 1000])


def test_reorganised_file_with_permuted_blocks(tmp_path: Path) -> None:
    data = module(4)
    blocks = [data[i : i + 2000] for i in range(0, len(data), 2000)]
    random.Random(7).shuffle(blocks)
    write(tmp_path / "t/orig.py", data)
    write(tmp_path / "t/moved.py", b"".join(blocks))
    result = run(tmp_path / "t", tmp_path / "idx", exact=True)
    p = pair_of(result, "orig.py", "moved.py")
    assert p is not None
    assert 100 * max(p.a_in_b, p.b_in_a) >= 80  # the sampled estimate
    assert p.exact_a_in_b is not None and p.exact_a_in_b >= 0.9  # all windows
    assert p.score >= 90


def test_licence_header_alone_pairs_nothing_once_stopped(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path / f"t/m{i}.py", LICENCE + module(5 + i)[:6000])
    # With the header counted, its 3,000 bytes are half of each file: all pairs.
    loose = run(tmp_path / "t", tmp_path / "idx", max_df=100)
    assert len(loose.pairs) == 10  # type: ignore[attr-defined]
    assert loose.stats.stopped == 0  # type: ignore[attr-defined]
    # In more than 3 files, its fingerprints are stop-fingerprints: no pair.
    strict = run(tmp_path / "t", tmp_path / "idx", max_df=3)
    assert strict.pairs == ()  # type: ignore[attr-defined]
    assert strict.stats.stopped >= 5  # type: ignore[attr-defined]


def test_kind_size_ratio_and_suffix_filters(tmp_path: Path) -> None:
    body = module(10)
    write(tmp_path / "t/a.py", body)
    write(tmp_path / "t/b.txt", body[:20000])
    write(tmp_path / "t/bin.dat", b"\0\1\2\3" * 100 + body)  # binary: never compared to text
    result = run(tmp_path / "t", tmp_path / "idx")
    assert pair_of(result, "a.py", "b.txt") is not None
    assert pair_of(result, "a.py", "bin.dat") is None
    assert pair_of(result, "b.txt", "bin.dat") is None
    assert run(tmp_path / "t", tmp_path / "idx", same_suffix=True).pairs == ()  # type: ignore[attr-defined]
    ratio = len(body) / 20000
    assert run(tmp_path / "t", tmp_path / "idx", size_ratio=ratio * 0.9).pairs == ()  # type: ignore[attr-defined]
    assert len(run(tmp_path / "t", tmp_path / "idx", size_ratio=ratio * 1.1).pairs) == 1  # type: ignore[attr-defined]


def test_stored_pairs_reused_then_invalidated_by_a_change(tmp_path: Path) -> None:
    write(tmp_path / "t/a.py", module(11))
    write(tmp_path / "t/b.py", module(11)[:15000] + module(12)[:15000])
    first = run(tmp_path / "t", tmp_path / "idx", threshold=25)
    assert not first.stats.reused and len(first.pairs) == 1  # type: ignore[attr-defined]
    again = run(tmp_path / "t", tmp_path / "idx", threshold=90)
    assert again.stats.reused and again.stats.index.files_read == 0  # type: ignore[attr-defined]
    assert again.pairs == ()  # type: ignore[attr-defined]
    write(tmp_path / "t/b.py", module(13))  # b changes: the stored pairs are stale
    changed = run(tmp_path / "t", tmp_path / "idx", threshold=25)
    assert not changed.stats.reused and changed.pairs == ()  # type: ignore[attr-defined]


def test_rethreshold_skips_the_index_update_until_a_file_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sif.similar.run

    write(tmp_path / "t/a.py", module(14))
    write(tmp_path / "t/b.py", module(14)[:20000] + module(15)[:5000])
    first = run(tmp_path / "t", tmp_path / "idx", threshold=25)
    assert not first.stats.reused and len(first.pairs) == 1  # type: ignore[attr-defined]
    # Same walk: the stored pairs, without the index update (nor its catalog work).
    with monkeypatch.context() as m:
        m.setattr(sif.similar.run, "build_index", None)  # called, it would raise
        again = run(tmp_path / "t", tmp_path / "idx", threshold=50)
    assert again.stats.reused and again.stats.index.unchanged == 2  # type: ignore[attr-defined]
    assert len(again.pairs) == 1  # type: ignore[attr-defined]
    # b rewritten in place with unrelated content of the same size, mtime moved on
    # (touch): the walk differs, b is read again and the stale pairs are not used.
    b = tmp_path / "t/b.py"
    st = b.stat()
    b.write_bytes(module(16)[: st.st_size])
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    touched = run(tmp_path / "t", tmp_path / "idx", threshold=50)
    assert not touched.stats.reused  # type: ignore[attr-defined]
    assert touched.stats.index.read_paths == [str(b)]  # type: ignore[attr-defined]
    assert touched.pairs == ()  # type: ignore[attr-defined]
    # A touch alone (same bytes, new mtime) is noticed too: re-read, same pairs.
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
    retouched = run(tmp_path / "t", tmp_path / "idx", threshold=50)
    assert retouched.stats.index.read_paths == [str(b)]  # type: ignore[attr-defined]


def test_partial_counts_of_hash_partitions_add_up(tmp_path: Path) -> None:
    import duckdb

    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
    values, ids = [], []
    for f in range(1, 30):  # versions sharing overlapping slices, some repeated twice
        lo = int(rng.integers(0, 2000))
        part = base[lo : lo + 800]
        values += [part, part[:10]]
        ids += [np.full(len(part) + 10, f, dtype=np.uint32)]
    v, i = np.concatenate(values), np.concatenate(ids)
    g = (i % 2).astype(np.uint8)
    con = duckdb.connect()
    whole, stopped = collate(con, v, i, g, max_df=20)
    split, stopped4 = collate(con, v, i, g, max_df=20, partitions=4)
    assert stopped == stopped4 and len(whole["a"]) > 0
    for k in whole:
        assert np.array_equal(whole[k], split[k]), k
    # Brute force: distinct shared values per pair of the same group, stop-values out.
    sets = {f: set(v[i == f].tolist()) for f in range(1, 30)}
    df: dict[int, set[int]] = {}
    for f, s in sets.items():
        for x in s:
            df.setdefault(x, set()).add(f)
    brute = {}
    for a in range(1, 30):
        for b in range(a + 1, 30):
            if a % 2 != b % 2:
                continue
            n = sum(1 for x in sets[a] & sets[b] if len([f for f in df[x] if f % 2 == a % 2]) <= 20)
            if n:
                brute[(a, b)] = n
    got = {
        (int(a), int(b)): int(s)
        for a, b, s in zip(whole["a"], whole["b"], whole["shared"], strict=True)
    }
    assert got == brute


def test_exact_containment_matches_substring_sets() -> None:
    rng = random.Random(5)
    a = bytes(rng.choice(b"abcdefgh \n") for _ in range(3000))
    b = a[500:2000] + bytes(rng.choice(b"abcdefgh \n") for _ in range(1000))
    sa, sb = window_set(a, 50), window_set(b, 50)
    subs_a = {a[i : i + 50] for i in range(len(a) - 49)}
    subs_b = {b[i : i + 50] for i in range(len(b) - 49)}
    assert len(sa) == len(subs_a) and len(sb) == len(subs_b)
    ab, ba = exact_containment(sa, sb)
    inter = len(subs_a & subs_b)
    assert ab == pytest.approx(inter / len(subs_a)) and ba == pytest.approx(inter / len(subs_b))


def _f(i: int) -> SimilarFile:
    return SimilarFile(i, f"/t/{chr(96 + i)}", 1000 * i, "text", 10, 10, bytes([i]))


def _p(x: int, y: int, share: float) -> SimilarPair:
    return SimilarPair(_f(x), _f(y), 5, share, share, share, 100 * share, 100 * share)


def test_groups_each_set_once_and_interesting_sets() -> None:
    # a~b, b~c, a~c (a triangle) and c~d only: cliques {a,b,c}, {c,d}; one component.
    pairs = [_p(1, 2, 0.9), _p(2, 3, 0.8), _p(1, 3, 0.7), _p(3, 4, 0.6)]
    groups = similar_groups(pairs)
    keys = [frozenset([g.reference.id, *(m.file.id for m in g.members)]) for g in groups]
    assert len(keys) == len(set(keys))  # each distinct set once
    assert keys == [frozenset({1, 2, 3}), frozenset({1, 2, 3, 4}), frozenset({3, 4})]
    cliques = similar_sets(pairs, "cliques")
    assert [frozenset(f.id for f in s.files) for s in cliques] == [
        frozenset({1, 2, 3}),
        frozenset({3, 4}),
    ]
    assert cliques[0].least == (70.0, 80.0, 70.0)
    comps = similar_sets(pairs, "components")
    assert [frozenset(f.id for f in s.files) for s in comps] == [frozenset({1, 2, 3, 4})]


def test_cli_text_is_figure_3_and_json_csv(tmp_path: Path) -> None:
    write(tmp_path / "t/foo.c", module(14))
    write(tmp_path / "t/bar.c", module(14)[:20000] + module(15)[:5000])
    write(tmp_path / "t/copy.c", module(14))
    args = ["similar", "--index", str(tmp_path / "idx"), "-j", "1", str(tmp_path / "t")]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "The following groups of files are similar. Minimum similarity = 25%"
    assert lines[1] == ""
    assert re.fullmatch(r"R100 \S+/t/bar\.c \d+", lines[2])
    member = re.compile(r"[ \d]{3}\d \S+/t/(foo|copy)\.c \d+")
    assert member.fullmatch(lines[3]) and member.fullmatch(lines[4])
    # bar's group holds all three files: foo's and copy's are the same set, printed once.
    assert sum(1 for x in lines if x.startswith("R")) == 1
    assert "sif:" in res.stderr and "stop-fingerprints" in res.stderr
    res = CliRunner().invoke(main, [*args, "--format", "json", "-t", "50"])
    records = [json.loads(x) for x in res.stdout.splitlines()]
    assert {(os.path.basename(r["a"]), os.path.basename(r["b"])) for r in records} >= {
        ("copy.c", "foo.c")
    }
    r = next(r for r in records if r["identical"])
    # Every share in percent, in one record: the exact score, then the estimates.
    assert r["score"] == r["exact_a_in_b"] == r["exact_b_in_a"] == 100.0 and r["score_exact"]
    assert r["estimate_a_in_b"] == 100.0 and r["estimate_jaccard"] == 100.0 and r["shared"] > 10
    assert r["score_low"] is None  # exact: no interval
    res = CliRunner().invoke(main, [*args, "--format", "csv"])
    assert res.stdout.splitlines()[0].startswith("a,b,size_a,size_b,kind,score")
    res = CliRunner().invoke(main, [*args, "--format", "csv", "--sets", "components"])
    assert res.exit_code == 2  # csv lists pairs: --sets has no csv form


REREAD_SCRIPT = r"""
import json, os, sys, encodings.idna, encodings.ascii, encodings.latin_1, encodings.utf_8
import duckdb, mmap, numpy, numpy.ma, platformdirs
import sif.index, sif.index.duck, sif.index.reader, sif.content
from sif.similar import SimilarOptions, find_similar
# Imported above as root: nobody may not read this Python's own files.
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # root reads everything: drop to nobody
warnings = []
r = find_similar([sys.argv[1]], sys.argv[2], options=SimilarOptions(threshold=50),
                 jobs=1, on_warning=warnings.append)
print(json.dumps({"reused": r.stats.reused, "read": r.stats.index.files_read,
                  "warnings": [str(w) for w in warnings],
                  "pairs": sorted([os.path.basename(p.a.path), os.path.basename(p.b.path)]
                                  for p in r.pairs)}))
"""


def test_rethreshold_opens_no_file_under_the_tree() -> None:
    assert os.geteuid() == 0, "this test needs root (CI runs as root): it hands the index to nobody"
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        tree, index = Path(top) / "t", Path(top) / "idx"
        write(tree / "a.py", module(16))
        write(tree / "b.py", module(16)[:25000] + module(17)[:3000])
        write(tree / "c.py", module(18))
        os.chmod(tree, 0o755)
        for n in ("a.py", "b.py", "c.py"):  # nobody can open no file of the tree (set
            os.chmod(tree / n, 0)  # before the run: a chmod changes the ctime, a change)
        first = find_similar([tree], index, options=SimilarOptions(threshold=25), jobs=1)
        assert len(first.pairs) == 1
        for dirpath, _, names in os.walk(index):  # ... but may write the index
            os.chown(dirpath, 65534, 65534)
            for n in names:
                os.chown(os.path.join(dirpath, n), 65534, 65534)
        out = subprocess.run(
            [sys.executable, "-c", REREAD_SCRIPT, str(tree), str(index)],
            capture_output=True,
            text=True,
            cwd=top,
        )
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
    assert got == {"reused": True, "read": 0, "warnings": [], "pairs": [["a.py", "b.py"]]}


def test_exact_chunks_cut_between_larger_files_by_cost() -> None:
    from sif.similar import _chunk_bounds

    def chunks(big: list[int], cost: list[int], n: int) -> list[list[int]]:
        bounds, order = _chunk_bounds(np.asarray(big), np.asarray(cost), n)
        return [list(range(bounds[c], bounds[c + 1])) for c in order]

    big = [1] * 4 + [20] * 4  # the pairs of larger file 1, then of larger file 20
    a, b = [0, 1, 2, 3], [4, 5, 6, 7]
    assert chunks(big, [1] * 8, 2) == [a, b]  # cut where the larger file changes, in order
    assert chunks(big, [1] * 8, 3) == [a, b]  # never inside a larger file's pairs
    assert chunks(big, [1] * 8, 1) == [a + b]
    assert chunks([], [], 4) == []
    # The costliest chunk first: the last ones handed out, run while the other jobs
    # finish, are the cheap ones. Ties keep the tree's order.
    assert chunks([*big, 30, 30], [1] * 8 + [9, 9], 8) == [[8, 9], a, b]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 6), st.integers(0, 50)), max_size=40),
    st.integers(1, 20),
)
def test_exact_chunks_cover_every_pair_once_and_keep_a_larger_file_whole(
    pairs: list[tuple[int, int]], n: int
) -> None:
    from sif.similar import _chunk_bounds

    big = np.sort(np.asarray([p[0] for p in pairs], dtype=np.int64))
    cost = np.asarray([p[1] for p in pairs], dtype=np.int64)
    bounds, order = _chunk_bounds(big, cost, n)
    assert sorted(order.tolist()) == list(range(len(bounds) - 1))
    assert bounds[0] == 0 and bounds[-1] == len(big) and np.all(np.diff(bounds) > 0)
    for cut in bounds[1:-1]:  # a cut between two larger files, never inside one
        assert big[cut - 1] != big[cut]
    spent = [int(cost[bounds[c] : bounds[c + 1]].sum()) for c in order]
    assert spent == sorted(spent, reverse=True)
    assert len(bounds) - 1 <= n  # at most n chunks


def test_normalize_options_reach_the_index_and_never_mix(tmp_path: Path) -> None:
    """--raw and the default view are parameter sets of their own; PostScript prologs differ."""
    import shutil

    from click.testing import CliRunner

    from sif.cli import main

    data = Path(__file__).parent / "data" / "content"
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(data / "ps-a.ps", tree / "a.ps")
    shutil.copy(data / "ps-b.ps", tree / "b.ps")
    index = str(tmp_path / "idx")
    runner = CliRunner()
    raw = runner.invoke(
        main,
        ["similar", "--index", index, "--raw", "-t", "20", "--format", "json", "-q", str(tree)],
    )
    auto = runner.invoke(
        main,
        [
            *("similar", "--index", index, "--normalize", "auto"),
            *("-t", "20", "--format", "json", "-q", str(tree)),
        ],
    )
    assert raw.exit_code == 0, raw.output
    assert auto.exit_code == 0, auto.output
    # Same prolog, different pages: similar as raw bytes, not once the prolog is gone.
    assert raw.stdout.strip() != ""
    assert auto.stdout.strip() == ""
    from sif.index import open_reader

    reader = open_reader(index)
    try:
        modes = sorted(getattr(p, "normalize", "auto") for p in reader.parameter_sets())
    finally:
        reader.close()
    assert modes == ["auto", "raw"]


def test_exact_scores_use_the_indexed_content_of_members_and_compressed_files(
    tmp_path: Path,
) -> None:
    """A small .gz file and zip members are scored exactly on their content, not their bytes."""
    import gzip
    import random
    import zipfile

    from sif.events import ScanWarning
    from sif.similar import find_similar

    rng = random.Random(7)
    words = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 8))) for _ in range(300)
    ]
    text = " ".join(rng.choice(words) for _ in range(120)).encode()[:700]
    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "d.txt").write_bytes(text)
    (tree / "d.txt.gz").write_bytes(gzip.compress(text))
    with zipfile.ZipFile(tree / "z.zip", "w") as zf:
        zf.writestr("m.txt", text[:650])
    warnings: list[ScanWarning] = []
    result = find_similar([tree], tmp_path / "idx", on_warning=warnings.append)
    assert warnings == []
    by_pair = {frozenset((p.a.path, p.b.path)): p for p in result.pairs}
    gz = by_pair[frozenset((str(tree / "d.txt"), str(tree / "d.txt.gz")))]
    assert gz.exact_a_in_b == gz.exact_b_in_a == 1.0
    member = by_pair[frozenset((str(tree / "d.txt"), f"{tree}/z.zip!/m.txt"))]
    assert member.exact_a_in_b is not None
    assert max(member.exact_a_in_b, member.exact_b_in_a or 0.0) == 1.0


def test_similar_follows_the_index_normalisation_and_rejects_bad_memory_limits(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from sif.cli import main
    from sif.index import open_reader

    tree = tmp_path / "t"
    tree.mkdir()
    (tree / "a.txt").write_bytes(b"some words " * 200)
    index = str(tmp_path / "it's")  # a quote in the path must not break DuckDB's SET
    runner = CliRunner()
    assert runner.invoke(main, ["index", "--index", index, "--raw", "-q", str(tree)]).exit_code == 0
    done = runner.invoke(main, ["similar", "--index", index, "-q", str(tree)])
    assert done.exit_code == 0, done.output
    reader = open_reader(index)
    try:
        assert [p.normalize for p in reader.parameter_sets()] == ["raw"]  # nothing re-read
    finally:
        reader.close()
    bad = runner.invoke(
        main, ["similar", "--index", index, "--memory-limit", "1GB'; --", str(tree)]
    )
    assert bad.exit_code == 2
    assert "--memory-limit" in bad.output
