"""The catalog's WAL: never needed once a writer has closed (sif.index.catalogdb).

A writer checkpoints the catalog when it closes, and after a migration; a WAL is
left only by a writer killed, for DuckDB's recovery, and the next writer
checkpoints it at once. A rebuild folds a killed writer's WAL into the old
catalog before its new catalog replaces it; a catalog found behind its
published manifest (its last commits lost) is damage, never the reason to
delete segments.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
import pytest

import sif.index.duck as duck
from sif.errors import IndexCorrupt
from sif.index import build_index, catalogdb, open_reader, open_store
from sif.index.build import DEFAULT_PARAMS
from sif.index.indexdir import CATALOG, PATHKEY
from treeutil import write

WAL = CATALOG + ".wal"


def tree(root: Path, n: int = 30) -> list[Path]:
    rng = np.random.default_rng(4)
    paths = []
    for i in range(n):
        p = root / f"d{i % 3}" / f"f{i:03d}.txt"
        write(p, rng.integers(97, 123, 5000, dtype=np.uint8).tobytes())
        paths.append(p)
    return paths


def described(idx: Path) -> int:
    reader = open_reader(idx)
    try:
        return len(reader.describe(DEFAULT_PARAMS, np.arange(1, 1000, dtype=np.uint32)))
    finally:
        reader.close()


def segments(idx: Path) -> list[str]:
    return sorted(os.listdir(idx / "segments"))


class Killed(BaseException):
    """What a SIGKILL at that point would leave (the store's cleanup runs, as a new
    writer's clean-up would)."""


def test_every_run_leaves_the_catalog_whole_in_its_file(tmp_path: Path) -> None:
    paths = tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    assert not (idx / WAL).exists()  # a full run: checkpointed when it closed
    write(paths[0], b"changed" * 900)
    assert build_index([tmp_path / "t"], idx, jobs=2).changed == 1
    assert not (idx / WAL).exists()
    assert build_index([tmp_path / "t"], idx, jobs=1).unchanged == 30  # nothing committed
    assert not (idx / WAL).exists()
    assert described(idx) == 30


def test_a_killed_writers_wal_is_checkpointed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB replays it, and what it holds stays in memory (within the catalog's 32 MB,
    never evicted) until a checkpoint: the next writer checkpoints it when it opens."""
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        m.setattr(catalogdb, "checkpoint", lambda con: None)  # as a kill leaves it
        build_index([tmp_path / "t"], idx, jobs=1)
    assert (idx / WAL).stat().st_size > 0
    with open_store(idx):  # type: ignore[attr-defined]
        assert not (idx / WAL).exists()
    assert described(idx) == 30


def test_a_migration_is_checkpointed(tmp_path: Path) -> None:
    """The schema's changes are never left in the WAL (every reader would replay them,
    and a later DuckDB meet them)."""
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    con = duckdb.connect(str(idx / CATALOG))  # one schema back, as an older sif left it
    con.execute(
        "DELETE FROM sif_migrations WHERE version = (SELECT max(version) FROM sif_migrations)"
    )
    con.execute("DELETE FROM sif_meta WHERE key = 'path_key'")
    con.close()
    assert not (idx / WAL).exists()
    with open_store(idx) as store:  # type: ignore[attr-defined]
        assert not (idx / WAL).exists()  # migrated, checkpointed, still open
        assert len(store.known_columns(DEFAULT_PARAMS).ids) == 30


def _kill_at_the_catalogs_rename(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    real = os.replace

    def replace(src: str, dst: str) -> None:
        if os.fspath(dst) == str(home / CATALOG):
            raise Killed
        real(src, dst)

    monkeypatch.setattr(duck.os, "replace", replace)


@pytest.mark.parametrize("wal_left", [False, True], ids=["closed", "killed"])
def test_a_rebuild_killed_before_its_catalog_moves_in_leaves_the_old_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wal_left: bool
) -> None:
    """The rebuild deletes the old catalog's WAL, then moves its own catalog in: killed
    between, the old catalog must be whole in its file (its writer checkpointed it, or
    the rebuild folded a killed writer's WAL into it first)."""
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    with monkeypatch.context() as m:
        if wal_left:
            m.setattr(catalogdb, "checkpoint", lambda con: None)
        build_index([tmp_path / "t"], idx, jobs=1)
    if wal_left:
        assert (idx / WAL).stat().st_size > 0
    before = segments(idx)
    with monkeypatch.context() as m:
        _kill_at_the_catalogs_rename(m, idx)
        with pytest.raises(Killed):
            build_index([tmp_path / "t"], idx, jobs=1, rebuild=True)
    again = build_index([tmp_path / "t"], idx, jobs=1)
    assert (again.new, again.unchanged) == (0, 30)  # the old index, as it was
    assert segments(idx) == before and described(idx) == 30


def test_a_catalog_behind_its_published_state_deletes_nothing(tmp_path: Path) -> None:
    """A catalog that lost its last commits (a WAL deleted, an old copy put back) names
    fewer segments than the published manifest: damage, not orphans to delete."""
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    with open_store(tmp_path / "fresh") as fresh:  # type: ignore[attr-defined]
        del fresh
    os.replace(tmp_path / "fresh" / CATALOG, idx / CATALOG)  # generation 0
    os.replace(tmp_path / "fresh" / PATHKEY, idx / PATHKEY)  # its keys' secret
    (idx / WAL).unlink(missing_ok=True)
    before = segments(idx)
    with pytest.raises(IndexCorrupt, match=r"behind the published"):
        build_index([tmp_path / "t"], idx, jobs=1)
    assert segments(idx) == before and described(idx) == 30
