"""What an engine other than the embedded one provides: the same work, mapped elsewhere.

The embedded engine is the default code path (forked processes,
:mod:`sif.executors.local`) and needs no object. Another engine (the Dask one,
:class:`sif.executors.dask.DaskEngine`) runs the *same* per-file function and
the *same* collation on its workers; the caller stays the one writer of the
index.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy.typing as npt

from sif.index.pairstore import RowSource

Item = tuple[str, int, int, int, int, int]
"""A file to read: path, dev, ino, size, mtime_ns, ctime_ns (as the walk saw it)."""


class Engine(Protocol):
    """Fingerprinting and collation run somewhere else, with the embedded results."""

    def scan(
        self, todo: Sequence[Item], bulk: bool, params: Any, anchors: Any, content: Any
    ) -> Iterator[tuple[int, list[Any]]]:
        """``(index, reads)`` of parts of ``todo``, in completion order.

        ``reads``: what :func:`sif.index.build._scan_batch` gives for the
        files of one part (each file once over all parts).
        """
        ...

    def collate(
        self, source: RowSource, max_df: int, partitions: int, memory_limit: str
    ) -> tuple[dict[str, npt.NDArray[Any]], int, int]:
        """(pairs, stop-fingerprints, rows) of :func:`sif.similar.collate.collate_source`."""
        ...

    def close(self) -> None: ...
