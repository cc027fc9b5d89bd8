"""The reader of the published snapshot: what ``sif query`` opens.

It never opens the DuckDB catalog, so it never waits for a writer and never
blocks one: it reads ``CURRENT``, the manifest it names, and memory-maps the
segments listed there (see :mod:`sif.index.segments`).
"""

from __future__ import annotations

import os

import numpy as np

from sif.core.anchors import AnchorSet
from sif.errors import IndexUnusable, SifError
from sif.fingerprint import FingerprintParams
from sif.index.checks import corrupt, file_checksum, load_array, verify_segment
from sif.index.indexdir import check_layout
from sif.index.manifest import Manifest, read_manifest
from sif.index.segments import Segment
from sif.index.store import (
    I64,
    LEGACY_NORMALIZE,
    U32,
    FileStats,
    IndexedFile,
    ParamSet,
    kind_name,
    param_set,
    view_name,
)

#: A writer may retire a generation between our reading CURRENT and opening it.
RETRIES = 5


class SnapshotReader:
    """An :class:`sif.index.store.IndexReader` over the published snapshot."""

    def __init__(self, root: str) -> None:
        self.root = root
        for attempt in range(RETRIES):
            try:
                self._load()
                return
            except FileNotFoundError as exc:  # a writer retired it after we read CURRENT?
                if attempt == RETRIES - 1:
                    raise corrupt(exc.filename or root, "missing, yet named") from None

    def _load(self) -> None:
        check_layout(self.root, repair=False)  # a few lstat: a wrong kind is named as such
        manifest = read_manifest(self.root)
        if manifest is None:
            raise IndexUnusable(f"no index at {self.root} (run 'sif index PATH...' first)")
        self.manifest: Manifest = manifest
        where = os.path.join(self.root, "manifests", f"gen-{manifest.generation:08d}.json")
        self._sets: dict[int, ParamSet] = {}
        for pid, entry in manifest.params.items():
            try:
                self._sets[pid] = ParamSet(
                    FingerprintParams.from_dict(_loads(entry["key"])),
                    entry.get("normalize") or LEGACY_NORMALIZE,
                )
            except Exception as exc:
                raise corrupt(where, f"unreadable parameters of set {pid}") from exc
        self._by_set = {ps: pid for pid, ps in self._sets.items()}
        for pid, n in (manifest.files or {}).items():
            if n and not manifest.segments.get(pid):
                raise corrupt(where, f"lists no segment for the {n:,} files of set {pid}")
        self._segments: dict[int, list[Segment]] = {}
        for pid in manifest.segments:  # open every segment now: later it may be gone
            self._segments[pid] = [
                Segment(os.path.join(self.root, "segments", name), manifest.checks.get(name))
                for name in manifest.segments[pid]
            ]
        self._dead: U32 = np.empty(0, np.uint32)
        if manifest.dead:
            path = os.path.join(self.root, "manifests", manifest.dead)
            self._dead = np.asarray(load_array(path, (np.dtype(np.uint32),)))
            if manifest.dead_check is not None and os.path.getsize(path) != manifest.dead_check[0]:
                raise corrupt(path, "its length differs from the manifest's")

    def verify(self) -> tuple[int, int]:
        """Compare every segment and the dead-id file with their recorded checksums.

        Returns (segments verified, segments without a recorded checksum: made
        by an older sif, checked for consistency only). Raises
        :class:`IndexCorrupt` naming the first damaged file. Cost: one read of
        every segment (XXH3, several GB/s).
        """
        checked = unchecked = 0
        for names in self.manifest.segments.values():
            for name in names:
                check = self.manifest.checks.get(name)
                if check is None:
                    unchecked += 1
                    continue
                verify_segment(os.path.join(self.root, "segments", name), check)
                checked += 1
        for ps in self._sets.values():  # each stored anchor set against its digest
            self.anchors(ps)
        if self.manifest.dead and self.manifest.dead_check is not None:
            path = os.path.join(self.root, "manifests", self.manifest.dead)
            if file_checksum(path) != self.manifest.dead_check[1]:
                raise corrupt(path, "checksum mismatch: its content changed after it was written")
        return checked, unchecked

    def parameter_sets(self) -> list[ParamSet]:
        order = sorted(self.manifest.params, key=lambda p: p != self.manifest.last_params)
        return [self._sets[p] for p in order]

    def _pid(self, params: FingerprintParams | ParamSet) -> int | None:
        return self._by_set.get(param_set(params))

    def anchors(self, params: FingerprintParams | ParamSet) -> AnchorSet | None:
        pid = self._pid(params)
        name = None if pid is None else self.manifest.params[pid].get("anchors")
        if not name:
            return None
        from sif.fingerprint import load_anchors

        path = os.path.join(self.root, "anchors", str(name))
        try:
            anchors = load_anchors(path)
        except (SifError, OSError, ValueError) as exc:
            raise corrupt(path, f"unreadable anchor set: {exc}") from exc
        if pid is not None and anchors.digest != self._sets[pid].params.anchors_digest:
            raise corrupt(path, "not the anchor set the parameters name")
        return anchors

    def lookup(self, params: FingerprintParams | ParamSet, query: U32) -> tuple[I64, U32]:
        pid = self._pid(params)
        qpos_parts: list[I64] = []
        id_parts: list[U32] = []
        for seg in self._segments.get(pid, []) if pid is not None else []:
            qpos, ids = seg.lookup(query)
            if len(self._dead) and len(ids):
                keep = ~np.isin(ids, self._dead)
                qpos, ids = qpos[keep], ids[keep]
            qpos_parts.append(qpos)
            id_parts.append(ids)
        if not qpos_parts:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        return np.concatenate(qpos_parts), np.concatenate(id_parts)

    def describe(self, params: FingerprintParams | ParamSet, ids: U32) -> dict[int, IndexedFile]:
        pid = self._pid(params)
        ids = np.asarray(ids, dtype=np.uint32)
        if len(self._dead):
            ids = ids[~np.isin(ids, self._dead)]
        out: dict[int, IndexedFile] = {}
        for seg in self._segments.get(pid, []) if pid is not None else []:
            pos, here = seg.position(ids)
            for p in pos[here]:
                r = seg.files[p]
                path = seg.path(int(p))
                olen = int(r["olen"])
                try:
                    kind, view = kind_name(int(r["kind"])), view_name(int(r["view"]))
                except IndexError:
                    raise corrupt(seg.directory, "files.npy holds an unknown kind") from None
                out[int(r["id"])] = IndexedFile(
                    id=int(r["id"]),
                    path=os.fsdecode(path),
                    size=int(r["size"]),
                    kind=kind,
                    digest=bytes(r["digest"]),
                    n_fp=int(r["n_fp"]),
                    n_distinct=int(r["n_distinct"]),
                    dev=int(r["dev"]),
                    ino=int(r["ino"]),
                    mtime_ns=int(r["mtime_ns"]),
                    view=view,
                    member=os.fsdecode(path[olen:]),
                )
        return out

    def file_stats(self, params: FingerprintParams | ParamSet, ids: U32) -> FileStats:
        pid = self._pid(params)
        ids = np.asarray(ids, dtype=np.uint32)
        n = len(ids)
        found = np.zeros(n, dtype=bool)
        cols = {
            c: np.zeros(n, dtype=np.int64) for c in ("n_fp", "n_distinct", "size", "kind", "view")
        }
        for seg in self._segments.get(pid, []) if pid is not None else []:
            pos, here = seg.position(ids)
            here &= ~found
            records = seg.files[pos[here]]
            for c, col in cols.items():
                col[here] = records[c]
            found |= here
        if len(self._dead):
            found &= ~np.isin(ids, self._dead)
        return FileStats(
            ids, found, cols["n_fp"], cols["n_distinct"], cols["size"], cols["kind"], cols["view"]
        )

    def same_content(self, params: FingerprintParams | ParamSet, size: int, digest: bytes) -> U32:
        """Cost: a comparison of every file record of the set's segments (vectorised)."""
        pid = self._pid(params)
        parts = [np.empty(0, np.uint32)]
        for seg in self._segments.get(pid, []) if pid is not None else []:
            r = seg.files
            hit = r["size"] == size
            if len(digest) == r.dtype["digest"].itemsize:
                hit &= r["digest"] == np.void(digest)
            else:
                hit[:] = False
            parts.append(np.asarray(r["id"][hit], dtype=np.uint32))
        ids = np.concatenate(parts)
        if len(self._dead) and len(ids):
            ids = ids[~np.isin(ids, self._dead)]
        return np.unique(ids)

    def close(self) -> None:
        self._segments = {}


def _loads(key: str) -> dict[str, object]:
    import json

    data = json.loads(key)
    if not isinstance(data, dict):
        raise ValueError("parameters are not an object")
    return data
