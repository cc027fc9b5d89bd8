"""An in-memory index: the double of both protocols, for tests of the logic above."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sif.core.anchors import AnchorSet
from sif.fingerprint import FingerprintParams
from sif.index.store import I64, U32, IndexedFile, KnownFile, NewFile


class MemoryIndex:
    """:class:`IndexStore` and :class:`IndexReader` at once, held in dicts.

    Lookups scan every file (O(rows)); fine for tests, not for use.
    """

    def __init__(self) -> None:
        self._files: dict[str, dict[int, tuple[IndexedFile, U32]]] = {}
        self._anchors: dict[str, AnchorSet | None] = {}
        self._order: list[FingerprintParams] = []
        self._next = 1
        self.commits = 0

    def known_files(self, params: FingerprintParams) -> dict[str, KnownFile]:
        return {
            f.path: KnownFile(f.id, f.dev, f.ino, f.size, f.mtime_ns)
            for f, _ in self._files.get(params.key(), {}).values()
        }

    def commit(
        self,
        params: FingerprintParams,
        anchors: AnchorSet | None,
        added: Sequence[NewFile],
        dropped: Sequence[int],
    ) -> None:
        files = self._files.setdefault(params.key(), {})
        self._anchors[params.key()] = anchors
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
            )
            files[self._next] = (info, s.fingerprints)
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
        assert isinstance(params, FingerprintParams)
        first = self._next
        self.commit(params, None, [NewFile(path, 0, first, 0, scan)], [])
        return first

    def finish(self, params: FingerprintParams) -> None:
        pass

    def parameter_sets(self) -> list[FingerprintParams]:
        return list(self._order)

    def anchors(self, params: FingerprintParams) -> AnchorSet | None:
        return self._anchors.get(params.key())

    def lookup(self, params: FingerprintParams, query: U32) -> tuple[I64, U32]:
        qpos_parts, id_parts = [], []
        for fid, (_, fps) in self._files.get(params.key(), {}).items():
            pos = np.searchsorted(query, fps)
            pos = np.minimum(pos, max(len(query) - 1, 0))
            hit = query[pos] == fps if len(query) else np.zeros(len(fps), bool)
            qpos_parts.append(pos[hit].astype(np.int64))
            id_parts.append(np.full(int(hit.sum()), fid, dtype=np.uint32))
        if not qpos_parts:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        return np.concatenate(qpos_parts), np.concatenate(id_parts)

    def describe(self, params: FingerprintParams, ids: U32) -> dict[int, IndexedFile]:
        files = self._files.get(params.key(), {})
        return {int(i): files[int(i)][0] for i in ids if int(i) in files}

    def close(self) -> None:
        pass
