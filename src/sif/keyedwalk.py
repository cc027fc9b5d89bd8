"""The walk of ``sif index``: the files under its roots and each one's path key.

:func:`keyed_walk` gives what :func:`sif.walk.parallel_walk` gives (in this
process) and the :func:`sif.pathkeys.path_key` of each file, by which the run's
plan meets the index's catalog (:mod:`sif.index.runplan`): in C where it can
(:mod:`sif.treewalk`; the keys made as the walk meets the files, helper threads
reading ahead), else the Python walk and the keys hashed after. The keys are under
the index's secret (:mod:`sif.pathkeys`), which the run reads before it walks.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable

import numpy as np

from sif import treewalk
from sif.events import NullProgress, Progress, WarningSink, ignore_warning
from sif.pathkeys import U64, path_keys, walk_keys
from sif.records import RecordColumns
from sif.walk import Walker, parallel_walk
from sif.walkoptions import WalkOptions, WalkStats

__all__ = ["keyed_walk"]


def keyed_walk(
    roots: Iterable[str | os.PathLike[str]],
    options: WalkOptions,
    on_warning: WarningSink = ignore_warning,
    progress: Progress | None = None,
    threads: int = 0,
    secret: bytes | None = None,
) -> tuple[RecordColumns, WalkStats, U64 | None]:
    """:func:`sif.walk.parallel_walk` (in this process) and the key of each file found
    under ``secret`` (an ``(n, 2)`` array, :func:`sif.pathkeys.path_key`; ``None``
    without a secret): in C where :func:`sif.treewalk.usable`, with ``threads`` helpers
    reading ahead, the keys made as the walk meets the files; else the Python walk, and
    the keys hashed after."""
    walker = Walker(options, on_warning)
    if not treewalk.usable(walker):
        cols, stats = parallel_walk(roots, options, on_warning, None, 1, progress)
        return cols, stats, walk_keys(cols, secret) if secret else None
    advance = (progress or NullProgress()).advance
    cols = RecordColumns()
    keys = array("Q") if secret else None
    roots_ = walker._stat_roots(roots)
    file_roots = treewalk.walk_tree(walker, roots_, cols, advance, threads, keys, secret or b"")
    cols.extend(file_roots)
    advance(len(file_roots))
    if keys is None or not secret:
        return cols, walker.stats, None
    out = np.frombuffer(keys, dtype=np.uint64).reshape(-1, 2)
    if file_roots:
        paths = (os.fsencode(r.path) for r in file_roots)
        out = np.concatenate([out, path_keys(paths, len(file_roots), secret)])
    return cols, walker.stats, out
