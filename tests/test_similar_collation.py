"""The collation (COLLATE_SQL): literal cases, and every output against brute force."""

from __future__ import annotations

import duckdb
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sif.similar as sim
from sif.similar import COLLATE_SQL


def collate(rows: list[tuple[int, int]]) -> list[tuple[int, ...]]:
    fp = np.array([r[0] for r in rows], dtype=np.uint32)
    ids = np.array([r[1] for r in rows], dtype=np.uint32)
    con = duckdb.connect()
    con.register("fp", {"fp": fp, "file_id": ids, "grp": np.zeros(len(rows), dtype=np.uint8)})
    return sorted(con.execute(COLLATE_SQL.replace("$max_df", "100")).fetchall())


def test_identical_files_with_repeated_fingerprints_count_every_row() -> None:
    # Two identical files: fingerprint 7 twice in each, 8 and 9 once.
    rows = [(7, 1), (7, 1), (8, 1), (9, 1), (7, 2), (7, 2), (8, 2), (9, 2)]
    assert collate(rows) == [(1, 2, 3, 4, 4)]  # 3 distinct shared; 4 rows on each side


def test_multiplicities_differ_between_the_files() -> None:
    rows = [(7, 1), (8, 1), (7, 2), (7, 2), (7, 2), (8, 2), (5, 3)]
    assert collate(rows) == [(1, 2, 2, 2, 4)]


# --- against brute force ---------------------------------------------------------

Rows = list[tuple[int, int, int]]  # (fingerprint, file id, group)


def brute(rows: Rows, max_df: int) -> tuple[dict[tuple[int, int], tuple[int, int, int]], int]:
    """The paper's pair counts by definition: every non-stop fingerprint, every pair."""
    mult: dict[tuple[int, int], dict[int, int]] = {}
    for fp, fid, grp in rows:
        files = mult.setdefault((fp, grp), {})
        files[fid] = files.get(fid, 0) + 1
    pairs: dict[tuple[int, int], tuple[int, int, int]] = {}
    stopped = 0
    for files in mult.values():
        if len(files) > max_df:
            stopped += 1
        if not 2 <= len(files) <= max_df:
            continue
        ids = sorted(files)
        for i, x in enumerate(ids):
            for y in ids[i + 1 :]:
                s, ha, hb = pairs.get((x, y), (0, 0, 0))
                pairs[(x, y)] = (s + 1, ha + files[x], hb + files[y])
    return pairs, stopped


CON = duckdb.connect()
CON.execute("SET threads = 1")


def run_sql(sql: str, rows: Rows, max_df: int) -> dict[tuple[int, int], tuple[int, int, int]]:
    con = CON.cursor()
    con.register(
        "fp",
        {
            "fp": np.array([r[0] for r in rows], dtype=np.uint32),
            "file_id": np.array([r[1] for r in rows], dtype=np.uint32),
            "grp": np.array([r[2] for r in rows], dtype=np.uint8),
        },
    )
    out = con.execute(sql, {"max_df": max_df}).fetchall()
    con.close()
    assert len({(a, b) for a, b, *_ in out}) == len(out)  # one row a pair
    return {(a, b): (s, ha, hb) for a, b, s, ha, hb in out}


