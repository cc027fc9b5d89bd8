"""The on-disk index: a DuckDB catalog, immutable fingerprint segments, a lock.

Layout of an index directory (sif writes and deletes nothing else in it,
:mod:`sif.index.indexdir`)::

    SIF-INDEX             the marker: "sif-index 1"; sif writes only into a marked dir
    lock                  flock'ed by the one writer (holds its pid), shared by readers
    catalog.duckdb        the writer's database of record (schema below)
    segments/seg-NNNNNN/  fingerprint rows and file metadata (sif.index.segments)
    manifests/gen-N.json  a published state; CURRENT names the one in force
    anchors/DIGEST.json   anchor sets of the ``anchors`` parameter sets
    tmp/                  DuckDB's spill files; tmp/rebuild-XXXXXXXX/ a rebuild under way

A rebuild (``--rebuild``) writes a new catalog and segments in
``tmp/rebuild-*``, numbered after the old ones, and swaps them in at the end
(:meth:`DuckStore._swap_in`): until then readers answer from the old state.

Why two stores: DuckDB lets no other process open a file while one process
writes it, so ``sif query`` during ``sif index`` could not read a DuckDB
table. The fingerprints are therefore written once, into immutable
segments that readers memory-map; the catalog holds everything else, and
the list of segments. Measured at 20 M rows (bench/query.py): a lookup in
the segments takes milliseconds where a DuckDB scan takes tens, and a
process that only needs numpy skips DuckDB's 0.13 s import.

Damage (a flipped byte, a truncated or emptied file) is
:class:`sif.errors.IndexCorrupt` ("index corrupt: PATH (cause); run with
--rebuild"), never a default: every DuckDB error is mapped to it in one
place (:func:`catalog_errors`), every table is read once when the catalog
is opened (DuckDB checks its blocks' checksums as it reads them), and
:meth:`DuckStore.verify` compares every segment with its checksum.

Crash safety (SIGKILL at any moment): a commit writes its segment under a
temporary name, fsyncs and renames it, then commits one DuckDB transaction
that names it, then publishes a manifest. A writer checkpoints the catalog
when it closes and after a migration, so that the catalog's WAL
(``catalog.duckdb.wal``) is only ever a killed writer's, which DuckDB's
recovery replays and the next writer checkpoints at once
(:mod:`sif.index.catalogdb`); a rebuild checkpoints its catalog before it
moves it, and folds a killed writer's WAL into the old one first. A crash
before the transaction leaves an orphan directory that the next writer
deletes; a crash after it and before the publish is published by the next
writer; a catalog behind the published manifest (its last commits lost) is
damage, and nothing is deleted by it. Readers only ever see a published
manifest. File ids are never reused.

Catalog schema (version :data:`SCHEMA_VERSION`, migrations recorded in
``sif_migrations``):

- ``sif_meta(key, value)``: ``app`` = ``sif``, counters ``next_file_id``,
  ``next_segment_id``, ``generation``, and ``last_params``;
- ``params(id, key, anchors, normalize, last_run)``: one row per parameter set
  (:class:`sif.index.store.ParamSet`: :meth:`FingerprintParams.key` and the
  content normalisation mode), with the anchor set's JSON if any, and the
  JSON ``{"time", "roots"}`` of the last ``sif index`` run under it;
- ``files(id, params_id, path BLOB, dev, ino, size, mtime_ns, kind, digest
  BLOB, n_fp, n_distinct, segment, view, origin BLOB, file_size, ctime_ns,
  origin_key, origin_check)``:
  the live entries: ``path`` is the entry's (``a.zip!/x.txt`` for a member),
  ``view`` its content view, ``size`` and ``digest`` of its content;
  ``origin`` (NULL when it is ``path``, since schema 6: read it as
  ``coalesce(origin, path)``), ``dev``, ``ino``, ``file_size``, ``mtime_ns`` and ``ctime_ns``
  are those of the file on disk that holds it, which tell whether it changed
  (``ctime_ns`` NULL: indexed before schema 5, unknown, so read again once);
  ``origin_key`` and ``origin_check`` the two halves of the origin's key
  (:mod:`sif.pathkeys`, since schema 8), by which a run's plan meets the walk;
- ``segments(id, params_id, name, files, rows, checks)``: ``checks`` the JSON
  of each file's length and checksum (:func:`sif.index.segments.checksum_files`),
  computed from the files on disk for segments made before schema 5;
- ``dead(id, segment, n_fp)``: files dropped whose rows remain in a segment
  until a compaction merges it (:func:`sif.index.compaction.tidy`);
- ``similar_runs(run_key, stopped, pairs, created, walk_digest)`` and
  ``similar_pairs(a, b, shared, hits_a, hits_b, exact_ab, exact_ba, exact_n)``: the pair
  counts of the last ``sif similar`` run (:mod:`sif.similar`) and their scores
  (``exact_n``: the values of the window sample a score of two large files was
  taken on, NULL when it is over every window, since schema 7), valid while the
  generation in ``run_key`` is current; ``walk_digest`` is the digest of the stat
  walk that the index matched then (:meth:`sif.walk.RecordColumns.digest`), or
  NULL, so that a re-threshold can tell with a walk alone that nothing changed.

Split from this module, each a function of the store: a commit
(:mod:`sif.index.commitcols`), compaction and its policy
(:mod:`sif.index.compaction`), the files a run's plan compares with
(:mod:`sif.index.known`); and the catalog's DuckDB file itself, its connection,
errors, migrations and WAL (:mod:`sif.index.catalogdb`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import duckdb
import numpy as np
import numpy.typing as npt

from sif.core.anchors import AnchorSet
from sif.errors import IndexCorrupt, IndexUnusable
from sif.fingerprint import FingerprintParams
from sif.index import catalogdb, compaction, indexdir, known
from sif.index.catalogdb import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported
from sif.index.catalogdb import catalog_errors as catalog_errors  # re-exported
from sif.index.checks import Check, checksum_files, corrupt, verify_segment
from sif.index.commitcols import commit_entries
from sif.index.manifest import Manifest, dead_sound, publish, read_manifest, same_state
from sif.index.schema import PATHKEY_SCHEMA
from sif.index.segments import Segment
from sif.index.store import (
    KnownColumns,
    KnownFile,
    NewFile,
    ParamSet,
    param_set,
)
from sif.pathkeys import secret_check

CATALOG = indexdir.CATALOG
#: ``ctime_ns`` of a file indexed before it was recorded (schema 5): it never equals a
#: file's, so the file is read again once.
UNKNOWN_CTIME = -(1 << 63)


def _own_segment(name: str) -> bool:
    return indexdir.SEGMENT_NAME.match(name) is not None


def _write_error(root: str, exc: BaseException) -> IndexUnusable | None:
    """A failure to write the index (permission denied, no space left) as one clear error."""
    if isinstance(exc, OSError):
        return indexdir.cannot_write(root, exc)
    if not isinstance(exc, duckdb.Error):
        return None
    refused = catalogdb.write_refused(exc)  # a fatal error's cause is on a later line
    if refused or isinstance(exc, duckdb.IOException | duckdb.TransactionException):
        cause = refused or (str(exc).splitlines() or [type(exc).__name__])[0]
        return IndexUnusable(
            f"cannot write the index {root}: {cause}; it keeps its last committed state"
        )
    return None


_M = TypeVar("_M", bound=Callable[..., Any])


def _writes(method: _M) -> _M:
    """Mark a method that writes the index: its I/O errors become :func:`_write_error`."""

    @functools.wraps(method)
    def wrapper(self: DuckStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (OSError, duckdb.Error) as exc:
            error = _write_error(self.directory, exc)
            if error is None:
                raise
            raise error from exc

    return wrapper  # type: ignore[return-value]


def _open_segment(directory: str, check: Check | None = None) -> Segment:
    """A segment the catalog names (under the lock: a missing file is damage)."""
    try:
        return Segment(directory, check)
    except FileNotFoundError as exc:
        raise corrupt(exc.filename or directory, "missing") from None


class DuckStore:
    """The :class:`sif.index.store.IndexStore` on disk. See the module docstring.

    The directory is made safe first (:func:`sif.index.indexdir.prepare`): sif
    writes only into a new, empty or marked directory. ``rebuild`` builds a new
    index in ``tmp/rebuild-XXXXXXXX`` while the old one keeps answering, and
    swaps it in at :meth:`finish`; closed before, the new one is discarded.

    ``read_only``: the catalog is opened read-only (DuckDB writes nothing, not
    even its WAL), under a shared lock (several readers at once, no writer),
    and nothing is created, migrated or recovered: :class:`sif.errors.IndexUnusable`
    if there is no catalog yet, :class:`IndexCorrupt` if its schema is not
    :data:`SCHEMA_VERSION` (opening it for writing migrates it). For a reader of
    the catalog that changes nothing (a re-threshold of ``sif similar``); the
    protocol's writes fail. Errors writing the directory (permission denied, no
    space left) are :class:`IndexUnusable` naming the path and the cause.

    ``cancel``: with ``wait``, the lock is polled, and setting the event gives up the
    wait (:class:`sif.index.indexdir.Cancelled`; :mod:`sif.index.opening`).
    """

    def __init__(
        self,
        root: str,
        *,
        wait: bool = False,
        rebuild: bool = False,
        read_only: bool = False,
        cancel: threading.Event | None = None,
    ) -> None:
        self.root = self.directory = os.path.abspath(root)
        self._staging: str | None = None
        self.written: dict[int, list[int]] = {}
        """The segments this store's commits wrote, by parameter set (see :meth:`_tidy`)."""
        self._lock_fd = -1
        self._exclusive = not read_only
        self._secret: bytes | None = None
        if read_only:
            if not os.path.exists(os.path.join(self.root, CATALOG)):
                raise IndexUnusable(f"no index at {self.root} yet")
            indexdir.check_marker(self.root)
        else:
            indexdir.prepare(self.root)
        try:
            self._lock_fd = indexdir.lock(self.root, wait, shared=read_only, cancel=cancel)
            if read_only:
                self._con = self._connect(read_only=True)
                self._check_schema()
                return
            self._given_up(cancel)
            indexdir.mark(self.root)
            indexdir.check_layout(self.root, repair=rebuild)
            indexdir.clear_staging(self.root)
            if rebuild:
                self._start_rebuild()
                return
            self._con = self._connect()
            self._given_up(cancel)
            self._secret = self._open_secret()
            self._migrate()
            self._check_secret(self._secret)
            self._recover()
        except BaseException as exc:
            self.close()
            error = _write_error(self.directory, exc)
            if error is not None:
                raise error from exc
            raise

    # --- exclusivity --------------------------------------------------------------

    @staticmethod
    def _given_up(cancel: threading.Event | None) -> None:
        """Stop opening (nothing written yet) once ``cancel`` is set."""
        if cancel is not None and cancel.is_set():
            raise indexdir.Cancelled("the index was not opened: stopped")

    def _unlock(self) -> None:
        indexdir.unlock(self._lock_fd, self._exclusive)
        self._lock_fd = -1

    # --- rebuilding beside the old index --------------------------------------------

    def _start_rebuild(self) -> None:
        """Open a new catalog in ``tmp/rebuild-*``; its names follow the old index's."""
        tmp = os.path.join(self.directory, "tmp")
        os.makedirs(tmp, exist_ok=True)
        self._staging = self.root = indexdir.temp_dir(tmp, indexdir.STAGING_PREFIX)
        os.makedirs(os.path.join(self.root, "segments"))
        self._con = self._connect()
        # The index's secret: kept (the walk used it), or made anew if it is damaged.
        self._secret = indexdir.ensure_pathkey(self.directory)
        self._migrate()
        last_segment, last_generation = indexdir.used_numbers(self.directory)
        self._set_meta("next_segment_id", last_segment + 1)
        self._set_meta("generation", last_generation)

    def _swap_in(self) -> None:
        """Make the rebuilt index the index: segments first, then the catalog, then CURRENT.

        Killed before the catalog's rename, the old index stands (the next writer
        deletes the moved segments as orphans); after, the next writer publishes.
        """
        home, stage = self.directory, self.root
        catalogdb.checkpoint(self._con)  # all in the file that moves: no WAL of its own
        self._con.close()
        self._con = None  # type: ignore[assignment]
        catalogdb.fold_wal(home, home)  # a killed writer's WAL, into the old catalog
        segdir = os.path.join(home, "segments")
        os.makedirs(segdir, exist_ok=True)
        for name in os.listdir(os.path.join(stage, "segments")):
            os.rename(os.path.join(stage, "segments", name), os.path.join(segdir, name))
        indexdir.fsync_dir(segdir)
        # The old catalog's WAL, never the new one's to replay; one is left only when
        # DuckDB could not fold it (a damaged catalog), and a kill right after this
        # finds the catalog behind its manifest, which _recover refuses.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(home, CATALOG + ".wal"))
        os.replace(os.path.join(stage, CATALOG), os.path.join(home, CATALOG))
        indexdir.fsync_dir(home)
        self.root, self._staging = home, None
        self._con = self._connect()
        self._publish()
        shutil.rmtree(stage, ignore_errors=True)

    # --- the catalog (sif.index.catalogdb) ------------------------------------------

    def _connect(self, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        return catalogdb.connect(self.root, self.directory, read_only)

    def _migrate(self) -> None:
        assert self._secret is not None
        catalogdb.migrate(self._con, self.root, self._secret)

    # --- the path keys' secret (sif.pathkeys, indexdir.PATHKEY) -------------------------

    def _open_secret(self) -> bytes:
        """The secret of the index's path keys: made if the catalog has no keys under one
        yet (new, or before schema 9: the migration computes them), else read
        (:class:`IndexCorrupt` when it is missing or damaged)."""
        version = catalogdb.schema_version(self._con, self.root)
        if version is None or version < PATHKEY_SCHEMA:
            return indexdir.ensure_pathkey(self.directory)
        return indexdir.read_pathkey(self.directory)

    def _check_secret(self, secret: bytes) -> None:
        """:class:`IndexCorrupt` unless ``secret`` is the one the catalog's keys are under
        (its check, recorded by the migration to schema 9)."""
        if self._meta("path_key") != secret_check(secret):
            raise corrupt(
                os.path.join(self.directory, indexdir.PATHKEY),
                "not the secret of the catalog's keys",
            )

    @property
    def path_secret(self) -> bytes:
        """The secret of the index's path keys (:mod:`sif.pathkeys`); a reader's is read
        when first asked, and checked against the catalog."""
        if self._secret is None:
            secret = indexdir.read_pathkey(self.directory)
            self._check_secret(secret)
            self._secret = secret
        return self._secret

    def _check_schema(self) -> None:
        catalogdb.check_schema(self._con, self.root)

    def _meta(self, key: str) -> str:
        with catalog_errors(os.path.join(self.root, CATALOG)):
            row = self._con.execute("SELECT value FROM sif_meta WHERE key = ?", [key]).fetchone()
        if row is None:
            raise corrupt(os.path.join(self.root, CATALOG), f"the catalog lacks {key}")
        return str(row[0])

    def _int_meta(self, key: str) -> int:
        value = self._meta(key)
        try:
            return int(value) if value else 0
        except ValueError:
            raise corrupt(os.path.join(self.root, CATALOG), f"{key} is {value[:20]!r}") from None

    def _set_meta(self, key: str, value: object) -> None:
        self._con.execute("UPDATE sif_meta SET value = ? WHERE key = ?", [str(value), key])

    def _recover(self) -> None:
        """Delete what a killed writer left unnamed; publish what it committed."""
        segdir = os.path.join(self.root, "segments")
        os.makedirs(segdir, exist_ok=True)
        catalog = os.path.join(self.root, CATALOG)
        try:
            published = read_manifest(self.root)
        except (FileNotFoundError, IndexCorrupt):
            published = None
        if (
            published is not None
            and (generation := self._int_meta("generation")) < published.generation
        ):  # never delete by a catalog that lost commits (a WAL gone, a file put back)
            raise corrupt(
                catalog,
                f"generation {generation}, behind the published {published.generation}: "
                "its last commits are lost",
            )
        with catalog_errors(catalog):
            rows = self._con.execute("SELECT id, name, checks FROM segments").fetchall()
        named = {r[1] for r in rows}
        for name in os.listdir(segdir):
            if name not in named and _own_segment(name):
                indexdir.remove_entry(os.path.join(segdir, name))
        for name in sorted(named):
            if not os.path.isdir(os.path.join(segdir, name)):
                raise corrupt(os.path.join(segdir, name), "a segment the catalog names is missing")
        for seg_id, name, checks in rows:
            if checks is None:  # made before schema 5: checked for consistency, then recorded
                directory = os.path.join(segdir, name)
                _open_segment(directory).close()
                with catalog_errors(catalog):
                    self._con.execute(
                        "UPDATE segments SET checks = ? WHERE id = ?",
                        [json.dumps(checksum_files(directory)), seg_id],
                    )
        if (
            published is None
            or not same_state(published, self.recorded_state())
            or not dead_sound(self.root, published)
        ):
            # Never published, a killed writer's commit, or a damaged manifest: the
            # catalog is the record, and the manifest is made from it again.
            self._publish()

    def verify(self) -> int:
        """Compare every segment the catalog names with its recorded lengths and checksums.

        Returns the number of segments checked; raises :class:`IndexCorrupt`
        naming the first damaged file. What ``sif index`` does before it builds
        on the index. Cost: one read of every segment (XXH3, several GB/s). The
        path keys' secret is checked against the catalog too.
        """
        if self._staging is None:
            self._check_secret(indexdir.read_pathkey(self.directory))
        for name, check in self._checks().items():
            directory = os.path.join(self.root, "segments", name)
            _open_segment(directory, check).close()
            verify_segment(directory, check)
        return len(self._checks())

    def _checks(self) -> dict[str, Check]:
        catalog = os.path.join(self.root, CATALOG)
        with catalog_errors(catalog):
            rows = self._con.execute("SELECT name, checks FROM segments ORDER BY id").fetchall()
        out: dict[str, Check] = {}
        for name, checks in rows:
            try:
                value = json.loads(checks)
                if not isinstance(value, dict):
                    raise ValueError("not an object")
            except (TypeError, ValueError) as exc:
                raise corrupt(catalog, f"unreadable checks of segment {name}") from exc
            out[str(name)] = value
        return out

    # --- the protocol ------------------------------------------------------------------

    def _find_params(self, ps: ParamSet) -> int | None:
        with catalog_errors(os.path.join(self.root, CATALOG)):
            row = self._con.execute(
                "SELECT id FROM params WHERE key = ? AND normalize = ?",
                [ps.params.key(), ps.normalize],
            ).fetchone()
        return None if row is None else int(row[0])

    def _params_id(self, ps: ParamSet, anchors: AnchorSet | None) -> int:
        pid = self._find_params(ps)
        if pid is not None:
            return pid
        pid = int(self._con.execute("SELECT coalesce(max(id), 0) + 1 FROM params").fetchone()[0])  # type: ignore[index]
        text = anchors.to_json() if anchors is not None else None
        self._con.execute(
            "INSERT INTO params (id, key, anchors, normalize) VALUES (?, ?, ?, ?)",
            [pid, ps.params.key(), text, ps.normalize],
        )
        return pid

    def known_files(self, params: FingerprintParams | ParamSet) -> dict[str, KnownFile]:
        return self.known_columns(params).by_origin()

    def known_columns(self, params: FingerprintParams | ParamSet) -> KnownColumns:
        """One row per live entry (:func:`sif.index.known.known_columns`)."""
        pid = self._find_params(param_set(params))
        if pid is None:
            return KnownColumns.empty()
        with catalog_errors(os.path.join(self.root, CATALOG)):
            return known.known_columns(self, pid, self.path_secret)

    @_writes
    def commit(
        self,
        params: FingerprintParams | ParamSet,
        anchors: AnchorSet | None,
        added: Sequence[NewFile],
        dropped: Sequence[int],
    ) -> None:
        with catalog_errors(os.path.join(self.root, CATALOG)):
            self._commit(params, anchors, added, dropped)

    def _commit(
        self,
        params: FingerprintParams | ParamSet,
        anchors: AnchorSet | None,
        added: Sequence[NewFile],
        dropped: Sequence[int],
    ) -> None:
        commit_entries(self, params, anchors, added, dropped, UNKNOWN_CTIME)

    @_writes
    def finish(
        self, params: FingerprintParams | ParamSet, roots: Sequence[str] | None = None
    ) -> None:
        """Compact if due and record ``roots`` as the set's last run (for ``--info``).

        A rebuild's new index replaces the old one here.
        """
        with catalog_errors(os.path.join(self.root, CATALOG)):
            self._finish(params, roots)
        if self._staging is not None:
            self._swap_in()

    def _finish(self, params: FingerprintParams | ParamSet, roots: Sequence[str] | None) -> None:
        found = self._find_params(param_set(params))
        if found is None:
            return
        if roots is not None:
            run = json.dumps({"time": time.time(), "roots": list(roots)})
            self._con.execute("UPDATE params SET last_run = ? WHERE id = ?", [run, found])
        self._tidy(found)

    def _tidy(self, pid: int) -> None:
        """Compaction at the end of a run (:func:`sif.index.compaction.tidy`)."""
        compaction.tidy(self, pid, self.written.pop(pid, []))

    @_writes
    def compact(self, pid: int, segments: list[int] | None = None) -> None:
        """Merge the segments ``segments`` (ids; default: every one) of parameter set
        ``pid`` into one, without dead rows (:func:`sif.index.compaction.compact`:
        streamed, memory bounded)."""
        compaction.compact(self, pid, segments)

    def recorded_state(self) -> tuple[Manifest, npt.NDArray[np.uint32], dict[str, str]]:
        """The state the catalog records: (manifest, dead ids, anchor file -> JSON)."""
        con = self._con
        params: dict[int, dict[str, Any]] = {}
        anchor_files: dict[str, str] = {}
        with catalog_errors(os.path.join(self.root, CATALOG)):
            for pid, key, anchors, normalize in con.execute(
                "SELECT id, key, anchors, normalize FROM params"
            ).fetchall():
                entry: dict[str, Any] = {"key": key, "anchors": None, "normalize": normalize}
                if anchors:
                    fname = f"{AnchorSet.from_json(anchors).digest}.json"
                    anchor_files[fname] = anchors
                    entry["anchors"] = fname
                params[int(pid)] = entry
            segments: dict[int, list[str]] = {}
            for pid, name in con.execute(
                "SELECT params_id, name FROM segments ORDER BY id"
            ).fetchall():
                segments.setdefault(int(pid), []).append(name)
            files = {
                int(pid): int(n)
                for pid, n in con.execute(
                    "SELECT params_id, count(*) FROM files GROUP BY params_id"
                ).fetchall()
            }
            dead = con.execute("SELECT id FROM dead").fetchnumpy()["id"].astype(np.uint32)
        last = self._meta("last_params")
        manifest = Manifest(
            self._int_meta("generation"),
            params,
            segments,
            None,
            int(last) if last else None,
            self._checks(),
            None,
            files,
        )
        return manifest, dead, anchor_files

    def _publish(self) -> None:
        """Publish the catalog's state, then delete files no state names any more.

        Not while rebuilding: readers keep the old state until :meth:`_swap_in`.
        """
        if self._staging is not None:
            return
        manifest, dead, anchor_files = self.recorded_state()
        os.makedirs(os.path.join(self.root, "anchors"), exist_ok=True)
        for fname, text in anchor_files.items():
            path = os.path.join(self.root, "anchors", fname)
            if not os.path.exists(path):
                fd, tmp = indexdir.temp_file(os.path.dirname(path), fname + ".tmp")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
        publish(self.root, manifest, dead)
        segments, generation = manifest.segments, manifest.generation
        # Retire what no published state names. A reader that still has the
        # old manifest retries from CURRENT (sif.index.reader).
        named = {n for names in segments.values() for n in names}
        segdir = os.path.join(self.root, "segments")
        for name in os.listdir(segdir):
            if name not in named and not name.endswith(".tmp") and _own_segment(name):
                indexdir.remove_entry(os.path.join(segdir, name))
        mdir = os.path.join(self.root, "manifests")
        keep = f"gen-{generation:08d}"
        for name in os.listdir(mdir):
            if not name.startswith(keep) and indexdir.MANIFEST_NAME.match(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(mdir, name))

    def catalog(self) -> duckdb.DuckDBPyConnection:
        """The open DuckDB connection (for ``sif similar`` and tests). Owned by the store."""
        return self._con

    def close(self) -> None:
        """Close the catalog and release the lock; an unfinished rebuild is discarded."""
        con = getattr(self, "_con", None)
        self._con = None  # type: ignore[assignment]
        try:
            if con is not None:
                catalog = os.path.join(self.root, CATALOG)
                if self._exclusive and self._staging is None and catalogdb.wal_size(catalog):
                    # The run's commits into the catalog's file (catalogdb.WAL_LIMIT): no
                    # WAL for the next writer or a reader to replay. Whatever fails here
                    # leaves the WAL, which DuckDB's recovery replays.
                    with contextlib.suppress(duckdb.Error):
                        catalogdb.checkpoint(con)
                with catalog_errors(catalog):
                    con.close()
        finally:
            if self._staging is not None:
                shutil.rmtree(self._staging, ignore_errors=True)
                self._staging = None
            self._unlock()

    def __enter__(self) -> DuckStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
