"""A commit of the index (split from :mod:`sif.index.duck`): the per-file columns of its
entries in one pass (no per-file work left for the catalog and the segment to do), then
the segment and the catalog's transaction."""

from __future__ import annotations

import contextlib
import functools
import json
import operator
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import numpy.typing as npt

from sif.core.anchors import AnchorSet
from sif.fingerprint import FingerprintParams
from sif.index.checks import checksum_files
from sif.index.entries import Entries
from sif.index.segments import (
    FILE_DTYPE,
    U32,
    SegmentFiles,
    digest_column,
    joined_paths,
    write_segment,
)
from sif.index.store import NewFile, ParamSet, origin_keys, param_set

if TYPE_CHECKING:
    from sif.index.duck import DuckStore


class Columns:
    """The fields of the entries of a commit, one list each.

    From :class:`Entries` (what the workers send back, a list a field already) the
    lists are taken as they are and the fields derived from them are made in C
    (``map``); other entries (:class:`NewFile` objects) are made into
    :class:`Entries` first. A Python step an entry only where an origin, a size
    on disk or a ctime is not the plain case.
    """

    def __init__(self, added: Sequence[NewFile], unknown_ctime: int) -> None:
        kinds, views = codes()
        encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
        entries = Entries.of(added)
        names = entries.path
        self.paths = [p.encode(encoding, errors) for p in names]  # os.fsencode's bytes
        origin_names = entries.origin
        # An entry's origin is its own path (a plain file: the path, or None) but for
        # archive members and the like.
        if all(map(operator.eq, origin_names, names)):
            self.origins = self.paths
        else:
            self.origins = [
                p if o is None or o == n else o.encode(encoding, errors)
                for n, o, p in zip(names, origin_names, self.paths, strict=True)
            ]
        self.fingerprints = entries.fingerprints()
        self.kind_names = entries.kind
        self.view_names = entries.view
        self.kinds = list(map(kinds.__getitem__, self.kind_names))
        self.views = list(map(views.__getitem__, self.view_names))
        self.n_fp = entries.n_fp
        self.n_distinct = entries.n_distinct
        self.sizes = entries.size
        self.digests = entries.digest
        self.devs = entries.dev
        self.inos = entries.ino
        self.mtimes = entries.mtime_ns
        self.file_sizes = entries.file_size
        if None in self.file_sizes:  # unknown: the entry's own bytes (NewFile.disk_size)
            self.file_sizes = [
                z if z is not None else n for z, n in zip(self.file_sizes, self.sizes, strict=True)
            ]
        self.unknown_ctime = unknown_ctime
        self.ctimes = entries.ctime_ns
        if None in self.ctimes:
            self.ctimes = [unknown_ctime if c is None else c for c in self.ctimes]

    def local(self) -> npt.NDArray[np.uint32]:
        """The position of the entry of each fingerprint (:func:`write_segment`'s ``local``)."""
        n = len(self.n_fp)
        return np.repeat(np.arange(n, dtype=np.uint32), np.asarray(self.n_fp, dtype=np.int64))

    def files(self, ids: npt.NDArray[np.uint32]) -> SegmentFiles:
        """The segment's files of these entries under ``ids`` (ascending), a column at a
        time (numpy fills each from its list in C); what :func:`make_files` gives."""
        n = len(ids)
        rec = np.zeros(n, dtype=FILE_DTYPE)
        rec["id"] = ids
        rec["kind"], rec["view"] = self.kinds, self.views
        rec["n_fp"], rec["n_distinct"], rec["size"] = self.n_fp, self.n_distinct, self.sizes
        rec["dev"], rec["ino"], rec["mtime_ns"] = self.devs, self.inos, self.mtimes
        rec["digest"] = digest_column(self.digests)
        rec["olen"] = list(map(len, self.origins))
        return SegmentFiles(rec, *joined_paths(self.paths))


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
    pid = self._params_id(param_set(params), anchors)
    first = self._int_meta("next_file_id")
    seg_id = self._int_meta("next_segment_id")
    name = f"seg-{seg_id:06d}"
    ids = np.arange(first, first + len(added), dtype=np.uint32)
    segment = None
    try:
        if added:
            cols = Columns(added, unknown_ctime)
            directory = os.path.join(self.root, "segments", name)
            segment = SegmentWrite(directory, cols.files(ids), cols.fingerprints, cols.local())
        _transaction(self, pid, seg_id, name, ids, cols if added else None, segment, dropped)
    finally:
        if segment is not None:
            segment.wait()  # never a thread left writing once this returns, Ctrl-C or not
    if added:
        self.written.setdefault(pid, []).append(seg_id)
    self._publish()


