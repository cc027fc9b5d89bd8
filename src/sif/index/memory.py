"""An in-memory index: the double of both protocols, for tests of the logic above."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sif.core.anchors import AnchorSet
from sif.fingerprint import FingerprintParams
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
    param_set,
    view_code,
)


class MemoryIndex:
    """:class:`IndexStore` and :class:`IndexReader` at once, held in dicts.

    Lookups scan every file (O(rows)); fine for tests, not for use.
    """

    def __init__(self) -> None:
        self._files: dict[ParamSet, dict[int, tuple[IndexedFile, U32, str, int]]] = {}
        self._anchors: dict[ParamSet, AnchorSet | None] = {}
        self._order: list[ParamSet] = []
        self._next = 1
        self.commits = 0

    def known_files(self, params: FingerprintParams | ParamSet) -> dict[str, KnownFile]:
        return self.known_columns(params).by_origin()

    def known_columns(self, params: FingerprintParams | ParamSet) -> KnownColumns:
        rows = list(self._files.get(param_set(params), {}).values())
        return KnownColumns(
            [origin for _, _, origin, _ in rows],
            np.array([f.id for f, _, _, _ in rows], dtype=np.uint32),
            np.array([f.dev for f, _, _, _ in rows], dtype=np.uint64),
            np.array([f.ino for f, _, _, _ in rows], dtype=np.uint64),
            np.array([size for _, _, _, size in rows], dtype=np.int64),
            np.array([f.mtime_ns for f, _, _, _ in rows], dtype=np.int64),
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
        pass
