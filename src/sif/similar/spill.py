"""Pair columns held on disk while a pass that does not need them runs.

At a million files ``sif similar`` collates 5.4 M pairs: 215 MB of columns
that the small-file pass (:mod:`sif.similar.smallpass`) does not read while it
streams every file, which is when the run's memory peaks (the pass's table,
its workers, the scope). The pass needs them only at its end, to tell its
candidates from the collated pairs (two columns, read a slice at a time).
So they wait in ``.npy`` files, in a directory of sif's own under the index's
``tmp/``, and are read back whole when the pass is done.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.memtrim import release_memory

#: The spill directories' names begin so (a killed run's are removed by the next writer:
#: :func:`sif.index.indexdir.clear_staging`).
SPILL_PREFIX = "sif-pairs-"
#: Fewer collated pairs than this stay in memory (about 40 bytes a pair): writing and
#: reading them back would cost more than the memory they hold.
SPILL_FROM_PAIRS = 1 << 20


class SpilledColumns(Mapping[str, npt.NDArray[Any]]):
    """Columns written to a new directory under ``parent``; ``self[k]`` maps column ``k``
    read-only, :meth:`load` reads them all back into memory, :meth:`remove` deletes the
    directory (only ever the one this object made)."""

    def __init__(self, cols: Mapping[str, npt.NDArray[Any]], parent: str) -> None:
        self.directory = tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=parent)
        self._files: dict[str, str] = {}
        try:
            for n, (k, v) in enumerate(cols.items()):
                path = os.path.join(self.directory, f"{n}.npy")
                np.save(path, np.asarray(v), allow_pickle=False)
                self._files[k] = path
        except BaseException:
            self.remove()
            raise

    def __getitem__(self, key: str) -> npt.NDArray[Any]:
        return np.load(self._files[key], mmap_mode="r", allow_pickle=False)

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def load(self) -> dict[str, npt.NDArray[Any]]:
        """Every column, read back into memory (writable, as written)."""
        return {k: np.load(p, allow_pickle=False) for k, p in self._files.items()}

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)  # made by __init__: sif's own


def spill(cols: dict[str, npt.NDArray[Any]], parent: str | None) -> SpilledColumns | None:
    """``cols`` moved to disk under ``parent`` when they are large enough to pay: the
    :class:`SpilledColumns`, ``cols`` emptied (its arrays freed, unless held elsewhere);
    or ``None``, ``cols`` as they were: few pairs, no ``parent``, or a write refused (a
    full disk, a read-only index: the memory is only a saving, never worth an error)."""
    if parent is None or not cols or len(next(iter(cols.values()))) < SPILL_FROM_PAIRS:
        return None
    try:
        spilled = SpilledColumns(cols, parent)
    except OSError:
        return None
    try:
        cols.clear()
        release_memory()  # the freed columns' pages, back to the system
    except BaseException:  # a Ctrl-C before the caller holds it: no directory left
        spilled.remove()
        raise
    return spilled
