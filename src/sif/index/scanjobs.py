"""The workers' side of ``sif index`` (from :mod:`sif.index.build`): a batch of files
read into their entries (:func:`_scan_batch`), and the results' trip back.

The run's parameters are this module's globals, set by :func:`set_run` before
the pool forks, so that the workers inherit them instead of receiving the anchor
set with every batch (a Dask worker is given them with its part:
:mod:`sif.executors.dask`). The results of a batch are pickled as columns
(:class:`_Results`) and made into objects again here without a frozen
dataclass's ``__setattr__`` a field (:func:`_new_file`, :func:`_read`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.content import ContentOptions
from sif.core.anchors import AnchorSet
from sif.events import ScanWarning
from sif.fingerprint import FingerprintParams
from sif.index.scan import ScannedFile, scan_entries, scan_plain_files
from sif.index.store import NewFile
from sif.walk import FileRecord

# Set before the pool forks (set_run), so that workers inherit them instead of
# receiving the anchor set with every item.
_PARAMS: FingerprintParams | None = None
_ANCHORS: AnchorSet | None = None
_CONTENT: ContentOptions | None = None

_Item = tuple[str, int, int, int, int, int]  # path, dev, ino, size, mtime_ns, ctime_ns


@dataclass(frozen=True)
class _Read:
    """A file read by a worker: its entries, or the warning that it failed, and other warnings."""

    path: str
    entries: tuple[NewFile, ...]
    warnings: tuple[ScanWarning, ...]
    failed: ScanWarning | None


class _Results(list[_Read]):
    """The reads of a batch: a list, pickled as columns (one array of fingerprints and
    plain tuples instead of three objects and an array a file: unpickling those cost
    the coordinator ~60 us a file, more than a small file's whole scan)."""

    def __reduce__(self) -> tuple[Any, ...]:
        reads = []
        parts: list[npt.NDArray[np.uint32]] = []
        for r in self:
            entries = []
            for e in r.entries:
                sc = e.scan
                if sc.windows is not None:  # an index scan samples no windows: never here
                    return (_Results, (list(self),))
                parts.append(sc.fingerprints)
                entries.append(
                    (
                        e.path,
                        e.dev,
                        e.ino,
                        e.mtime_ns,
                        e.origin,
                        e.file_size,
                        e.ctime_ns,
                        sc.kind,
                        sc.digest,
                        len(sc.fingerprints),
                        sc.size,
                        sc.view,
                        sc.n_distinct,
                    )
                )
            reads.append((r.path, tuple(entries), r.warnings, r.failed))
        fps = np.concatenate(parts) if parts else np.empty(0, np.uint32)
        return (_unpack_results, (reads, fps))


def _unpack_results(reads: list[tuple[Any, ...]], fps: npt.NDArray[np.uint32]) -> _Results:
    out = _Results()
    pos = 0
    new = object.__new__
    for path, entries, warnings, failed in reads:
        news = []
        for (
            dpath,
            dev,
            ino,
            mtime,
            origin,
            fsize,
            ctime,
            kind,
            digest,
            n,
            size,
            view,
            nd,
        ) in entries:
            sc = new(ScannedFile)  # frozen: fill its fields as the pickle of one would
            sc.__dict__.update(
                kind=kind,
                digest=digest,
                fingerprints=fps[pos : pos + n],
                size=size,
                view=view,
                windows=None,
                scale=1,
                n_distinct=nd,
            )
            pos += n
            news.append(_new_file(dpath, dev, ino, mtime, sc, origin, fsize, ctime))
        out.append(_read(path, tuple(news), warnings, failed))
    return out


def _new_file(
    path: str,
    dev: int,
    ino: int,
    mtime_ns: int,
    scan: ScannedFile,
    origin: str | None,
    file_size: int | None,
    ctime_ns: int | None,
) -> NewFile:
    """``NewFile(...)`` without the frozen dataclass's ``__setattr__`` a field (0.4 us
    against 1.1 us: a file read makes one in its worker and one here)."""
    f = object.__new__(NewFile)
    f.__dict__.update(
        path=path,
        dev=dev,
        ino=ino,
        mtime_ns=mtime_ns,
        scan=scan,
        origin=origin,
        file_size=file_size,
        ctime_ns=ctime_ns,
    )
    return f


def _read(
    path: str,
    entries: tuple[NewFile, ...],
    warnings: tuple[ScanWarning, ...],
    failed: ScanWarning | None,
) -> _Read:
    """``_Read(...)``, as :func:`_new_file` makes a ``NewFile``."""
    r = object.__new__(_Read)
    r.__dict__.update(path=path, entries=entries, warnings=warnings, failed=failed)
    return r


def _scan_batch(job: tuple[bool, Sequence[_Item]]) -> list[_Read]:
    """Read each file of a batch into its entries; a file that cannot be read fails.

    ``job`` is (bulk, batch): ``bulk`` when the run reads enough bytes that
    numba should be used from the first file on (:func:`sif.fingerprint.buy_jit`).
    """
    assert _PARAMS is not None
    bulk, batch = job
    if bulk:
        from sif.fingerprint import buy_jit

        buy_jit()
    out = _Results()
    # Plain files in one go (one read each into a shared buffer, one kernel call);
    # the others (archives, compressed, views, large, unreadable) one by one below.
    plain = scan_plain_files([(t[0], t[1], t[2]) for t in batch], _PARAMS, _ANCHORS, _CONTENT)
    for (path, dev, ino, size, mtime_ns, ctime_ns), done in zip(batch, plain, strict=True):
        warnings: list[ScanWarning] = []
        if done is not None:
            scanned = done
        else:
            # Only the walk's file is read (its inode; links followed, as for a root).
            record = FileRecord(path, dev, ino, size, mtime_ns, symlink=True)
            try:
                scanned = scan_entries(
                    path, _PARAMS, _ANCHORS, _CONTENT, record=record, on_warning=warnings.append
                )
            except OSError as exc:
                failure = ScanWarning(path, exc.strerror or str(exc))
                out.append(_Read(path, (), tuple(warnings), failure))
                continue
        news = tuple(
            _new_file(e.path, dev, ino, mtime_ns, e.scan, path, size, ctime_ns) for e in scanned
        )
        out.append(_read(path, news, tuple(warnings), None))
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
