"""What ``sif index --info`` shows and what ``sif index --verify`` checks.

Both open the catalog read-only (:class:`sif.index.duck.DuckStore`) under the
lock and change nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any

from sif.errors import IndexUnusable, SifError
from sif.fingerprint import FingerprintParams
from sif.index.checks import corrupt
from sif.index.manifest import same_state
from sif.index.store import LEGACY_NORMALIZE, ParamSet


@dataclass(frozen=True)
class SetInfo:
    """One parameter set of an index, for ``sif index --info``."""

    params: ParamSet
    files: int
    rows: int
    segments: int
    last_run: dict[str, Any] | None
    """``{"time": seconds since the epoch, "roots": [...]}`` of its last run, if known."""


@dataclass(frozen=True)
class IndexInfo:
    """What ``sif index --info`` shows: the sets, the bytes on disk, the last run's set."""

    root: str
    sets: list[SetInfo]
    bytes: int
    schema: int
    generation: int
    last_params: ParamSet | None


def index_info(root: str, *, wait: bool = False) -> IndexInfo:
    """The parameter sets with their entries, segments and last runs; the bytes on disk.

    Raises :class:`IndexUnusable` when there is no index at ``root`` (or its
    schema is older: ``sif index`` migrates it) and :class:`IndexCorrupt`.
    """
    from sif.index.duck import CATALOG, DuckStore, catalog_errors

    catalog = os.path.join(root, CATALOG)
    with DuckStore(root, wait=wait, read_only=True) as store, catalog_errors(catalog):
        con = store.catalog()
        rows = con.execute(
            "SELECT p.id, p.key, p.normalize, p.last_run, "
            "(SELECT count(*) FROM files f WHERE f.params_id = p.id), "
            "(SELECT coalesce(sum(s.rows), 0) FROM segments s WHERE s.params_id = p.id), "
            "(SELECT count(*) FROM segments s WHERE s.params_id = p.id) "
            "FROM params p ORDER BY p.id"
        ).fetchall()
        version = con.execute("SELECT max(version) FROM sif_migrations").fetchone()
        meta = dict(con.execute("SELECT key, value FROM sif_meta").fetchall())
    sets: list[SetInfo] = []
    last_set = None
    for pid, key, normalize, last_run, n_files, n_rows, n_segments in rows:
        try:
            ps = ParamSet(
                FingerprintParams.from_dict(json.loads(key)), normalize or LEGACY_NORMALIZE
            )
            run = json.loads(last_run) if last_run else None
        except (ValueError, TypeError, SifError) as exc:
            raise corrupt(catalog, f"unreadable parameter set {pid}") from exc
        sets.append(SetInfo(ps, int(n_files), int(n_rows), int(n_segments), run))
        if str(pid) == meta.get("last_params"):
            last_set = ps
    size = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(dirpath, n)).st_size
    try:
        generation = int(meta.get("generation", 0))
    except ValueError:
        raise corrupt(catalog, "an unreadable generation") from None
    return IndexInfo(
        os.path.abspath(root),
        sets,
        size,
        int(version[0]) if version and version[0] is not None else 0,
        generation,
        last_set,
    )


@dataclass(frozen=True)
class VerifyResult:
    """What ``sif index --verify`` checked."""

    segments: int
    unchecked: int
    """Segments published without a checksum (by an older sif): checked for consistency."""
    files: int


def verify_index(root: str, *, wait: bool = False) -> VerifyResult:
    """Check the whole index at ``root``: every block of the catalog, every segment
    against its length and checksum, the published manifest against the catalog
    and the dead-id file. Changes nothing. Raises :class:`IndexCorrupt` naming
    the first damage. Cost: one read of the index.
    """
    from sif.index.duck import DuckStore
    from sif.index.reader import SnapshotReader

    with DuckStore(root, wait=wait, read_only=True) as store:
        n = store.verify()
        recorded = store.recorded_state()
        reader = SnapshotReader(root)
        try:
            _, unchecked = reader.verify()
            if reader.manifest.generation < recorded[0].generation:
                raise IndexUnusable(
                    f"{root}: the last commit is not published yet (a writer was killed?); "
                    "'sif index' publishes it"
                )
            if not same_state(reader.manifest, recorded):
                where = os.path.join(
                    root, "manifests", f"gen-{reader.manifest.generation:08d}.json"
                )
                raise corrupt(where, "the published state differs from the catalog's")
        finally:
            reader.close()
        files = sum((recorded[0].files or {}).values())
    return VerifyResult(n, unchecked, files)
