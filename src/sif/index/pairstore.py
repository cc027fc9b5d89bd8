"""What ``sif similar`` needs from the index, behind one small protocol.

:class:`PairStore` is the view of the index that the all-against-all run
(:mod:`sif.similar.run`) and the engines (:mod:`sif.executors`) work on: the
parameter set's id, the files in scope, their fingerprint rows streamed by
*bucket range* (the top :data:`~sif.index.segments.BUCKET_BITS` bits of the
value: a hash partition, every row of one fingerprint in one range), and
the stored pair counts of the last run with their exact scores.

Implementations: :class:`sif.index.pairs.DuckPairs` over the on-disk index
(:func:`pair_store` wraps a :class:`~sif.index.duck.DuckStore`; the SQL stays in
:mod:`sif.index.pairs`) and :class:`sif.index.memory.MemoryIndex`, which
implements it directly, so that ``similar`` runs in memory in tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from sif.fingerprint import FingerprintParams
from sif.index.segments import BUCKET_BITS
from sif.index.store import ParamSet

U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
Columns = dict[str, Any]

#: Bucket ranges are ``[lo, hi)`` with ``0 <= lo < hi <= BUCKETS``.
BUCKETS = 1 << BUCKET_BITS


class RowSource(Protocol):
    """The fingerprint rows of the files in scope, read one bucket range at a time.

    Picklable and small (no rows held for the on-disk index: segment
    directories and the ids in scope), so that an engine can send it to its
    workers, which read their ranges themselves.
    """

    @property
    def total(self) -> int:
        """How many rows the scope holds (the sum of its files' fingerprint counts)."""
        ...

    def rows(self, lo: int, hi: int) -> tuple[U32, U32, U8]:
        """(value, file id, group) of every row in scope whose bucket is in ``[lo, hi)``."""
        ...


class PairStore(Protocol):
    """The index as ``sif similar`` uses it: scope, rows, stored runs and pairs."""

    def params_id(self, params: FingerprintParams | ParamSet) -> int | None:
        """The id of the parameter set, or ``None`` when the index holds none such."""
        ...

    def generation(self) -> str:
        """A value that changes with every commit (part of a stored run's key)."""
        ...

    def scope(
        self,
        pid: int,
        roots: Sequence[str],
        groups: bool = True,
        walked: Sequence[str] | None = None,
    ) -> Columns:
        """The indexed files under ``roots`` of set ``pid``, sorted by id.

        Columns ``id``, ``path``, ``origin`` (bytes), ``view``, ``size``,
        ``kind``, ``n_fp``, ``n_distinct``, ``digest``, ``normalize`` and, with
        ``groups``, ``grp`` (``uint8``: one code per distinct (kind, view)).
        The byte and string columns are sequences indexed as numpy arrays are
        (an integer gives the value, an array of rows or a mask a column of
        those rows): object arrays, or packed (:mod:`sif.core.packed`).
        ``walked``: only the files of this walk (its filters applied).
        """
        ...

    def scope_rows(self, pid: int, files: Columns) -> RowSource:
        """The rows of the files in scope ``files`` (:meth:`scope` with groups)."""
        ...

    def temp_directory(self) -> str:
        """Where the collation may spill (created)."""
        ...

    def stored_run(self, key: str) -> tuple[int, str | None] | None:
        """(stop-fingerprints, walk digest) of the run stored under ``key``, or ``None``."""
        ...

    def load_pairs(self, key: str) -> tuple[Columns, int] | None:
        """The pair counts stored for ``key`` (exact scores NaN when not computed)."""
        ...

    def store_pairs(self, key: str, cols: Columns, stopped: int, walk_digest: str | None) -> None:
        """Replace the stored run and its pairs by these, atomically."""
        ...

    def set_walk_digest(self, key: str, digest: str | None) -> None:
        """Record the stat walk the index matched when the pairs of ``key`` were used."""
        ...

    def save_exact(self, cols: Columns) -> None:
        """Store the exact containments of ``cols`` (non-NaN) beside the pair counts."""
        ...

    def close(self) -> None: ...


def pair_store(store: Any) -> PairStore:
    """``store`` as a :class:`PairStore`: itself if it is one, the on-disk index wrapped."""
    from sif.index.duck import DuckStore
    from sif.index.pairs import DuckPairs

    if isinstance(store, DuckStore):
        return DuckPairs(store)
    return store


def bucket_ranges(parts: int) -> list[tuple[int, int]]:
    """``parts`` consecutive bucket ranges covering every bucket, as equal as can be."""
    parts = max(1, min(int(parts), BUCKETS))
    edges = [(p * BUCKETS) // parts for p in range(parts + 1)]
    return [(edges[p], edges[p + 1]) for p in range(parts)]


def in_scope(ids: U32, fids: U32) -> npt.NDArray[np.bool_]:
    """Which of ``fids`` are among the sorted ``ids``."""
    if not len(ids):
        return np.zeros(len(fids), dtype=bool)
    pos = np.minimum(np.searchsorted(ids, fids), len(ids) - 1)
    return np.asarray(ids[pos] == fids)