class SegmentWrite:
    """:func:`write_segment` and the checksums of its files, in a thread, while the
    catalog's rows of the commit go in (its sort, writes and fsyncs, and DuckDB's
    insert, leave the GIL): the tail of a run of 7,773 Linux files, one commit, was
    these two one after the other (30 and 23 ms)."""

    def __init__(self, directory: str, files: SegmentFiles, values: U32, local: U32) -> None:
        self._done = threading.Event()
        self._checks = ""
        self._error: BaseException | None = None
        args = (directory, files, values, local)
        self._thread = threading.Thread(
            target=self._run, args=args, name="sif-segment", daemon=True
        )
        try:
            self._thread.start()
        except BaseException:
            # Ctrl-C inside start() (it waits for the thread to run): the caller has no
            # object to wait on, so the thread, if it runs, is waited for here.
            if self._thread.ident is not None:
                self.wait()
            raise

    def _run(self, directory: str, files: SegmentFiles, values: U32, local: U32) -> None:
        try:
            write_segment(directory, files, values, local)
            self._checks = json.dumps(checksum_files(directory))
        except BaseException as e:  # a full disk: raised in the caller by result()
            self._error = e
        finally:
            self._done.set()

    def wait(self) -> None:
        """Until the segment is written or failed; a Ctrl-C meanwhile is raised after
        (a thread writing into the index after its commit failed and its lock was let
        go could meet the next writer's segment of the same number)."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._done.wait()
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted

    def result(self) -> str:
        """The checksums of the segment's files (JSON), once written; else its error."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._checks


def _transaction(
    self: DuckStore,
    pid: int,
    seg_id: int,
    name: str,
    ids: npt.NDArray[np.uint32],
    cols: Columns | None,
    segment: SegmentWrite | None,
    dropped: Sequence[int],
) -> None:
    """The commit's transaction: the files' rows (while ``segment`` is written), the
    segment's row once it is, the dropped files, the counters; rolled back on any
    failure, the segment's included."""
    con = self._con
    con.execute("BEGIN TRANSACTION")
    try:
        if cols is not None:
            assert segment is not None
            obj = functools.partial(np.array, dtype=object)
            okeys, ochecks = origin_keys(cols.origins, len(cols.origins), self.path_secret)
            batch = {
                "id": ids,
                "path": obj(cols.paths),
                "dev": np.array(cols.devs, dtype=np.uint64),
                "ino": np.array(cols.inos, dtype=np.uint64),
                "size": np.array(cols.sizes, dtype=np.int64),
                "mtime_ns": np.array(cols.mtimes, dtype=np.int64),
                "kind": obj(cols.kind_names),
                "digest": obj(cols.digests),
                "n_fp": np.array(cols.n_fp, dtype=np.uint32),
                "n_distinct": np.array(cols.n_distinct, dtype=np.uint32),
                "view": obj(cols.view_names),
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
                f"nullif(ctime_ns, {cols.unknown_ctime}), origin_key, origin_check "
                "FROM sif_batch",
                [pid, seg_id],
            )
            con.unregister("sif_batch")
            checks = segment.result()
            con.execute(
                "INSERT INTO segments (id, params_id, name, files, rows, checks) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [seg_id, pid, name, len(ids), sum(cols.n_fp), checks],
            )
            self._set_meta("next_file_id", int(ids[-1]) + 1)
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
