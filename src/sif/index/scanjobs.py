"""The workers' side of ``sif index`` (from :mod:`sif.index.build`): a batch of files
read into their entries (:func:`_scan_batch`), sent back as columns (:class:`ReadBatch`).

The run's parameters are this module's globals, set by :func:`set_run` before
the pool forks, so that the workers inherit them instead of receiving the anchor
set with every batch (a Dask worker is given them with its part:
:mod:`sif.executors.dask`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sif.content import RAW, ContentOptions
from sif.core.anchors import AnchorSet
from sif.events import ScanWarning
from sif.fingerprint import FingerprintParams
from sif.index.entries import Entries
from sif.index.scan import read_plain, scan_entries
from sif.walk import FileRecord

# Set before the pool forks (set_run), so that workers inherit them instead of
# receiving the anchor set with every item.
_PARAMS: FingerprintParams | None = None
_ANCHORS: AnchorSet | None = None
_CONTENT: ContentOptions | None = None

_Item = tuple[str, int, int, int, int, int]  # path, dev, ino, size, mtime_ns, ctime_ns


@dataclass(slots=True)
class ReadBatch:
    """The reads of a batch, as a worker sends them back: the files of the batch in
    its order, and the entries of those read, in one :class:`Entries` (columns: no
    object a file on either side of the pipe)."""

    paths: list[str]
    """Each file of the batch."""
    sizes: list[int]
    """Its bytes on disk as the walk saw them (what the progress counts); 0 for a file
    that failed (a file read gives one entry at least: :func:`scan_entries`)."""
    failed: list[int]
    """The positions of the files that could not be read."""
    notes: dict[int, tuple[tuple[ScanWarning, ...], ScanWarning | None]]
    """By position, in order, the files with warnings or a failure: (their warnings,
    the failure or ``None``)."""
    entries: Entries
    """The entries of the files read, file after file."""

    def nbytes(self) -> int:
        """About the memory the batch holds (:meth:`Entries.nbytes`, and its paths)."""
        return self.entries.nbytes() + sum(map(len, self.paths)) + 100 * len(self.paths)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.paths, self.sizes, self.failed, self.notes, self.entries)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.paths, self.sizes, self.failed, self.notes, self.entries = state


def _scan_batch(job: tuple[bool, Sequence[_Item]]) -> ReadBatch:
    """Read each file of a batch into its entries; a file that cannot be read fails.

    ``job`` is (bulk, batch): ``bulk`` when the run reads enough bytes that
    numba should be used from the first file on (:func:`sif.fingerprint.buy_jit`).
    The plain files are read in one go (:func:`sif.index.scan.read_plain`: one read
    each into a shared buffer, one kernel call) and their entries added a column at
    a time; the others (archives, compressed, views, large, unreadable) one by one
    with :func:`sif.index.scan.scan_entries`, in their place.
    """
    assert _PARAMS is not None
    bulk, batch = job
    if bulk:
        from sif.fingerprint import buy_jit

        buy_jit()
    plain = read_plain([(t[0], t[1], t[2]) for t in batch], _PARAMS, _ANCHORS, _CONTENT)
    sizes = [t[3] for t in batch]
    out = ReadBatch([t[0] for t in batch], sizes, [], {}, Entries())
    entries = out.entries
    done = 0  # the plain files added so far
    taken = set(plain.index) if len(plain.index) < len(batch) else None
    others = [] if taken is None else [i for i in range(len(batch)) if i not in taken]
    for i in others:
        upto = bisect.bisect_left(plain.index, i, done)  # the plain files before file i
        entries.add_plain(plain, done, upto, batch, RAW)
        done = upto
        path, dev, ino, size, mtime_ns, ctime_ns = batch[i]
        warnings: list[ScanWarning] = []
        # Only the walk's file is read (its inode; links followed, as for a root).
        record = FileRecord(path, dev, ino, size, mtime_ns, symlink=True)
        try:
            scanned = scan_entries(
                path, _PARAMS, _ANCHORS, _CONTENT, record=record, on_warning=warnings.append
            )
        except OSError as exc:
            out.failed.append(i)
            out.notes[i] = (tuple(warnings), ScanWarning(path, exc.strerror or str(exc)))
            sizes[i] = 0
            continue
        if warnings:
            out.notes[i] = (tuple(warnings), None)
        for e in scanned:
            entries.add(e.path, dev, ino, mtime_ns, e.scan, path, size, ctime_ns)
    entries.add_plain(plain, done, len(plain.index), batch, RAW)
    return out


def _warm(_: int = 0) -> None:
    """Load numba's kernels in this worker now (:func:`sif.fingerprint.buy_jit`), while
    the coordinator opens the index and walks: about half a second a process."""
    from sif.fingerprint import buy_jit, fingerprint_batch

    buy_jit()
    assert _PARAMS is not None
    if _PARAMS.scheme == "winnow":
        data = np.zeros(_PARAMS.window, dtype=np.uint8)
        fingerprint_batch(_PARAMS, data, np.zeros(1, np.int64), np.array([len(data)]))


def set_run(params: FingerprintParams, anchors: AnchorSet | None, content: ContentOptions) -> None:
    """The run's parameters, for the workers forked from now on (and this process)."""
    global _PARAMS, _ANCHORS, _CONTENT
    _PARAMS, _ANCHORS, _CONTENT = params, anchors, content


def forget_run() -> None:
    """The run's parameters, which workers forked from this process read, forgotten."""
    global _PARAMS, _ANCHORS, _CONTENT
    _PARAMS, _ANCHORS, _CONTENT = None, None, None
