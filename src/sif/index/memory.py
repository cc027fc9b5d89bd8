"""An in-memory index: the double of both protocols, for tests of the logic above."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.anchors import AnchorSet
from sif.fingerprint import FingerprintParams
from sif.index.pairstore import in_scope
from sif.index.segments import BUCKET_BITS
from sif.index.store import (
    I64,
    U32,
    FileStats,
    IndexedFile,
    KnownColumns,
    KnownFile,
    NewFile,
    ParamSet,
    kind_code,
    origin_keys,
    param_set,
    view_code,
)
from sif.pathkeys import new_secret

Columns = dict[str, npt.NDArray[Any]]


@dataclass
class MemoryRows:
    """The rows of a scope of a :class:`MemoryIndex`, held (a
    :class:`sif.index.pairstore.RowSource` for tests: picklable, not small)."""

    values: U32
    fids: U32
    grp: npt.NDArray[np.uint8]

    @property
    def total(self) -> int:
        return len(self.values)

    def rows(self, lo: int, hi: int) -> tuple[U32, U32, npt.NDArray[np.uint8]]:
        bucket = self.values >> np.uint32(BUCKET_BITS)
        sel = (bucket >= lo) & (bucket < hi)
        return self.values[sel], self.fids[sel], self.grp[sel]


class MemoryIndex:
    """:class:`IndexStore`, :class:`IndexReader` and
    :class:`sif.index.pairstore.PairStore` at once, held in dicts.

    Lookups scan every file (O(rows)); fine for tests, not for use.
    """

    def __init__(self) -> None:
        self._files: dict[ParamSet, dict[int, tuple[IndexedFile, U32, str, int]]] = {}
        self._anchors: dict[ParamSet, AnchorSet | None] = {}
        self._order: list[ParamSet] = []
        self._next = 1
        self.commits = 0
        self._pids: dict[ParamSet, int] = {}
        self._run: tuple[str, int, str | None] | None = None  # key, stopped, walk digest
        self._pairs: Columns = {}
        self._tmp: str | None = None
        self.path_secret = new_secret()
        """The secret of its path keys (:mod:`sif.pathkeys`)."""

    def known_files(self, params: FingerprintParams | ParamSet) -> dict[str, KnownFile]:
        return self.known_columns(params).by_origin()

    def known_columns(self, params: FingerprintParams | ParamSet) -> KnownColumns:
        rows = list(self._files.get(param_set(params), {}).values())
        origins = [origin for _, _, origin, _ in rows]
        return KnownColumns(
            *origin_keys(map(os.fsencode, origins), len(origins), self.path_secret),
            np.array([f.id for f, _, _, _ in rows], dtype=np.uint32),
            np.array([f.dev for f, _, _, _ in rows], dtype=np.uint64),
            np.array([f.ino for f, _, _, _ in rows], dtype=np.uint64),
            np.array([size for _, _, _, size in rows], dtype=np.int64),
            np.array([f.mtime_ns for f, _, _, _ in rows], dtype=np.int64),
            origins=lambda at: [origins[i] for i in at.tolist()],
            secret=self.path_secret,
        )

    def commit(
        self,
        params: FingerprintParams | ParamSet,
        anchors: AnchorSet | None,
        added: Sequence[NewFile],
        dropped: Sequence[int],
    ) -> None:
        params = param_set(params)
        files = self._files.setdefault(params, {})
        self._pids.setdefault(params, len(self._pids) + 1)
        self._anchors[params] = anchors
        if params in self._order:
            self._order.remove(params)
        self._order.insert(0, params)
        for i in dropped:
            files.pop(i, None)
        for f in added:
            s = f.scan
            info = IndexedFile(
                self._next,
                f.path,
                s.size,
                s.kind,
                s.digest,
                len(s.fingerprints),
                s.n_distinct,
                f.dev,
                f.ino,
                f.mtime_ns,
                s.view,
                f.path[len(f.disk_path) :],
            )
            files[self._next] = (info, s.fingerprints, f.disk_path, f.disk_size)
            self._next += 1
        self.commits += 1

    def add(self, path: str, fingerprints: Sequence[int], **fields: object) -> int:
        """Add a file with the given stored values directly (tests of scoring)."""
        from sif.index.scan import ScannedFile

        fps = np.asarray(fingerprints, dtype=np.uint32)
        scan = ScannedFile(
            str(fields.get("kind", "text")),
            bytes(fields.get("digest", b"\0" * 32)),  # type: ignore[call-overload]
            fps,
            int(fields.get("size", 256 * len(fps))),  # type: ignore[call-overload]
        )
        params = fields.get("params") or FingerprintParams()
        assert isinstance(params, FingerprintParams | ParamSet)
        first = self._next
        self.commit(params, None, [NewFile(path, 0, first, 0, scan)], [])
        return first

    def finish(
        self, params: FingerprintParams | ParamSet, roots: Sequence[str] | None = None
    ) -> None:
        pass

    def verify(self) -> int:
        return 0  # nothing stored outside this process can be damaged

    def parameter_sets(self) -> list[ParamSet]:
        return list(self._order)

    def anchors(self, params: FingerprintParams | ParamSet) -> AnchorSet | None:
        return self._anchors.get(param_set(params))

    def lookup(self, params: FingerprintParams | ParamSet, query: U32) -> tuple[I64, U32]:
        qpos_parts, id_parts = [], []
        for fid, (_, fps, _, _) in self._files.get(param_set(params), {}).items():
            pos = np.searchsorted(query, fps)
            pos = np.minimum(pos, max(len(query) - 1, 0))
            hit = query[pos] == fps if len(query) else np.zeros(len(fps), bool)
            qpos_parts.append(pos[hit].astype(np.int64))
            id_parts.append(np.full(int(hit.sum()), fid, dtype=np.uint32))
        if not qpos_parts:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        return np.concatenate(qpos_parts), np.concatenate(id_parts)

    def describe(self, params: FingerprintParams | ParamSet, ids: U32) -> dict[int, IndexedFile]:
        files = self._files.get(param_set(params), {})
        return {int(i): files[int(i)][0] for i in ids if int(i) in files}

    def file_stats(self, params: FingerprintParams | ParamSet, ids: U32) -> FileStats:
        files = self._files.get(param_set(params), {})
        infos = [files[int(i)][0] if int(i) in files else None for i in ids]

        def col(get: object) -> I64:
            return np.array([0 if f is None else get(f) for f in infos], dtype=np.int64)  # type: ignore[operator]

        return FileStats(
            np.asarray(ids, dtype=np.uint32),
            np.array([f is not None for f in infos], dtype=bool),
            col(lambda f: f.n_fp),
            col(lambda f: f.n_distinct),
            col(lambda f: f.size),
            col(lambda f: kind_code(f.kind)),
            col(lambda f: view_code(f.view)),
        )

    def same_content(self, params: FingerprintParams | ParamSet, size: int, digest: bytes) -> U32:
        files = self._files.get(param_set(params), {})
        hits = [i for i, v in files.items() if v[0].size == size and v[0].digest == digest]
        return np.array(sorted(hits), dtype=np.uint32)

    def close(self) -> None:
        """Remove the spill directory this index made (:meth:`temp_directory`), if any."""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # --- PairStore ----------------------------------------------------------------

    def params_id(self, params: FingerprintParams | ParamSet) -> int | None:
        return self._pids.get(param_set(params))

    def generation(self) -> str:
        return str(self.commits)

    def _set(self, pid: int) -> dict[int, tuple[IndexedFile, U32, str, int]]:
        for ps, i in self._pids.items():
            if i == pid:
                return self._files.get(ps, {})
        return {}

    def scope(
        self,
        pid: int,
        roots: Sequence[str],
        groups: bool = True,
        walked: Sequence[str] | None = None,
    ) -> Columns:
        prefixes = [os.path.abspath(r).rstrip("/") for r in roots]
        keep = set(walked) if walked is not None else None

        def under(path: str) -> bool:
            return any(path == r or path.startswith(r + "/") for r in prefixes)

        rows = [
            (f, origin)
            for fid, (f, _, origin, _) in sorted(self._set(pid).items())
            if under(f.path) and (keep is None or origin in keep)
        ]
        normalize = next((ps.normalize for ps, i in self._pids.items() if i == pid), "auto")
        out: Columns = {
            "id": np.array([f.id for f, _ in rows], dtype=np.uint32),
            "path": np.array([os.fsencode(f.path) for f, _ in rows] or [], dtype=object),
            "origin": np.array([os.fsencode(o) for _, o in rows] or [], dtype=object),
            "view": np.array([f.view for f, _ in rows], dtype=object),
            "size": np.array([f.size for f, _ in rows], dtype=np.int64),
            "kind": np.array([f.kind for f, _ in rows], dtype=object),
            "n_fp": np.array([f.n_fp for f, _ in rows], dtype=np.uint32),
            "n_distinct": np.array([f.n_distinct for f, _ in rows], dtype=np.uint32),
            "digest": np.array([f.digest for f, _ in rows], dtype=object),
            "normalize": np.full(len(rows), normalize, dtype=object),
        }
        if groups:  # one code per distinct (kind, view), in their order (as the catalog)
            kinds = sorted({(f.kind, f.view) for f, _ in rows})
            code = {k: i for i, k in enumerate(kinds)}
            out["grp"] = np.array([code[(f.kind, f.view)] for f, _ in rows], dtype=np.uint8)
        return out

    def scope_rows(self, pid: int, files: Columns) -> MemoryRows:
        held = self._set(pid)
        ids = np.asarray(files["id"], dtype=np.uint32)
        parts = [held[int(i)][1] for i in ids.tolist()]
        values = np.concatenate(parts).astype(np.uint32) if parts else np.empty(0, np.uint32)
        fids = np.repeat(ids, [len(p) for p in parts]).astype(np.uint32)
        keep = in_scope(ids, fids)
        grp = np.asarray(files["grp"], dtype=np.uint8)
        return MemoryRows(values[keep], fids[keep], grp[np.searchsorted(ids, fids[keep])])

    def temp_directory(self) -> str:
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="sif-memory-")
        return self._tmp

    def stored_run(self, key: str) -> tuple[int, str | None] | None:
        if self._run is None or self._run[0] != key:
            return None
        return self._run[1], self._run[2]

    def load_pairs(self, key: str) -> tuple[Columns, int] | None:
        run = self.stored_run(key)
        if run is None:
            return None
        return {k: v.copy() for k, v in self._pairs.items()}, run[0]

    def store_pairs(self, key: str, cols: Columns, stopped: int, walk_digest: str | None) -> None:
        names = ("a", "b", "shared", "hits_a", "hits_b", "exact_ab", "exact_ba")
        self._pairs = {k: np.array(cols[k]) for k in names}
        n = cols.get("exact_n")
        self._pairs["exact_n"] = np.zeros(len(cols["a"]), np.uint32) if n is None else np.array(n)
        self._run = (key, stopped, walk_digest)

    def set_walk_digest(self, key: str, digest: str | None) -> None:
        if self._run is not None and self._run[0] == key:
            self._run = (key, self._run[1], digest)

    def save_exact(self, cols: Columns) -> None:
        if not self._pairs:
            return
        done = ~np.isnan(cols["exact_ab"])
        where = {
            (int(a), int(b)): i for i, (a, b) in enumerate(zip(cols["a"], cols["b"], strict=True))
        }
        mine = zip(self._pairs["a"].tolist(), self._pairs["b"].tolist(), strict=True)
        for j, ab in enumerate(mine):
            i = where.get(ab)
            if i is not None and done[i]:
                self._pairs["exact_ab"][j] = cols["exact_ab"][i]
                self._pairs["exact_ba"][j] = cols["exact_ba"][i]
                if "exact_n" in cols:
                    self._pairs["exact_n"][j] = cols["exact_n"][i]
