"""The collation's multiplicity counts (the paper's percentage) on a literal case."""

from __future__ import annotations

import duckdb
import numpy as np

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
