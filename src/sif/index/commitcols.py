"""The per-file columns of a commit (split from :mod:`sif.index.duck`): one pass over
its entries, no per-file work left for the catalog and the segment to do."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from sif.index.store import NewFile


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