# Fingerprints from a small pool of values spread over 32 bits (so that hash
# partitions by their top bits all get some), files from a few ids, two groups.
VALUES = [int(v) for v in np.random.default_rng(7).integers(0, 2**32, 12, dtype=np.uint64)]
rows_strategy = st.lists(
    st.tuples(st.sampled_from(VALUES), st.integers(1, 7), st.integers(0, 1)), max_size=80
)


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy, max_df=st.integers(2, 5), partitions=st.sampled_from([1, 2, 3, 4, 8]))
def test_collate_equals_brute_force_for_every_output(
    rows: Rows, max_df: int, partitions: int
) -> None:
    want, want_stopped = brute(rows, max_df)
    assert run_sql(COLLATE_SQL, rows, max_df) == want
    cols, stopped = sim.collate(
        CON,
        np.array([r[0] for r in rows], dtype=np.uint32),
        np.array([r[1] for r in rows], dtype=np.uint32),
        np.array([r[2] for r in rows], dtype=np.uint8),
        max_df,
        partitions,
    )
    got = {
        (int(a), int(b)): (int(s), int(ha), int(hb))
        for a, b, s, ha, hb in zip(*(cols[k] for k in sim.PAIR_COLUMNS), strict=True)
    }
    assert got == want
    assert list(zip(cols["a"], cols["b"], strict=True)) == sorted(got)  # a < b, sorted
    assert stopped == want_stopped


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy, max_df=st.integers(2, 5), partitions=st.sampled_from([1, 2, 3, 8]))
def test_a_running_sum_over_bucket_ranges_equals_brute_force(
    rows: Rows, max_df: int, partitions: int
) -> None:
    """collate_group (both engines' unit of work) sums each range's pairs as they come."""
    from sif.index.pairstore import bucket_ranges
    from sif.index.segments import BUCKET_BITS
    from sif.similar.collate import collate_group

    want, want_stopped = brute(rows, max_df)
    fp = np.array([r[0] for r in rows], dtype=np.uint32)
    ids = np.array([r[1] for r in rows], dtype=np.uint32)
    grp = np.array([r[2] for r in rows], dtype=np.uint8)

    def by_range(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sel = ((fp >> BUCKET_BITS) >= lo) & ((fp >> BUCKET_BITS) < hi)
        return fp[sel], ids[sel], grp[sel]

    cols, stopped, n = collate_group(
        CON.cursor(), by_range, bucket_ranges(partitions), max_df, 1, "1GB"
    )
    got = {
        (int(a), int(b)): (int(s), int(ha), int(hb))
        for a, b, s, ha, hb in zip(*(cols[k] for k in sim.PAIR_COLUMNS), strict=True)
    }
    assert got == want and (stopped, n) == (want_stopped, len(rows))
    assert list(zip(cols["a"], cols["b"], strict=True)) == sorted(got)
    assert all(cols[k].dtype == np.uint32 for k in sim.PAIR_COLUMNS)


# A deliberately weak hash for one signature: sets collide in it all the time.
WEAK_1 = COLLATE_SQL.replace("hash(member)", "(member % 2)")
WEAK_2 = COLLATE_SQL.replace("hash(member, 1994)", "(member % 3)")
WEAK_BOTH = WEAK_1.replace("hash(member, 1994)", "(member % 3)")


@settings(max_examples=80, deadline=None)
@given(rows=rows_strategy, max_df=st.integers(2, 5))
def test_one_colliding_signature_never_merges_sets(rows: Rows, max_df: int) -> None:
    assert WEAK_1 != COLLATE_SQL and WEAK_2 != COLLATE_SQL
    want, _ = brute(rows, max_df)
    assert run_sql(WEAK_1, rows, max_df) == want
    assert run_sql(WEAK_2, rows, max_df) == want


def test_the_weak_hash_does_force_collisions() -> None:
    # Sets {1, 2} (fingerprint 5) and {1, 5} (fingerprint 6), each member once: the
    # members (id << 32 | 1) are all odd, and 2, 0, 0 modulo 3, so with both
    # signatures weak the two sets get the same signatures and size, and merge.
    rows = [(5, 1, 0), (5, 2, 0), (6, 1, 0), (6, 5, 0)]
    want, _ = brute(rows, 5)
    assert want == {(1, 2): (1, 1, 1), (1, 5): (1, 1, 1)}
    assert run_sql(WEAK_BOTH, rows, 5) != want
    assert run_sql(WEAK_1, rows, 5) == want == run_sql(COLLATE_SQL, rows, 5)


_CONNECTION: list[duckdb.DuckDBPyConnection] = []


def _shared_connection() -> duckdb.DuckDBPyConnection:
    """One in-memory DuckDB for every example (a connection each was most of the test's time)."""
    if not _CONNECTION:
        _CONNECTION.append(duckdb.connect())
    return _CONNECTION[0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 12)),
        max_size=120,
    ),
    st.integers(2, 6),
)
def test_the_numpy_stop_count_equals_the_sql(rows: list[tuple[int, int]], max_df: int) -> None:
    from sif.similar.collate import STOPPED_SQL, stop_count

    # A file is of one group (its kind and view): derive it from the file id.
    values = np.array([v for v, _ in rows], dtype=np.uint32)
    ids = np.array([f for _, f in rows], dtype=np.uint32)
    groups = (ids % 2).astype(np.uint8)
    con = _shared_connection()
    con.register("fp", {"fp": values, "file_id": ids, "grp": groups})
    want = con.execute(STOPPED_SQL, {"max_df": max_df}).fetchall()[0][0]
    con.unregister("fp")
    assert stop_count(values, ids, groups, max_df) == want
