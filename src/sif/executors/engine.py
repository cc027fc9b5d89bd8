"""What an engine other than the embedded one provides: the same work, mapped elsewhere.

The embedded engine is the default code path (forked processes,
:mod:`sif.executors.local`) and needs no object. Another engine (the Dask one,
:class:`sif.executors.dask.DaskEngine`) runs the *same* per-file function and
the *same* collation on its workers; the caller stays the one writer of the
index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import numpy.typing as npt

from sif.index.pairstore import RowSource

Item = tuple[str, int, int, int, int, int]
"""A file to read: path, dev, ino, size, mtime_ns, ctime_ns (as the walk saw it)."""

T = TypeVar("T")
R = TypeVar("R")


class Engine(Protocol):
    """Fingerprinting and collation run somewhere else, with the embedded results."""

    def scan(
        self, todo: Sequence[Item], bulk: bool, params: Any, anchors: Any, content: Any
    ) -> Iterator[tuple[int, Any]]:
        """``(index, reads)`` of parts of ``todo``, in completion order.

        ``reads``: what :func:`sif.index.scanjobs._scan_batch` gives for the
        files of one part (each file once over all parts).
        """
        ...

    def collate(
        self, source: RowSource, max_df: int, partitions: int, memory_limit: str
    ) -> tuple[dict[str, npt.NDArray[Any]], int, int]:
        """(pairs, stop-fingerprints, rows) of :func:`sif.similar.collate.collate_source`."""
        ...

    def warm(self, params: Any) -> None:
        """Start loading the fingerprint kernels on the workers, without waiting.

        For a new index (every file is read), while this process opens it and walks.
        """
        ...

    def workers(self) -> int:
        """How many workers share the work now (a pass cuts its chunks by it)."""
        ...

    def map_exact(
        self, func: Callable[..., R], items: Iterable[T], common: Any = None
    ) -> Iterator[tuple[int, R]]:
        """``(index, func(item))`` of every item, each a task on a worker, in completion order.

        What the passes that read files again run there: the exact pass's
        chunks (:func:`sif.similar.exact._exact_chunk`) and the small-file
        pass's (:mod:`sif.similar.smallpass`), the same functions and chunks as
        on the embedded engine's processes (:func:`sif.executors.local.shared_map`),
        so that every score is the same; this process only gathers. ``common``:
        a value every item needs, sent to the cluster once; then each task runs
        ``func(common, item)``. A task's error is raised here as itself.
        """
        ...

    def close(self) -> None: ...
