"""The one per-file function of the index: path -> entries -> (kind, digest, fingerprints).

A file on disk becomes its content views (:func:`sif.content.entries`): one
entry for a plain file, the decompressed content of a gzip/bzip2/xz/zstd
file, one entry per archive member (``a.zip!/dir/x.txt``), PostScript
without its prolog, the strings of an ELF file, and under ``--normalize
markup|code`` the text of markup or the tokens of code. Each entry is read
once: the same blocks feed the fingerprints, the BLAKE3 digest of its
content (for exact copies) and, for a query, the values of all its windows
(:mod:`sif.core.windows`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import blake3
import numpy as np
import numpy.typing as npt

from sif.content import RAW, SAMPLE_SIZE, ContentOptions, Entry, entries, kind_of, plain_kind
from sif.core.anchors import AnchorSet
from sif.core.rolling import as_bytes_array
from sif.core.windows import WindowSample, distinct, fold32, window_values
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.fileio import open_regular, open_regular_file
from sif.filetypes import BINARY, TEXT
from sif.fingerprint import FingerprintParams, fingerprint_batch, fingerprint_reader, small_limit

if TYPE_CHECKING:
    from sif.walk import FileRecord

try:  # the batch's opens and reads in C (setup.py builds it where it can)
    from sif.index import _readc  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - no compiler at install
    _readc = None

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]

__all__ = [
    "DIGEST_SIZE",
    "PlainScan",
    "ScannedEntry",
    "ScannedFile",
    "fold32",
    "read_plain",
    "scan_entries",
    "scan_file",
    "scan_plain_files",
]

DIGEST_SIZE = 32
"""Bytes of the BLAKE3 content digest kept per entry."""


@dataclass(frozen=True)
class ScannedFile:
    """What one read of an entry's content gives the index.

    ``fingerprints`` are the stored 32-bit values (see :func:`fold32`), in
    the order of their windows, with multiplicity; ``size`` is the number of
    bytes of content actually read (a file may have changed since it was
    stat'ed); ``view`` the name of the content view. For a query only,
    ``windows`` holds the sampled distinct values of all its windows and
    ``scale`` what one of them stands for (:class:`sif.core.windows.WindowSample`).
    """

    kind: str
    digest: bytes
    fingerprints: U32
    size: int
    view: str = RAW
    windows: U32 | None = None
    scale: int = 1

    @functools.cached_property
    def n_distinct(self) -> int:
        """Distinct fingerprints; computed once (the commit asks more than once)."""
        return len(distinct(self.fingerprints))


@dataclass(frozen=True)
class ScannedEntry:
    """An entry of a file on disk and its scan: ``path`` is ``origin`` or ``origin!/member``."""

    path: str
    origin: str
    label: str
    scan: ScannedFile


def _scan_stream(
    f: object,
    kind: str,
    view: str,
    params: FingerprintParams,
    anchors: AnchorSet | None,
    windows: bool,
) -> ScannedFile:
    hasher = blake3.blake3()
    sample = WindowSample() if windows else None
    tail = b""  # the last w - 1 bytes: windows across blocks
    read = 0
    w = params.window

    def on_block(view_: memoryview) -> None:
        nonlocal read, tail
        hasher.update(view_)
        read += len(view_)
        if sample is not None:
            data = tail + bytes(view_)
            sample.add(
                window_values(as_bytes_array(data), params.scheme, w, params.k, params.modulus_bits)
            )
            tail = data[-(w - 1) :] if w > 1 else b""

    fps = fingerprint_reader(f, params, anchors=anchors, on_block=on_block)
    scanned = ScannedFile(
        kind,
        hasher.digest(),
        fold32(fps.values),
        read,
        view,
        None if sample is None else sample.values(),
        1 if sample is None else sample.scale,
    )
    _ = scanned.n_distinct  # computed here, in the worker, and pickled with the result
    return scanned


def scan_file(
    path: str | os.PathLike[str],
    params: FingerprintParams,
    anchors: AnchorSet | None = None,
    *,
    windows: bool = False,
) -> ScannedFile:
    """Read the file at ``path`` once, as it is (the raw view): kind, digest, fingerprints.

    ``windows`` also samples the values of all its windows (for a query).
    Raises ``OSError`` when the file cannot be opened or read, or is not a
    regular file (:class:`sif.fileio.NotRegularFile`: a FIFO is never
    waited on). Cost: one
    sequential read in 1 MiB blocks, BLAKE3 and the fingerprint kernel over
    each block (and with ``windows`` the window values: about 10 ns a byte);
    memory O(block).
    """
    f, _ = open_regular_file(path, buffering=0)
    with f:
        head = os.pread(f.fileno(), SAMPLE_SIZE, 0)
        return _scan_stream(f, kind_of(head), RAW, params, anchors, windows)


def scan_entry(
    entry: Entry,
    params: FingerprintParams,
    anchors: AnchorSet | None = None,
    *,
    windows: bool = False,
    record: FileRecord | None = None,
) -> ScannedFile:
    """Scan one entry of :func:`sif.content.entries` (read it before drawing the next).

    An entry read from its file on disk is read only if that is still the
    regular file ``record`` names (device and inode; through a symlink only
    if ``record.symlink``). Raises ``OSError`` when its content cannot be
    read. Cost and memory as :func:`scan_file`; a streamed entry is never
    held whole.
    """
    if entry.file is not None:
        disk, _ = open_regular_file(
            entry.file,
            expect=None if record is None else (record.dev, record.ino),
            follow_symlinks=record is None or record.symlink,
            buffering=0,
        )
        with disk:
            return _scan_stream(disk, entry.kind, entry.view.name, params, anchors, windows)
    with entry.open() as f:
        return _scan_stream(f, entry.kind, entry.view.name, params, anchors, windows)


def scan_entries(
    path: str | os.PathLike[str],
    params: FingerprintParams,
    anchors: AnchorSet | None = None,
    content: ContentOptions | None = None,
    *,
    record: FileRecord | None = None,
    windows: bool = False,
    on_warning: WarningSink = ignore_warning,
) -> list[ScannedEntry]:
    """Every entry of the file at ``path`` under ``content`` (default: auto), scanned.

    Problems with the content (a corrupt archive, a bomb, a limit) are
    warnings to ``on_warning`` and the rest goes on (see
    :func:`sif.content.entries`). Raises ``OSError`` when the file itself
    cannot be read, is not a regular file (a FIFO, a device: never waited
    on nor read) or, with ``record``, is no longer the walk's file (other
    device or inode, a symlink now); an empty list is never returned for a
    readable file.
    Cost: reading the file once, plus decompression; memory bounded by
    ``content.max_entry_bytes`` per nesting level.
    """
    origin = os.fspath(path)
    held: list[ScanWarning] = []  # until an entry comes: without one they become the error

    def warn(w: ScanWarning) -> None:
        if out:
            on_warning(w)
        else:
            held.append(w)

    out: list[ScannedEntry] = []
    for entry in entries(origin, record, content, on_warning=warn):
        scan = scan_entry(entry, params, anchors, windows=windows, record=record)
        if not out:
            for w in held:
                on_warning(w)
        out.append(ScannedEntry(entry.path, origin, str(entry.view), scan))
    if not out:
        raise OSError(held[-1].cause if held else "no content")
    return out


@dataclass(frozen=True)
class PlainScan:
    """What :func:`read_plain` gives for a batch: the files it took (their positions
    in the batch, ascending), as columns, and the fingerprints of all of them in
    one array (file ``j``'s are ``values[edges[j] : edges[j + 1]]``)."""

    index: list[int]
    kinds: list[str]
    digests: list[bytes]
    sizes: list[int]
    n_distinct: list[int]
    values: U32
    edges: list[int]


def scan_plain_files(
    files: Sequence[tuple[str, int, int]],
    params: FingerprintParams,
    anchors: AnchorSet | None = None,
    content: ContentOptions | None = None,
) -> list[list[ScannedEntry] | None]:
    """:func:`scan_entries` of many files at once, for those that are plain files.

    ``files`` holds (path, device, inode) of files met by the walk. For each,
    its entries exactly as :func:`scan_entries` gives them (with the walk's
    record, links followed) when it is one raw entry of the whole file (see
    :func:`sif.content.plain_kind`) shorter than :func:`sif.fingerprint.small_limit`;
    else ``None``: the caller scans that one with :func:`scan_entries`, which
    also tells why it cannot be read (a file that fails here, in any way, is
    ``None``). :func:`read_plain`, made into objects.
    """
    got = read_plain(files, params, anchors, content)
    out: list[list[ScannedEntry] | None] = [None] * len(files)
    edges = got.edges
    for j, i in enumerate(got.index):
        scanned = ScannedFile(
            got.kinds[j], got.digests[j], got.values[edges[j] : edges[j + 1]], got.sizes[j], RAW
        )
        scanned.__dict__["n_distinct"] = got.n_distinct[j]  # the cached property, computed
        path = files[i][0]
        out[i] = [ScannedEntry(path, path, RAW, scanned)]
    return out


def read_plain(
    files: Sequence[tuple[str, int, int]],
    params: FingerprintParams,
    anchors: AnchorSet | None = None,
    content: ContentOptions | None = None,
) -> PlainScan:
    """The plain files among ``files`` (see :func:`scan_plain_files`) read, as columns.

    Each file is opened once and read whole into one buffer for the batch, and
    the buffer is fingerprinted in one kernel call; the distinct counts come
    from one sort. Cost per file: an open, an fstat, a read, BLAKE3 and the
    kernel over its bytes; no object a file (the workers of ``sif index`` send
    these columns back as they are); memory: the batch's bytes.
    """
    content = content or ContentOptions()
    limit = small_limit(params)
    read = _readc.read_files if _readc is not None else _read_py
    raw, slots, lengths = read(list(files), limit)
    buf = np.frombuffer(raw, dtype=np.uint8)
    view = memoryview(raw)
    index, kinds = _plain_kinds(raw, slots, lengths, files, content.normalize)
    if not index:
        return PlainScan([], [], [], [], [], np.empty(0, np.uint32), [0])
    starts = np.asarray(slots, dtype=np.int64)[index]
    ends = starts + np.asarray(lengths, dtype=np.int64)[index]
    values, counts = fingerprint_batch(params, buf, starts, ends, anchors)
    stored = fold32(values)
    bounds = np.zeros(len(index) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    # Distinct values per file: one sort of (file, value) keys for the batch.
    owner = np.repeat(np.arange(len(index), dtype=np.uint64), counts)
    keys = distinct((owner << np.uint64(32)) | stored.astype(np.uint64))
    per_file = np.bincount((keys >> np.uint64(32)).astype(np.int64), minlength=len(index))
    blake = blake3.blake3
    return PlainScan(
        index,
        kinds,
        [blake(view[a:z]).digest() for a, z in zip(starts.tolist(), ends.tolist(), strict=True)],
        (ends - starts).tolist(),
        per_file.tolist(),
        stored,
        bounds.tolist(),
    )


#: :func:`sif.content.plain_kind` by the class ``_readc.head_classes`` gives a head
#: (2 * magic + binary; magic 0 none, 1 a compression or an archive, 2 ELF or
#: PostScript), for the modes it serves; ``None``: not a plain file.
_KIND_BY_CLASS: dict[str, tuple[str | None, ...]] = {
    "raw": (TEXT, BINARY, TEXT, BINARY, TEXT, BINARY),
    "auto": (TEXT, BINARY, None, None, None, None),
    "unpack": (TEXT, BINARY, None, None, TEXT, BINARY),
}


def _plain_kinds(
    raw: bytearray,
    slots: list[int],
    lengths: list[int],
    files: Sequence[tuple[str, int, int]],
    mode: str,
) -> tuple[list[int], list[str]]:
    """The files read whole (``lengths[i] >= 0``) that :func:`sif.content.plain_kind` calls
    plain under normalisation ``mode``: their positions in ``files`` and their kinds.

    For ``raw``, ``auto`` and ``unpack``, one C pass over the heads decides them all
    (``_readc.head_classes``: the same magic numbers and text test; 0.33 us a file
    with this loop against 3.55 us for ``plain_kind``'s, on 20,000 small files);
    ``code`` keeps none; ``markup``, whose test
    is the sniffer's regular expressions, and a build without the C module ask
    :func:`plain_kind` a file at a time.
    """
    if mode == "code":
        return [], []
    table = _KIND_BY_CLASS.get(mode)
    classes = getattr(_readc, "head_classes", None)  # None: not built, or built before it
    if table is not None and classes is not None:
        codes = classes(raw, slots, lengths, SAMPLE_SIZE)
        index, kinds = [], []
        for i, c in enumerate(codes):
            kind = table[c] if c < 6 else None
            if kind is not None:
                index.append(i)
                kinds.append(kind)
        return index, kinds
    view = memoryview(raw)
    index, kinds = [], []
    for i, (pos, got) in enumerate(zip(slots, lengths, strict=True)):
        if got >= 0:
            head = bytes(view[pos : pos + min(got, SAMPLE_SIZE)])
            kind = plain_kind(head, files[i][0], mode)
            if kind is not None:
                index.append(i)
                kinds.append(kind)
    return index, kinds


def _read_py(
    files: list[tuple[str, int, int]], limit: int
) -> tuple[bytearray, list[int], list[int]]:
    """``sif.index._readc.read_files`` in Python, where it is not built: one buffer, each
    file's slot in it and the bytes read into it (-1: not read whole here)."""
    opened: list[tuple[int, int, int]] = []  # (index, fd, size)
    slots, lengths = [0] * len(files), [-1] * len(files)
    try:
        for i, (path, dev, ino) in enumerate(files):
            try:
                fd, st = open_regular(path, expect=(dev, ino))
            except OSError:
                continue
            if st.st_size >= limit:
                os.close(fd)
                continue
            opened.append((i, fd, st.st_size))
        total = sum(size + 1 for _, _, size in opened)  # one byte more: a file that grew
        raw = bytearray(total)
        view = memoryview(raw)
        pos = 0
        for i, fd, size in opened:
            slot = size + 1
            got = 0
            try:
                while got < slot and (n := os.readv(fd, [view[pos + got : pos + slot]])):
                    got += n
            except OSError:
                got = slot
            slots[i] = pos
            if got < slot:
                lengths[i] = got
            pos += slot
    finally:
        for _, fd, _ in opened:
            os.close(fd)
    return raw, slots, lengths
