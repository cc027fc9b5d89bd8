"""Archive members: the members of a zip or tar as streams, guarded against bombs.

:func:`sif.content.entries` opens the archive; here its members become
``(name, stream, declared size)`` triples. A zip's declared sizes are checked
against the expansion ratio and the scan's budget before anything is
inflated, entries that share their data (Fifield's overlapping zip bomb) are
read once, encrypted members are skipped with a warning; a sparse tar member
is charged to the budget. Every limit is a warning or a :class:`_Stop`,
never an exception.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, cast

from sif.decoders import (
    _CHUNK,
    _cause,
    _Chain,
    _decoded_name,
    _decoder,
    _endings,
    _Metered,
    _read_upto,
    _Readable,
    _Stop,
    broken,
)
from sif.filetypes import ARCHIVES, COMPRESSIONS, SAMPLE_SIZE, sniff

if TYPE_CHECKING:
    import tarfile
    import zipfile

    from sif.content import _Scan


def _holds_archive(kind: str, data: bytes, name: str) -> bool:
    """Whether compressed ``data`` (a member named ``name``) starts with an archive.

    A look at its first decompressed bytes, outside the budget (at most
    :data:`SAMPLE_SIZE` of them) and silent: a member that cannot be
    decompressed was compared by its bytes and is no archive to open.
    """
    try:
        decoder = _decoder(kind, _Chain(data, None))
    except _Stop:
        return False
    try:
        sample, _ = _read_upto(decoder, SAMPLE_SIZE)
    except _endings():
        return False
    finally:
        decoder.close()
    inner = sniff(sample, _decoded_name(name))
    return inner in ARCHIVES or inner in COMPRESSIONS


def _member_name(name: str) -> str:
    """A member's name without the leading ``./`` or ``/`` that ``tar -C dir .`` writes."""
    return _LEADING.sub("", name) or name


_LEADING = re.compile(r"^(?:\./|/)+")


def _constant(n: int) -> Callable[[], int]:
    return lambda: n


#: The fixed part of a zip local file header: what precedes a member's name and data.
_ZIP_LOCAL_HEADER = 30


def _overlapping(infos: list[zipfile.ZipInfo]) -> set[int]:
    """Indexes of the zip entries whose data overlaps that of an earlier entry.

    An honest zip stores each member once, one after the other; a bomb lists
    one local header many times, or lets entries overlap (Fifield's "better
    zip bomb"). An entry's data is at least its fixed header and its
    compressed size long, from its header offset: an entry that starts
    before the end of the one before it (by offset) shares its data. The
    first of each overlapping run is kept. Cost: a sort of the entries.
    """
    order = sorted(range(len(infos)), key=lambda k: (infos[k].header_offset, k))
    shared: set[int] = set()
    end = -1
    for k in order:
        info = infos[k]
        if info.header_offset < end:
            shared.add(k)
        else:
            end = info.header_offset + _ZIP_LOCAL_HEADER + info.compress_size
    return shared


def _zip_members(
    scan: _Scan, display: str, archive: IO[bytes]
) -> Iterator[tuple[str, _Readable, int | None]]:
    o = scan.options
    import zipfile

    with zipfile.ZipFile(archive) as zf:
        infos = [info for info in zf.infolist() if not info.is_dir()]
        shared = _overlapping(infos)
        if shared:
            scan.budget.stats.shared += len(shared)
            first = infos[min(shared)].filename
            scan.warn(
                display,
                f"{len(shared)} zip entries (the first: {first}) share their data with "
                "another entry (a zip bomb?): read once, the repeats skipped",
            )
        for k, info in enumerate(infos):
            if k in shared:
                continue
            path = f"{display}!/{info.filename}"
            if info.flag_bits & 0x1:
                scan.warn(path, "encrypted zip member: skipped")
                continue
            # The declared sizes bound what zipfile will produce: check them before inflating.
            if info.file_size > o.ratio_floor and info.file_size > o.max_ratio * max(
                1, info.compress_size
            ):
                scan.warn(
                    path,
                    f"zip member expands more than {o.max_ratio}:1 ({info.file_size} bytes from "
                    f"{info.compress_size}): a decompression bomb? skipped",
                )
                continue
            if info.file_size > scan.budget.bytes_left:
                raise _Stop(
                    f"{path}: {info.file_size} more bytes would make {scan.budget.spent()}",
                    whole_file=True,
                )
            try:
                raw = zf.open(info)
            except broken() as exc:
                scan.warn(path, f"zip: {_cause(exc)}")
                continue
            with raw:
                # zipfile reads the compressed bytes itself: hold it to the declared size.
                metered = _Metered(
                    cast(_Readable, raw),
                    scan.budget,
                    _constant(info.compress_size),
                    "zip member",
                )
                yield (
                    _member_name(info.filename),
                    io.BufferedReader(metered, _CHUNK),
                    info.file_size,
                )


def _tar_members(
    scan: _Scan, display: str, tar: tarfile.TarFile
) -> Iterator[tuple[str, _Readable, int | None]]:
    with tar:
        for info in tar:
            if not info.isreg():
                continue
            raw = tar.extractfile(info)
            if raw is None:
                continue
            with raw:
                # A tar member is a copy of bytes a layer below paid for, unless it is sparse
                # (its holes cost nothing on disk): then it is charged.
                reader: io.RawIOBase = cast(io.RawIOBase, raw)
                if info.issparse():
                    reader = _Metered(reader, scan.budget, None, "sparse tar member")
                yield _member_name(info.name), io.BufferedReader(reader, _CHUNK), info.size
