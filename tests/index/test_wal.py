"""The catalog's WAL: never needed once a writer has closed (sif.index.catalogdb).

A writer checkpoints the catalog when it closes, and after a migration; a WAL is
left only by a writer killed, for DuckDB's recovery, and the next writer
checkpoints it at once. A rebuild folds a killed writer's WAL into the old
catalog before its new catalog replaces it; a catalog found behind its
published manifest (its last commits lost) is damage, never the reason to
delete segments.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

import sif.index.duck as duck
from actionutil import tmpfs
from sif.errors import IndexCorrupt, IndexUnusable
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


class Recorder:
    """A catalog connection that records the statements run through it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, *args: object) -> duckdb.DuckDBPyConnection:
        self.statements.append(sql)
        return self.con.execute(sql, *args)


GROUP = 122_880  # DuckDB's rows a row group


def test_a_checkpoint_vacuums_deleted_rows_only_when_they_are_many(tmp_path: Path) -> None:
    """A writer's checkpoints leave deleted rows stored (a vacuum rewrites row groups:
    0.5 s after 1% of a 1 M catalog changed) until a table's are one in VACUUM_SHARE of
    the rows it stores; then DuckDB's vacuum runs, which reclaims them."""
    root = tmp_path / "idx"
    root.mkdir()
    con = catalogdb.connect(str(root), str(root))
    try:
        assert con.execute("SELECT current_setting('max_vacuum_tasks')").fetchone() == (0,)
        n = 12 * GROUP
        con.execute(f"CREATE TABLE f AS SELECT range AS id FROM range({n})")
        con.execute("CREATE TABLE similar_pairs AS SELECT range AS a FROM range(1000)")
        con.execute("CREATE TABLE small AS SELECT range AS a FROM range(4)")
        catalogdb.checkpoint(con)
        assert catalogdb.deleted_rows(con)["f"] == (0, n)
        # 35% of the first three row groups: they would fit in two, and DuckDB's vacuum
        # would merge them; but that is 8.75% of the table, below the share.
        con.execute(f"DELETE FROM f WHERE id < {3 * GROUP} AND hash(id) % 100 < 35")
        con.execute("DELETE FROM similar_pairs")  # emptied whole: not counted
        con.execute("DELETE FROM small WHERE a < 2")  # half of it, but a few rows
        deleted, stored = catalogdb.deleted_rows(con)["f"]
        assert stored == n and deleted * catalogdb.VACUUM_SHARE < n
        assert "similar_pairs" not in catalogdb.deleted_rows(con)
        assert catalogdb.deleted_rows(con)["small"] == (2, 4)
        rec = Recorder(con)
        catalogdb.checkpoint(rec)  # type: ignore[arg-type]
        assert not any("vacuum" in sql for sql in rec.statements)
        assert catalogdb.deleted_rows(con)["f"] == (deleted, n)  # still stored
        # As much again in the next three groups: above the share, the checkpoint vacuums.
        con.execute(
            f"DELETE FROM f WHERE id BETWEEN {3 * GROUP} AND {6 * GROUP - 1} "
            "AND hash(id) % 100 < 35"
        )
        deleted, _ = catalogdb.deleted_rows(con)["f"]
        assert deleted * catalogdb.VACUUM_SHARE >= n
        rec = Recorder(con)
        catalogdb.checkpoint(rec)  # type: ignore[arg-type]
        assert [sql for sql in rec.statements if "vacuum" in sql] == [
            f"SET max_vacuum_tasks = {catalogdb.VACUUM_TASKS}",
            "SET max_vacuum_tasks = 0",
        ]
        left, after = catalogdb.deleted_rows(con)["f"]
        assert after < n and left < deleted  # reclaimed: row groups rewritten together
        assert con.execute("SELECT current_setting('max_vacuum_tasks')").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM f").fetchone() == (n - deleted,)
    finally:
        con.close()


def test_a_vacuum_that_fills_the_disk_is_a_full_disk_not_damage(tmp_path: Path) -> None:
    """A checkpoint that fails for want of space (DuckDB then refuses every statement,
    the reset of the vacuum setting too) is IndexUnusable naming the cause."""
    with tmpfs("8m") as where:
        root = where / "idx"
        root.mkdir()
        con = catalogdb.connect(str(root), str(root))
        try:
            con.execute(
                "CREATE TABLE f AS SELECT range AS id, md5(range::VARCHAR) AS p FROM range(60000)"
            )
            catalogdb.checkpoint(con)
            con.execute("DELETE FROM f WHERE hash(id) % 100 < 40")
            # New rows too, so that the checkpoint needs room: with 64 KiB blocks the
            # rewrite of the row groups fits in the blocks the file has (it does not grow).
            con.execute("INSERT INTO f SELECT range, md5(range::VARCHAR) FROM range(60000, 90000)")
            free = os.statvfs(where)
            with open(where / "filler", "wb") as filler:  # all the space left, but 4 KB
                filler.write(b"\0" * max(0, free.f_bavail * free.f_frsize - 4096))
            with (
                pytest.raises(IndexUnusable, match="No space left"),
                catalogdb.catalog_errors(str(root / CATALOG)),
            ):
                catalogdb.checkpoint(con)
        finally:
            with contextlib.suppress(duckdb.Error):
                con.close()


