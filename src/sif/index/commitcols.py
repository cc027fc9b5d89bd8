"""A commit of the index (split from :mod:`sif.index.duck`): the per-file columns of its
entries in one pass (no per-file work left for the catalog and the segment to do), then
the segment and the catalog's transaction."""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from sif.core.anchors import AnchorSet
from sif.fingerprint import FingerprintParams
from sif.index.checks import checksum_files
from sif.index.segments import make_files, write_segment
from sif.index.store import NewFile, ParamSet, origin_keys, param_set

if TYPE_CHECKING:
    from sif.index.duck import DuckStore


class Columns:
    """The fields of the entries of a commit, one list each, made in one pass."""

    def __init__(self, added: Sequence[NewFile], unknown_ctime: int) -> None:
        enc = os.fsencode
        kinds, views = codes()
        self.scans = [f.scan for f in added]
        self.paths = [enc(f.path) for f in added]
        self.origins = [
            p if f.origin is None or f.origin == f.path else enc(f.origin)
            for f, p in zip(added, self.paths, strict=True)
        ]
        self.fingerprints = [s.fingerprints for s in self.scans]
        self.kinds = [kinds[s.kind] for s in self.scans]
        self.views = [views[s.view] for s in self.scans]
        self.n_fp = [len(v) for v in self.fingerprints]
        self.n_distinct = [s.n_distinct for s in self.scans]
        self.sizes = [s.size for s in self.scans]
        self.digests = [s.digest for s in self.scans]
        self.devs = [f.dev for f in added]
        self.inos = [f.ino for f in added]
        self.mtimes = [f.mtime_ns for f in added]
        self.file_sizes = [f.disk_size for f in added]
        self.ctimes = [unknown_ctime if f.ctime_ns is None else f.ctime_ns for f in added]


@functools.cache
def codes() -> tuple[dict[str, int], dict[str, int]]:
    """The codes of :func:`sif.index.store.kind_code` and ``view_code``, as dicts."""
    from sif.content import KINDS, VIEW_NAMES

    return {k: i for i, k in enumerate(KINDS)}, {v: i for i, v in enumerate(VIEW_NAMES)}


def commit_entries(
    store: DuckStore,
    params: FingerprintParams | ParamSet,
    anchors: AnchorSet | None,
    added: Sequence[NewFile],
    dropped: Sequence[int],
    unknown_ctime: int,
) -> None:
    """:meth:`DuckStore.commit`: a segment of ``added``, then one transaction that names
    it, adds their catalog rows and drops ``dropped``, then a publish."""
    self = store
    con = self._con
    pid = self._params_id(param_set(params), anchors)
    first = self._int_meta("next_file_id")
    seg_id = self._int_meta("next_segment_id")
    name = f"seg-{seg_id:06d}"
    ids = np.arange(first, first + len(added), dtype=np.uint32)
    if added:
        cols = Columns(added, unknown_ctime)
        files = make_files(
            list(
                zip(
                    ids.tolist(),
                    cols.kinds,
                    cols.n_fp,
                    cols.n_distinct,
                    cols.sizes,
                    cols.devs,
                    cols.inos,
                    cols.mtimes,
                    cols.digests,
                    cols.views,
                    [len(o) for o in cols.origins],
                    strict=True,
                )
            ),
            cols.paths,
        )
        directory = os.path.join(self.root, "segments", name)
        write_segment(directory, files, cols.fingerprints)
        checks = json.dumps(checksum_files(directory))
    con.execute("BEGIN TRANSACTION")
    try:
        if added:
            obj = functools.partial(np.array, dtype=object)
            okeys, ochecks = origin_keys(cols.origins, len(cols.origins), self.path_secret)
            batch = {
                "id": ids,
                "path": obj(cols.paths),
                "dev": np.array(cols.devs, dtype=np.uint64),
                "ino": np.array(cols.inos, dtype=np.uint64),
                "size": np.array(cols.sizes, dtype=np.int64),
                "mtime_ns": np.array(cols.mtimes, dtype=np.int64),
                "kind": obj([s.kind for s in cols.scans]),
                "digest": obj(cols.digests),
                "n_fp": np.array(cols.n_fp, dtype=np.uint32),
                "n_distinct": np.array(cols.n_distinct, dtype=np.uint32),
                "view": obj([s.view for s in cols.scans]),
                "origin": obj(cols.origins),
                "file_size": np.array(cols.file_sizes, dtype=np.int64),
                "ctime_ns": np.array(cols.ctimes, dtype=np.int64),
                "origin_key": okeys,
                "origin_check": ochecks,
            }
            con.register("sif_batch", batch)
            con.execute(
                "INSERT INTO files (id, params_id, path, dev, ino, size, mtime_ns, kind, "
                "digest, n_fp, n_distinct, segment, view, origin, file_size, ctime_ns, "
                "origin_key, origin_check) "
                "SELECT id, ?, path, dev, ino, size, mtime_ns, kind, digest, n_fp, "
                "n_distinct, ?, view, nullif(origin, path), file_size, "
                f"nullif(ctime_ns, {unknown_ctime}), origin_key, origin_check "
                "FROM sif_batch",
                [pid, seg_id],
            )
            con.unregister("sif_batch")
            con.execute(
                "INSERT INTO segments (id, params_id, name, files, rows, checks) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [seg_id, pid, name, len(added), sum(cols.n_fp), checks],
            )
            self._set_meta("next_file_id", first + len(added))
            self._set_meta("next_segment_id", seg_id + 1)
        if dropped:
            con.register("sif_drop", {"id": np.asarray(dropped, dtype=np.uint32)})
            con.execute(
                "INSERT INTO dead SELECT id, segment, n_fp FROM files "
                "WHERE id IN (SELECT id FROM sif_drop)"
            )
            con.execute("DELETE FROM files WHERE id IN (SELECT id FROM sif_drop)")
            con.unregister("sif_drop")
        self._set_meta("last_params", pid)
        self._set_meta("generation", self._int_meta("generation") + 1)
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has rolled back
            con.execute("ROLLBACK")
        raise
    if added:
        self.written.setdefault(pid, []).append(seg_id)
    self._publish()
