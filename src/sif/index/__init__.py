"""The persistent index (Manber, section 3): files and their fingerprints.

- :func:`build_index` brings it up to date with a tree (``sif index``);
- :func:`open_reader` reads its last committed state (``sif query``);
- :func:`open_store` opens it for writing (one writer at a time);
- :class:`MemoryIndex` is an in-memory double of both sides.

See :mod:`sif.index.duck` for the layout and the crash-safety argument and
:mod:`sif.index.segments` for the fingerprint storage.
"""

from __future__ import annotations

from sif.index.build import IndexStats, build_index
from sif.index.memory import MemoryIndex
from sif.index.scan import ScannedEntry, ScannedFile, fold32, scan_entries, scan_file
from sif.index.store import (
    FileStats,
    IndexedFile,
    IndexReader,
    IndexStore,
    KnownFile,
    NewFile,
    ParamSet,
    default_index_path,
    open_reader,
    open_store,
)

__all__ = [
    "FileStats",
    "IndexReader",
    "IndexStats",
    "IndexStore",
    "IndexedFile",
    "KnownFile",
    "MemoryIndex",
    "NewFile",
    "ParamSet",
    "ScannedEntry",
    "ScannedFile",
    "build_index",
    "default_index_path",
    "fold32",
    "open_reader",
    "open_store",
    "scan_entries",
    "scan_file",
]
