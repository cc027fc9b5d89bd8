"""Plain files read a batch at a time for the small-file pass (:mod:`sif.similar.smallpass`).

A plain file is an entry that is its file's raw view of itself (most of a
tree). The pass probes every window of every file in scope; read through
:class:`sif.windowsets.WindowSets` a file at a time (an open, a file object,
a read, a kernel call and a few numpy calls a file), that was about a quarter
of the pass beside the probe at a million files. Here files are read into one
buffer, :data:`PLAIN_BATCH_BYTES` at a time, for one kernel call a batch
(:func:`sif.core.exactkernels.probe_files`); a file whose size is not the
indexed one is left to the content-view path (a compressed file, indexed by
its content, or a file changed since).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

from sif.events import ScanWarning, WarningSink
from sif.fileio import open_regular
from sif.windowsets import Src

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


def is_plain(src: Src) -> bool:
    """Whether the entry ``src`` (path, file on disk, view) is its file's raw view of itself."""
    return src[2] == "raw" and src[0] == src[1]


#: Bytes of plain files read into one buffer and probed in one kernel call.
PLAIN_BATCH_BYTES = 4 << 20


class PlainReader:
    """Plain files (each the raw view of itself) read a batch at a time into one buffer,
    as :class:`sif.windowsets.WindowSets` reads one: opened as a regular file, read to
    its end, kept when it is as long as indexed. A file that cannot be read is a
    warning; one of another length is left to the caller (``misfits``), uncounted."""

    def __init__(self, on_warning: WarningSink) -> None:
        self.on_warning = on_warning
        self.files_read = 0
        self.bytes_read = 0
        self.misfits: list[tuple[int, int, Src]] = []

    def batches(
        self, items: list[tuple[int, int, Src]], sizes: Mapping[int, int]
    ) -> Iterator[tuple[I32, npt.NDArray[np.uint8], I64, I64]]:
        """(rows, buffer, starts, lengths) of the files of ``items`` read whole, up to
        :data:`PLAIN_BATCH_BYTES` a batch; a larger file alone, in a buffer of its own.
        The buffer is written over by the next batch: the caller is done with a batch
        when it asks for the next. A file whose size (``fstat``) is not the indexed one
        is not read here."""
        buf = bytearray(PLAIN_BATCH_BYTES)
        rows: list[int] = []
        starts: list[int] = []
        lengths: list[int] = []
        pos = 0

        def batch(
            data: bytearray, r: list[int], a: list[int], n: list[int]
        ) -> tuple[I32, npt.NDArray[np.uint8], I64, I64]:
            return (
                np.asarray(r, dtype=np.int32),
                np.frombuffer(data, dtype=np.uint8),
                np.asarray(a, dtype=np.int64),
                np.asarray(n, dtype=np.int64),
            )

        for item in items:
            row, fid, (_, origin, _) = item
            size = sizes[fid]
            if rows and pos + size + 1 > len(buf):  # one byte more: a file that grew
                yield batch(buf, rows, starts, lengths)
                rows, starts, lengths, pos = [], [], [], 0
            alone = size + 1 > len(buf)
            into = bytearray(size + 1) if alone else buf
            got = self._read(origin, memoryview(into)[pos : pos + size + 1], size)
            if got is None:
                continue
            if got != size:
                self.misfits.append(item)  # read, and counted, by the caller
                continue
            self.files_read += 1
            self.bytes_read += got
            if alone:
                yield batch(into, [row], [0], [got])
                continue
            rows.append(row)
            starts.append(pos)
            lengths.append(got)
            pos += got
        if rows:
            yield batch(buf, rows, starts, lengths)

    def _read(self, path: str, slot: memoryview, size: int) -> int | None:
        """The bytes of ``path`` read into ``slot`` (up to its length): how many; -1
        unread, its size not ``size``; None, a warning."""
        try:
            fd, st = open_regular(path)
        except OSError as exc:
            self.files_read += 1
            self.on_warning(ScanWarning(path, exc.strerror or str(exc)))
            return None
        got = 0
        try:
            if st.st_size != size:
                return -1
            while got < len(slot) and (n := os.readv(fd, [slot[got:]])):
                got += n
        except OSError as exc:
            self.files_read += 1
            self.on_warning(ScanWarning(path, exc.strerror or str(exc)))
            return None
        finally:
            os.close(fd)
        return got
