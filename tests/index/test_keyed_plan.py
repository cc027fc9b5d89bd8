"""The keyed run plan (sif.index.runplan) where two paths share the first half of a key.

The walk and the index meet by the first 64 bits of a 128-bit key of each
path, sorted and searched; the other 64 tell two paths apart. Here the paths
ending in ``a.txt`` and ``b.txt`` share the first half (what a real 64-bit
collision looks like): a removed file, a new hard link of an indexed file
(walked or not) are planned as with distinct keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

from sif import pathkeys, treewalk
from sif.index import build_index, open_reader
from sif.index.duck import DuckStore
from sif.query import query_files
from treeutil import write


@pytest.fixture(autouse=True)
def collide(monkeypatch: pytest.MonkeyPatch) -> None:
    real = pathkeys.path_key

    def key(origin: bytes, secret: bytes) -> tuple[int, int]:
        origin = bytes(origin)
        if origin.endswith((b"/a.txt", b"/b.txt")):
            return 0, xxhash.xxh64_intdigest(origin)
        return real(origin, secret)

    monkeypatch.setattr(pathkeys, "path_key", key)
    monkeypatch.setattr(pathkeys, "_treec", None)  # every key made by path_key
    monkeypatch.setattr(treewalk, "_treec", None)  # the walk's keys too


def _ids(index: Path) -> dict[str, int]:
    s = DuckStore(str(index))
    try:
        rows = s.catalog().execute("SELECT path, id FROM files").fetchall()
    finally:
        s.close()
    return {os.fsdecode(bytes(p)): int(i) for p, i in rows}


def _text(rng: np.random.Generator) -> bytes:
    return rng.integers(97, 123, 3000, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("gone", ["a.txt", "b.txt"])
def test_a_removed_file_whose_half_key_an_unchanged_file_shares_leaves_the_index(
    tmp_path: Path, gone: str
) -> None:
    rng = np.random.default_rng(2)
    t = tmp_path / "t"
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        write(t / name, _text(rng))
    index = tmp_path / "idx"
    build_index([t], index, jobs=1)
    probe = tmp_path / "probe.txt"
    probe.write_bytes((t / gone).read_bytes())
    (t / gone).unlink()
    again = build_index([t], index, jobs=1)
    assert (again.new, again.changed, again.unchanged, again.removed) == (0, 0, 3, 1)
    assert str(t / gone) not in _ids(index)
    reader = open_reader(index)
    try:
        (result,) = query_files([probe], reader, threshold=5)
        assert str(t / gone) not in {m.path for m in result.matches}
    finally:
        reader.close()


@pytest.mark.parametrize("walked_twin", [True, False], ids=["twin walked", "twin not walked"])
def test_a_new_hard_link_whose_half_key_its_indexed_twin_shares_is_indexed(
    tmp_path: Path, walked_twin: bool
) -> None:
    rng = np.random.default_rng(3)
    write(tmp_path / "t" / "a.txt", _text(rng))
    write(tmp_path / "u" / "x.txt", _text(rng))
    os.link(tmp_path / "t" / "a.txt", tmp_path / "u" / "b.txt")  # the same file, the same stat
    index = tmp_path / "idx"
    build_index([tmp_path / "t"], index, jobs=1)
    roots = [tmp_path / "t", tmp_path / "u"] if walked_twin else [tmp_path / "u"]
    again = build_index(roots, index, jobs=1)
    assert (again.new, again.unchanged) == (2, 1 if walked_twin else 0)
    assert {str(tmp_path / "t" / "a.txt"), str(tmp_path / "u" / "b.txt")} <= set(_ids(index))


def test_a_new_root_beside_a_large_index_reads_no_origin_of_the_other_roots(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Indexing another root reads, of the entries the walk did not meet, the origins of
    those under the roots only, a chunk at a time: the catalog's memory does not grow with
    the index. (At 400k entries and 32 MB, every new root failed with DuckDB's 'Out of
    Memory Error': the origins of all of them were read and sorted in one statement.)
    Here the same at 20,000 entries of long names and 8 MB."""
    import duckdb

    from sif.index import catalogdb, known

    a = tmp_path / "a"
    name = "x" * 200
    for k in range(20_000):
        d = a / f"d{k // 100:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}{k}").write_bytes(b"%d" % k * 8)
    write(tmp_path / "b" / "one.txt", b"hello world " * 10)
    idx = tmp_path / "idx"
    build_index([a], idx)
    con = duckdb.connect(str(idx / "catalog.duckdb"))  # as a run that checkpointed leaves it
    con.execute("CHECKPOINT")
    con.close()
    monkeypatch.setattr(catalogdb, "CATALOG_MEMORY", "8MB")
    asked: list[int] = []
    read = known.read_origins
    monkeypatch.setattr(
        known, "read_origins", lambda *x, **k: asked.append(len(x[3])) or read(*x, **k)
    )
    stats = build_index([tmp_path / "b"], idx)
    assert (stats.new, stats.removed) == (1, 0)
    assert asked and max(asked) == 20_000  # asked about all, in chunks; the catalog chose
    monkeypatch.setattr(catalogdb, "CATALOG_MEMORY", "32MB")
    (a / "d0003" / f"{name}300").unlink()  # a file gone under a sub-root is still seen
    stats = build_index([a / "d0003"], idx)
    assert (stats.new, stats.unchanged, stats.removed) == (0, 99, 1)
