"""Indexes made by older sif versions open with this one, their data intact.

Each older catalog is made as that version made it: the registered migrations
run only up to it (``_v1`` .. ``_v4``: the functions that built those schemas),
its rows inserted with the columns it had, its segments in the layout of the
time (V1: ``FILE_DTYPE_V1`` records and whole paths; then ``FILE_DTYPE`` with
whole paths; then front-coded paths) and its manifest in format 1 (no checks).
Then the current code reads it (``sif query`` never migrates) and writes it
(the first writer migrates it to the current schema, records the segments'
checksums and publishes a format-2 manifest; entries without a ctime are read
again once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from sif.fingerprint import make_params
from sif.index import build_index, open_reader, open_store
from sif.index.duck import CATALOG, SCHEMA_VERSION
from sif.index.indexdir import PATHKEY
from sif.index.manifest import SNAPSHOT_FORMAT, read_manifest
from sif.index.scan import scan_file
from sif.index.schema import MIGRATIONS
from sif.index.segments import FILE_DTYPE_V1, make_files, write_segment
from sif.pathkeys import path_key
from sif.query import query_files
from treeutil import write

PARAMS = make_params()


def corpus(root: Path) -> list[Path]:
    rng = np.random.default_rng(11)
    base = rng.integers(97, 123, 20_000, np.uint8).tobytes()
    files = [root / "t" / "a.txt", root / "t" / "d" / "b.txt", root / "t" / "d" / "c.txt"]
    write(files[0], base)
    write(files[1], base[:12_000] + rng.integers(97, 123, 8000, np.uint8).tobytes())
    write(files[2], rng.integers(97, 123, 9000, np.uint8).tobytes())
    write(root / "q.txt", base)
    return files


def _save(path: Path, arr: np.ndarray) -> None:  # type: ignore[type-arg]
    with open(path, "wb") as f:
        np.save(f, arr, allow_pickle=False)


def whole_paths(directory: Path, paths: list[bytes], records: np.ndarray) -> None:  # type: ignore[type-arg]
    """Rewrite a segment as older writers laid it out: whole paths, int64 offsets."""
    os.unlink(directory / "paths_lcp.npy")
    offsets = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in paths], out=offsets[1:])
    _save(directory / "paths_off.npy", offsets)
    (directory / "paths.bin").write_bytes(b"".join(paths))
    _save(directory / "files.npy", records)


def old_index(idx: Path, version: int, files: list[Path]) -> None:
    """The index that sif at catalog schema ``version`` made of ``files`` (ids 1..n)."""
    idx.mkdir()
    con = duckdb.connect(str(idx / CATALOG), config={"default_block_size": "16384"})
    con.execute("CREATE TABLE sif_migrations (version INTEGER, name VARCHAR, applied_at TIMESTAMP)")
    for v, name, step in MIGRATIONS[:version]:
        step(con, b"")  # no secret before schema 9
        con.execute("INSERT INTO sif_migrations VALUES (?, ?, current_timestamp)", [v, name])
    scans = [scan_file(f, PARAMS) for f in files]
    stats = [os.stat(f) for f in files]
    if version >= 3:
        con.execute("INSERT INTO params VALUES (1, ?, NULL, 'raw')", [PARAMS.key()])
    else:
        con.execute("INSERT INTO params VALUES (1, ?, NULL)", [PARAMS.key()])
    for i, (f, s, st) in enumerate(zip(files, scans, stats, strict=True), start=1):
        row = [i, 1, os.fsencode(f), st.st_dev, st.st_ino, s.size, st.st_mtime_ns, s.kind]
        row += [s.digest, len(s.fingerprints), s.n_distinct, 1]
        if version >= 3:
            con.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'raw', ?, ?)",
                [*row, os.fsencode(f), st.st_size],
            )
        else:
            con.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    rows = sum(len(s.fingerprints) for s in scans)
    con.execute("INSERT INTO segments VALUES (1, 1, 'seg-000001', ?, ?)", [len(files), rows])
    for key, value in [("next_file_id", 4), ("next_segment_id", 2), ("generation", 1)]:
        con.execute("UPDATE sif_meta SET value = ? WHERE key = ?", [str(value), key])
    con.execute("UPDATE sif_meta SET value = '1' WHERE key = 'last_params'")
    con.close()
    recs = [
        (
            i,
            0,
            len(s.fingerprints),
            s.n_distinct,
            s.size,
            st.st_dev,
            st.st_ino,
            st.st_mtime_ns,
            s.digest,
        )
        for i, (s, st) in enumerate(zip(scans, stats, strict=True), start=1)
    ]
    paths = [os.fsencode(f) for f in files]
    seg = idx / "segments" / "seg-000001"
    os.makedirs(seg.parent)
    write_segment(str(seg), make_files(recs, paths), [s.fingerprints for s in scans])
    if version <= 2:  # before content views: V1 records
        whole_paths(seg, paths, np.array(recs, dtype=FILE_DTYPE_V1))
    elif version == 3:  # content views, before front coding
        whole_paths(seg, paths, make_files(recs, paths).records)
    entry: dict[str, object] = {"key": PARAMS.key(), "anchors": None}
    if version >= 3:
        entry["normalize"] = "raw"
    doc = {
        "format": 1,
        "generation": 1,
        "params": {"1": entry},
        "segments": {"1": ["seg-000001"]},
        "dead": None,
        "last_params": 1,
    }
    os.makedirs(idx / "manifests")
    (idx / "manifests" / "gen-00000001.json").write_text(json.dumps(doc))
    (idx / "CURRENT").write_text("gen-00000001\n")


def answers(idx: Path, root: Path) -> list[tuple[str, bool]]:
    reader = open_reader(idx)
    try:
        [res] = query_files([root / "q.txt"], reader, threshold=30)
    finally:
        reader.close()
    return [(m.path, m.exact) for m in res.matches]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_an_older_index_is_read_then_migrated_with_its_data_intact(
    tmp_path: Path, version: int
) -> None:
    files = corpus(tmp_path)
    idx = tmp_path / "idx"
    old_index(idx, version, files)
    want = [(str(files[0]), True), (str(files[1]), False)]
    assert answers(idx, tmp_path) == want  # read as it is: format-1 manifest, old segments
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sif",
            "query",
            "-t",
            "30",
            "--index",
            str(idx),
            str(tmp_path / "q.txt"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 3, proc.stderr
    with open_store(idx) as store:  # type: ignore[attr-defined]
        con = store.catalog()
        done = [
            r[0] for r in con.execute("SELECT version FROM sif_migrations ORDER BY 1").fetchall()
        ]
        assert done == list(range(1, SCHEMA_VERSION + 1))
        rows = con.execute(
            "SELECT id, path, origin, view, file_size, ctime_ns FROM files ORDER BY id"
        ).fetchall()
        assert rows == [  # schema 6: no origin kept where it is the path
            (i, os.fsencode(f), None, "raw", f.stat().st_size, None)
            for i, f in enumerate(files, start=1)
        ]
        keys = con.execute("SELECT origin_key, origin_check FROM files ORDER BY id").fetchall()
        secret = (idx / PATHKEY).read_bytes()  # made by the migration to schema 9
        assert keys == [path_key(os.fsencode(f), secret) for f in files]
        [(checks,)] = con.execute("SELECT checks FROM segments").fetchall()
        assert set(json.loads(checks)) >= {"fp.npy", "fid.npy", "files.npy", "paths.bin"}
        assert store.verify() == 1
    manifest = read_manifest(str(idx))
    assert manifest is not None and SNAPSHOT_FORMAT == 2 and "seg-000001" in manifest.checks
    assert answers(idx, tmp_path) == want  # migrated, same answers
    # No ctime was recorded: each file is read again once, under the same parameters.
    stats = build_index([tmp_path / "t"], idx, PARAMS, jobs=1, content=_raw())
    assert (stats.changed, stats.new, stats.unchanged) == (3, 0, 0)
    stats = build_index([tmp_path / "t"], idx, PARAMS, jobs=1, content=_raw())
    assert (stats.changed, stats.unchanged) == (0, 3)
    assert answers(idx, tmp_path) == want
    proc = subprocess.run(
        [sys.executable, "-m", "sif", "index", "--verify", "--index", str(idx)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def _raw():  # type: ignore[no-untyped-def]
    from sif.content import ContentOptions

    return ContentOptions(normalize="raw")


def test_an_entry_without_its_origin_key_is_damage(tmp_path: Path) -> None:
    from sif.errors import IndexCorrupt

    files = corpus(tmp_path)
    idx = tmp_path / "idx"
    build_index([tmp_path / "t"], idx, PARAMS, jobs=1)
    with open_store(idx) as store:  # type: ignore[attr-defined]
        store.catalog().execute(
            "UPDATE files SET origin_key = NULL WHERE path = ?", [os.fsencode(files[1])]
        )
    with pytest.raises(IndexCorrupt, match="without the key of their origin"):
        build_index([tmp_path / "t"], idx, PARAMS, jobs=1)