def test_a_rebuild_that_cannot_write_its_catalog_keeps_the_old_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk at the rebuilt catalog's last checkpoint (before it replaces the old
    one) is DuckDB's FatalException; it is IndexUnusable naming the cause, and the old
    index stands."""
    tree(tmp_path / "t")
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, jobs=1)
    real = catalogdb.checkpoint

    def full_at_swap(con: duckdb.DuckDBPyConnection) -> None:
        if sys._getframe(1).f_code.co_name == "_swap_in":
            raise duckdb.FatalException(
                "FATAL Error: database has been invalidated because of a previous fatal "
                "error.\nOriginal error: Could not write file: No space left on device"
            )
        real(con)

    monkeypatch.setattr(catalogdb, "checkpoint", full_at_swap)
    with pytest.raises(IndexUnusable, match="No space left on device; it keeps its last"):
        build_index([tmp_path / "t"], idx, jobs=1, rebuild=True)
    monkeypatch.undo()
    assert described(idx) == 30
    assert build_index([tmp_path / "t"], idx, jobs=1).unchanged == 30


def test_a_refused_write_named_on_a_later_line_is_not_damage(tmp_path: Path) -> None:
    """DuckDB invalidated by a failed write says so first and the cause after: the index
    is not corrupt (no --rebuild), it could not be written."""
    path = str(tmp_path / CATALOG)
    invalidated = duckdb.FatalException(
        "FATAL Error: database has been invalidated because of a previous fatal error.\n"
        "Original error: Could not write file: No space left on device"
    )
    unusable = pytest.raises(IndexUnusable, match=r"catalog\.duckdb: Original error: .*No space")
    with unusable, catalogdb.catalog_errors(path):
        raise invalidated
    damaged = pytest.raises(IndexCorrupt, match="invalidated")  # no cause named: damage
    with damaged, catalogdb.catalog_errors(path):
        raise duckdb.FatalException("FATAL Error: database has been invalidated")


def _block_size(catalog: Path) -> int:
    con = duckdb.connect(str(catalog), read_only=True)
    try:
        row = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()
        assert row is not None
        return int(row[0])
    finally:
        con.close()


def test_a_catalog_keeps_the_block_size_it_was_made_with(tmp_path: Path) -> None:
    """A new catalog is made with :data:`catalogdb.CATALOG_BLOCK` blocks; one made with
    16 KiB blocks (sif before 2026-12) keeps them, takes new commits and reads back whole
    (the setting applies only when a catalog is created)."""
    paths = tree(tmp_path / "t")
    new = tmp_path / "new"
    build_index([tmp_path / "t"], new, jobs=1)
    assert catalogdb.CATALOG_BLOCK != 16384
    assert _block_size(new / CATALOG) == catalogdb.CATALOG_BLOCK

    old = tmp_path / "old"
    real_connect = duckdb.connect

    def sixteen_kib(path: str, *args: object, **kwargs: Any) -> object:
        config = kwargs.get("config")
        if config is not None and "default_block_size" in config:
            kwargs["config"] = {**config, "default_block_size": "16384"}
        return real_connect(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(duckdb, "connect", sixteen_kib)
        build_index([tmp_path / "t"], old, jobs=1)
    assert _block_size(old / CATALOG) == 16384
    for p in paths[:10]:
        p.write_bytes(p.read_bytes() + b" changed")
    stats = build_index([tmp_path / "t"], old, jobs=1)
    assert (stats.changed, stats.unchanged) == (10, 20)
    assert _block_size(old / CATALOG) == 16384
    assert described(old) == described(new) == 30


class _CtrlC:
    """An object whose conversion to text is interrupted, as a Ctrl-C landing while
    DuckDB converts a registered array of objects would be."""

    def __str__(self) -> str:
        raise KeyboardInterrupt


def test_a_ctrl_c_inside_duckdb_s_calls_to_python_is_an_interrupt_not_damage(
    tmp_path: Path,
) -> None:
    from sif.errors import IndexCorrupt
    from sif.index.catalogdb import catalog_errors

    con = duckdb.connect(str(tmp_path / "c.duckdb"))
    con.execute("CREATE TABLE t (x VARCHAR)")
    con.register("b", {"x": np.array([_CtrlC()], dtype=object)})
    # DuckDB raises a plain Error whose message is the Python traceback.
    with pytest.raises(KeyboardInterrupt), catalog_errors(str(tmp_path / "c.duckdb")):
        con.execute("INSERT INTO t SELECT x FROM b")
    # Any other error stays what it was: damage.
    with pytest.raises(IndexCorrupt), catalog_errors(str(tmp_path / "c.duckdb")):
        con.execute("SELECT * FROM no_such_table")
    con.close()
