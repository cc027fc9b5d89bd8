"""Bounded reading and decompression: the layers :mod:`sif.content` reads through.

Each file on disk gets a :class:`_Budget` (at most :func:`total_bound` bytes produced,
``max_members`` members); decompressors are metered against it and held to the ratio
limit; a corrupt or truncated stream raises one of :func:`broken` (a zstd stream too:
:class:`_ZstdFrames` follows its frames to tell a cut one), which the caller turns into a
:class:`~sif.events.ScanWarning`.
"""

from __future__ import annotations

import functools
import io
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

from sif.events import ScanWarning, WarningSink

if TYPE_CHECKING:
    from sif.content import ContentOptions

# --- bounded reading and decompression --------------------------------------------


class _Readable(Protocol):
    """What the layers read from: files, decompressors, archive members."""

    def read(self, size: int = -1, /) -> bytes: ...

    def readinto(self, buffer: Any, /) -> int | None: ...

    def close(self) -> None: ...


class _Stop(Exception):
    """A limit or a broken stream stops a layer; ``cause`` says which, for the warning."""

    def __init__(self, cause: str, whole_file: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.whole_file = whole_file  # the file's budget is spent: stop everything


@functools.cache
def broken() -> tuple[type[BaseException], ...]:
    """What a corrupt or truncated archive or compressed stream raises.

    A function, so that a process that meets no archive (``sif query`` of a
    text file) never imports lzma, tarfile and zipfile.
    """
    import lzma
    import tarfile
    import zipfile

    return (
        OSError,
        EOFError,
        ValueError,
        zlib.error,
        lzma.LZMAError,
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        tarfile.TarError,
        NotImplementedError,  # a zip compression method Python lacks (deflate64, ...)
        RuntimeError,  # an encrypted zip member
        struct.error,
    )


@functools.cache
def _endings() -> tuple[type[BaseException], ...]:
    return (_Stop, *broken())


def _cause(exc: BaseException) -> str:
    if isinstance(exc, _Stop):
        return exc.cause
    text = str(exc) or type(exc).__name__
    if isinstance(exc, EOFError):
        return f"truncated: {text}"
    return f"corrupt: {text}" if not isinstance(exc, OSError) or exc.errno is None else text


def total_bound(options: ContentOptions, size: int) -> int:
    """The most bytes that one file of ``size`` bytes may produce, at all depths.

    ``options.max_ratio`` times its size (at least ``options.ratio_floor``),
    and never more than ``options.max_total_bytes``: an archive whose
    entries overlap or repeat one member cannot expand much more than its
    bytes allow.
    """
    return min(options.max_total_bytes, max(options.ratio_floor, options.max_ratio * size))


@dataclass
class ContentStats:
    """What :func:`entries` did for one file; the caller may pass one in to count the cost.

    - ``expanded``: bytes produced by decompression, at all depths: of compressed
      files and members, zip members, sparse tar members (other tar members are
      bytes of the layer below);
    - ``members``: archive members taken;
    - ``shared``: zip entries left out because their data overlaps another's.
    """

    expanded: int = 0
    members: int = 0
    shared: int = 0


class _Budget:
    """What one file on disk may still produce and hold; shared by all its layers."""

    def __init__(self, options: ContentOptions, size: int, stats: ContentStats) -> None:
        self.options = options
        self.limit = total_bound(options, size)
        self.size = size
        self.bytes_left = self.limit
        self.members_left = options.max_members
        self.stats = stats

    def take(self, n: int) -> None:
        self.bytes_left -= n
        self.stats.expanded += n
        if self.bytes_left < 0:
            raise _Stop(self.spent(), whole_file=True)

    def spent(self) -> str:
        o = self.options
        if self.limit == o.max_total_bytes:
            why = "max_total_bytes"
        else:
            why = f"{o.max_ratio} times the file's {self.size} bytes, max_ratio"
        return (
            f"more than {self.limit} bytes decompressed or extracted from one file ({why}): "
            "the rest is skipped"
        )


class _Counting(io.RawIOBase):
    """A reader that counts the bytes read through it: the input of a decompressor."""

    def __init__(self, inner: _Readable) -> None:
        self.inner = inner
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.inner.readinto(b) or 0
        self.count += n
        return n


class _Metered(io.RawIOBase):
    """Decompressed output, charged to the budget and held to the ratio limit."""

    def __init__(
        self, inner: _Readable, budget: _Budget, consumed: Callable[[], int] | None, what: str
    ) -> None:
        self.inner = inner
        self.budget = budget
        self.consumed = consumed  # compressed bytes read so far; None: no ratio limit
        self.what = what
        self.produced = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        # read1: what one step of the decompressor gives, so that a stream cut
        # short fails when its bytes are reached, not a read-ahead earlier.
        read1 = getattr(self.inner, "read1", None)
        if read1 is not None:
            data = read1(len(b))
            n = len(data)
            b[:n] = data
        else:
            n = self.inner.readinto(b) or 0
        self.produced += n
        self.budget.take(n)
        o = self.budget.options
        if self.consumed is not None and self.produced > o.ratio_floor:
            consumed = self.consumed()
            if self.produced > o.max_ratio * max(1, consumed):
                raise _Stop(
                    f"{self.what} expands more than {o.max_ratio}:1 ({self.produced} bytes "
                    f"from {consumed}): a decompression bomb? skipped"
                )
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


class _Chain(io.RawIOBase):
    """``head`` (bytes already read) followed by the rest of ``inner``."""

    def __init__(self, head: bytes, inner: _Readable | None) -> None:
        self.head = memoryview(head)
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.head:
            n = min(len(b), len(self.head))
            b[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        return (self.inner.readinto(b) or 0) if self.inner is not None else 0


class _Guarded(io.RawIOBase):
    """A stream handed to callers: a limit or a broken stream ends it with a warning."""

    def __init__(self, inner: _Readable, path: str, on_warning: WarningSink) -> None:
        self.inner = inner
        self.path = path
        self.on_warning = on_warning
        self.ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.ended:
            return 0
        try:
            return self.inner.readinto(b) or 0
        except _endings() as exc:
            self.ended = True
            self.on_warning(ScanWarning(self.path, _cause(exc) + " (entry cut short)"))
            return 0


_CHUNK = 1 << 20


def _read_upto(f: _Readable, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of ``f``, and whether more follow.

    When more follow, the bytes returned are ``limit + 1`` (the byte that
    told), so that the caller can go on from where the read stopped.
    Memory: O(limit).
    """
    buf = bytearray()
    while len(buf) <= limit:
        chunk = f.read(min(_CHUNK, limit + 1 - len(buf)))
        if not chunk:
            return bytes(buf), False
        buf += chunk
    return bytes(buf), True


def _decoder(kind: str, source: _Readable) -> _Readable:
    raw = cast(IO[bytes], source)
    if kind == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bzip2":
        import bz2

        return bz2.BZ2File(raw, "rb")
    if kind == "xz":
        import lzma

        return lzma.LZMAFile(raw, "rb")
    try:
        import zstandard
    except ImportError:
        raise _Stop("zstd content needs the zstandard package: taken raw") from None
    frames = _ZstdFrames(source)
    reader = zstandard.ZstdDecompressor().stream_reader(
        cast(IO[bytes], frames), read_across_frames=True
    )
    return _ZstdStream(reader, frames, zstandard.ZstdError)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_FCS_BYTES = (0, 2, 4, 8)
_ZSTD_DICT_BYTES = (0, 1, 2, 4)


class _ZstdFrames(io.RawIOBase):
    """The compressed bytes on their way to the zstd decoder, followed frame by frame.

    The decoder of ``zstandard`` ends quietly when its input stops in the
    middle of a frame; gzip, bzip2 and xz say the stream is truncated. This
    reader walks the frame and block headers of what passes through it (a
    few bytes a block: no per-byte work), so that :attr:`complete` tells
    whether the input ended where a frame ends. Input it cannot follow
    (not a zstd frame) is left to the decoder to reject.
    """

    def __init__(self, inner: _Readable) -> None:
        self.inner = inner
        self.pending = bytearray()  # header bytes not yet complete
        self.skip = 0  # bytes of block content (or skippable frame) still to pass
        self.state = "frame"  # what the pending bytes start: frame, header, block, checksum
        self.need = 4
        self.checksum = False
        self.lost = False  # not a frame we can follow

    @property
    def complete(self) -> bool:
        return self.lost or (self.state == "frame" and not self.pending and self.skip == 0)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.inner.readinto(b) or 0
        if n and not self.lost:
            self._walk(memoryview(b)[:n])
        return n

    def _walk(self, data: memoryview) -> None:
        pos, end = 0, len(data)
        while pos < end:
            if self.skip:
                step = min(self.skip, end - pos)
                self.skip -= step
                pos += step
                continue
            take = min(self.need - len(self.pending), end - pos)
            self.pending += data[pos : pos + take]
            pos += take
            if len(self.pending) < self.need:
                return
            self._header(bytes(self.pending))
            if self.lost:
                return

    def _header(self, h: bytes) -> None:
        self.pending.clear()
        if self.state == "frame":
            magic = int.from_bytes(h[:4], "little")
            if magic == _ZSTD_MAGIC:
                self.state, self.need = "descriptor", 1
            elif magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: its size follows
                self.state, self.need = "skippable", 4
            else:
                self.lost = True
        elif self.state == "skippable":
            self.skip = int.from_bytes(h, "little")
            self.state, self.need = "frame", 4
        elif self.state == "descriptor":
            fhd = h[0]
            single = (fhd >> 5) & 1
            self.checksum = bool((fhd >> 2) & 1)
            fcs = _ZSTD_FCS_BYTES[fhd >> 6] or single
            rest = (0 if single else 1) + _ZSTD_DICT_BYTES[fhd & 3] + fcs
            self.state, self.skip, self.need = "block", rest, 3
        elif self.state == "block":
            header = int.from_bytes(h, "little")
            last, kind, size = header & 1, (header >> 1) & 3, header >> 3
            self.skip = 1 if kind == 1 else size  # an RLE block stores one byte
            if last:
                self.state, self.need = ("checksum", 4) if self.checksum else ("frame", 4)
        else:  # the frame's checksum
            self.state, self.need = "frame", 4


class _ZstdStream(io.RawIOBase):
    """zstd output that fails as gzip does: corrupt data and a cut stream raise."""

    def __init__(self, reader: Any, frames: _ZstdFrames, error: type[BaseException]) -> None:
        self.reader = reader
        self.frames = frames
        self.error = error

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        try:
            data: bytes = self.reader.read(size if size > 0 else _CHUNK)
        except self.error as exc:
            raise ValueError(str(exc)) from None
        if not data and not self.frames.complete:
            raise EOFError("compressed file ended before the end of its last zstd frame")
        return data

    def readinto(self, b: Any) -> int:
        data = self.read1(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.reader.close()
        super().close()


_COMPRESSED_SUFFIX = re.compile(r"\.(?:gz|z|bz2|bz|xz|zst|zstd)$", re.I)
_COMPRESSED_TAR = re.compile(r"\.t(?:gz|bz2|xz|zst)$", re.I)


def _decoded_name(name: str) -> str:
    """The name of the decompressed content: ``a.ps.gz`` -> ``a.ps``, ``a.tgz`` -> ``a.tar``."""
    if _COMPRESSED_TAR.search(name):
        return _COMPRESSED_TAR.sub(".tar", name)
    return _COMPRESSED_SUFFIX.sub("", name)
