"""The persistent index (Manber, section 3): files and their fingerprints.

- :func:`build_index` brings it up to date with a tree (``sif index``);
- :func:`open_reader` reads its last committed state (``sif query``);
- :func:`open_store` opens it for writing (one writer at a time);
- :class:`MemoryIndex` is an in-memory double of both sides.

See :mod:`sif.index.duck` for the layout and the crash-safety argument and
:mod:`sif.index.segments` for the fingerprint storage.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported on first use: ``sif query`` needs the reader, not the builder (which
# brings the walker and the worker pools: ~0.1 s of a cold start).
_EXPORTS = {
    "IndexStats": "sif.index.build",
    "build_index": "sif.index.build",
    "MemoryIndex": "sif.index.memory",
    "ScannedEntry": "sif.index.scan",
    "ScannedFile": "sif.index.scan",
    "fold32": "sif.index.scan",
    "scan_entries": "sif.index.scan",
    "scan_file": "sif.index.scan",
    "FileStats": "sif.index.store",
    "IndexedFile": "sif.index.store",
    "IndexReader": "sif.index.store",
    "IndexStore": "sif.index.store",
    "KnownFile": "sif.index.store",
    "NewFile": "sif.index.store",
    "ParamSet": "sif.index.store",
    "default_index_path": "sif.index.store",
    "open_reader": "sif.index.store",
    "open_store": "sif.index.store",
}

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'sif.index' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
