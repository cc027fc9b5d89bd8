"""Content views: what of a file sif fingerprints (Manber, sections 2, 4 and 6).

The paper compares text files only with text files (section 4: "only two
types, text files and non-text files"): :func:`kind_of` is that decision.
Section 6 asks for more: PostScript headers left out, troff/TeX formatting
removed, compressed files and executables fingerprinted on invariants. Here
a file becomes one or more :class:`Entry` values, each with the
:class:`View` that made its content:

=============  ===============================  =====================================
view           content                          when
=============  ===============================  =====================================
raw            the bytes as they are            default; ``normalize="raw"``
postscript     pages without prolog and set-up  ``%!`` first (:func:`strip_postscript`)
elf-strings    strings of data sections         ``\x7fELF`` (:func:`elf_strings`)
markup         text of troff/TeX/HTML/XML       ``normalize="markup"``
code           Pygments tokens, placeholders    ``normalize="code"`` (Baker, section 1)
=============  ===============================  =====================================

gzip, bzip2, xz and zstd content is decompressed first (``view.decoded``);
zip and tar archives give one entry per member, ``a.zip!/dir/member``.
Decompression is bounded (:class:`ContentOptions`): limits and broken
streams are :class:`~sif.events.ScanWarning` values, never exceptions.

The normalisers are pure functions over bytes in :mod:`sif.normalizers`
(imported when a view first needs one); :func:`kind_of` and :func:`sniff`
are in :mod:`sif.filetypes` (re-exported here); the
bounded decompressors are in :mod:`sif.decoders`, an archive's members in
:mod:`sif.archives`; this module holds the views, the options and the
driver that turns a file into entries, archives included. :func:`entries`
is the only function that opens files.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, cast

from sif.archives import _holds_archive, _tar_members, _zip_members
from sif.decoders import (
    _CHUNK,
    _COMPRESSED_TAR,
    ContentStats,
    _Budget,
    _cause,
    _Chain,
    _Counting,
    _decoded_name,
    _decoder,
    _Guarded,
    _Metered,
    _read_upto,
    _Readable,
    _Stop,
    broken,
    total_bound,
)
from sif.errors import ConfigError
from sif.events import ScanWarning, WarningSink, ignore_warning
from sif.filetypes import (
    ARCHIVES,
    BINARY,
    COMPRESSIONS,
    KINDS,
    MARKUPS,
    MAX_NONTEXT_SHARE,
    SAMPLE_SIZE,
    TEXT,
    kind_of,
    sniff,
    sniff_magic,
)

if TYPE_CHECKING:
    from sif.walk import FileRecord


__all__ = [
    "ARCHIVES",
    "BINARY",
    "CODE",
    "COMPRESSIONS",
    "ELF_STRINGS",
    "KINDS",
    "MARKUP",
    "MARKUPS",
    "MAX_NONTEXT_SHARE",
    "NORMALIZE_MODES",
    "POSTSCRIPT",
    "RAW",
    "SAMPLE_SIZE",
    "TEXT",
    "VIEW_NAMES",
    "ContentOptions",
    "ContentStats",
    "Entry",
    "View",
    "entries",
    "kind_of",
    "plain_kind",
    "sniff",
    "total_bound",
]


# --- views and entries ------------------------------------------------------------

#: Normalisation modes of :class:`ContentOptions` (``--normalize``).
NORMALIZE_MODES = ("auto", "markup", "code", "unpack", "raw")

#: View names: what the fingerprints of an entry are made of. The index records
#: the name beside the fingerprint parameters; entries of different names are
#: never compared.
RAW = "raw"
POSTSCRIPT = "postscript"
MARKUP = "markup"
ELF_STRINGS = "elf-strings"
CODE = "code"
VIEW_NAMES = (RAW, POSTSCRIPT, MARKUP, ELF_STRINGS, CODE)


@dataclass(frozen=True)
class View:
    """How an entry's content was derived from the bytes on disk.

    - ``name``: the normaliser, one of :data:`VIEW_NAMES`; fingerprints are
      comparable only between entries of the same name (and kind);
    - ``source``: the detected type the normaliser read (``"postscript"``,
      ``"troff"``, ``"tex"``, ``"html"``, ``"xml"``, ``"elf"``, a Pygments
      lexer alias such as ``"python"``, or ``"text"``/``"binary"`` for raw);
    - ``decoded``: the decompressions applied to the file or member that the
      entry's path names, outermost first (``("gzip",)`` for ``x.ps.gz`` and
      for ``a.zip!/x.ps.gz``, none for ``a.tar.gz!/x.ps``): archive layers
      show in the path instead.

    ``str(view)`` is the short label shown to users: ``"raw"``, ``"gzip"``,
    ``"gzip+postscript"``, ``"markup"``.
    """

    name: str = RAW
    source: str = ""
    decoded: tuple[str, ...] = ()

    def __str__(self) -> str:
        tail = () if self.name == RAW and self.decoded else (self.name,)
        return "+".join(self.decoded + tail)


@dataclass(frozen=True)
class Entry:
    """One thing to fingerprint: a plain file, or a member or decompressed content of one.

    - ``path``: the display path: the file's path, then ``!/member`` for each
      archive level (``a.tar.gz!/x.zip!/y.txt``); decompression adds no level;
    - ``origin``: the path of the file on disk that holds the entry;
    - ``kind``: :data:`TEXT` or :data:`BINARY`, of the content before the
      normaliser (an ELF is binary although its strings view is text);
    - ``view``: the :class:`View` the content went through;
    - ``size``: bytes of the content (after the view), ``None`` if unknown
      (a streamed decompressed member).

    The content is in exactly one of three places, read with :meth:`open`
    or :meth:`read`:

    - ``file``: the whole file at that path, unchanged (a plain file in the
      raw view): read it from disk, streamed, as the caller reads any file;
    - ``data``: the bytes in memory (at most ``max_entry_bytes``);
    - a stream (a large decompressed member in the raw view), readable only
      until the :func:`entries` iterator is advanced; it ends early, with a
      :class:`ScanWarning`, when a limit or a corrupt stream stops it.
    """

    path: str
    origin: str
    kind: str
    view: View
    size: int | None
    data: bytes | None = None
    file: str | None = None
    stream: IO[bytes] | None = field(default=None, repr=False, compare=False)

    def open(self) -> IO[bytes]:
        """A readable binary stream of the content; the caller closes it.

        Raises ``OSError`` if ``file`` cannot be opened (or is no regular file
        now: :func:`sif.fileio.open_regular`). A stream entry can be opened once.
        """
        if self.data is not None:
            return io.BytesIO(self.data)
        if self.file is not None:
            from sif.fileio import open_regular_file

            return open_regular_file(self.file)[0]
        assert self.stream is not None
        return self.stream

    def read(self, limit: int = -1) -> bytes:
        """The content (its first ``limit`` bytes if ``limit >= 0``). Memory: what it returns."""
        if self.data is not None:
            return self.data if limit < 0 else self.data[:limit]
        with self.open() as f:
            return f.read(limit)


@dataclass(frozen=True)
class ContentOptions:
    """How files become entries; every bound applies per file on disk.

    - ``normalize``: ``"auto"`` (default: PostScript prolog stripped, ELF
      strings, compressed files decompressed, archives expanded), ``"markup"``
      (auto, and troff/TeX/HTML/XML commands and tags removed), ``"code"``
      (auto, and source code as Pygments tokens; needs Pygments), ``"unpack"``
      (archives expanded and compressed files decompressed, but every entry
      keeps its exact bytes: for ``sif dupes --archives``), ``"raw"`` (the
      bytes as they are: one raw entry per file, nothing opened);
    - ``max_depth``: archive and compression layers opened inside one file
      (``x.tar.gz!/y.zip!/z.gz`` is 4 deep); a deeper layer is taken raw;
    - ``max_members``: archive members taken from one file, at all depths;
    - ``max_total_bytes``: decompressed bytes produced from one file, at all
      depths (compressed files and members, zip members, sparse tar members;
      a plain tar member is bytes of the layer below); reaching it, or
      ``max_ratio`` times the file's size (:func:`total_bound`), stops that
      file with a warning;
    - ``max_ratio``, ``ratio_floor``: a decompression that has produced more
      than ``ratio_floor`` bytes and more than ``max_ratio`` times the
      compressed bytes it read is a bomb: stopped with a warning (text
      compresses 3-10:1, logs up to ~50:1; a zip bomb of zeros ~1000:1);
    - ``max_entry_bytes``: the most held in memory for one entry: content to
      normalise or to expand (a nested zip) must fit, else it is taken raw
      (streamed) with a warning.

    Raises :class:`ConfigError` for a bad value, or for ``"code"`` when
    Pygments is not installed.
    """

    normalize: str = "auto"
    max_depth: int = 6
    max_members: int = 100_000
    max_total_bytes: int = 4 << 30
    max_ratio: int = 200
    ratio_floor: int = 1 << 20
    max_entry_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.normalize not in NORMALIZE_MODES:
            raise ConfigError(
                f"unknown normalisation {self.normalize!r} "
                f"(choose from {', '.join(NORMALIZE_MODES)})"
            )
        for name in ("max_depth", "max_members", "max_total_bytes", "max_ratio", "ratio_floor"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{name} must be a non-negative integer, not {value!r}")
        if not isinstance(self.max_entry_bytes, int) or self.max_entry_bytes < SAMPLE_SIZE:
            raise ConfigError(f"max_entry_bytes must be at least {SAMPLE_SIZE}")
        if self.normalize == "code":
            import importlib.util

            if importlib.util.find_spec("pygments") is None:
                raise ConfigError("--normalize code needs Pygments: pip install pygments")


# --- the driver: files to entries --------------------------------------------------


@dataclass
class _Scan:
    origin: str
    options: ContentOptions
    on_warning: WarningSink
    budget: _Budget

    def warn(self, path: str, cause: str) -> None:
        self.on_warning(ScanWarning(path, cause))


def entries(
    path: str | os.PathLike[str],
    record: FileRecord | None = None,
    options: ContentOptions | None = None,
    *,
    on_warning: WarningSink = ignore_warning,
    stats: ContentStats | None = None,
) -> Iterator[Entry]:
    """The entries of the file at ``path``: what sif fingerprints of it.

    A plain file gives one entry, its view chosen by :func:`sniff` and
    ``options.normalize``: PostScript -> ``postscript``
    (:func:`strip_postscript`), ELF -> ``elf-strings`` (:func:`elf_strings`),
    troff/TeX/HTML/XML -> ``markup`` under ``"markup"``, source code ->
    ``code`` under ``"code"``, anything else -> ``raw``. A gzip, bzip2, xz
    or zstd file gives the entry of its decompressed content (same path,
    ``view.decoded`` says how). A zip or tar archive (also compressed) gives
    one entry per regular member, named ``path!/member``, recursively.
    ``"raw"`` gives one raw entry and opens nothing.

    Never raises for the file's content: an unreadable file, a corrupt or
    truncated archive or stream, a member beyond ``max_depth`` or
    ``max_members``, a decompression bomb (``max_ratio``) or a file that
    produces more than ``max_total_bytes`` is a :class:`ScanWarning` to
    ``on_warning`` naming the path (member path included) and the cause,
    and the scan goes on. A file whose compressed or archive layer fails
    before it gave any entry gives its raw entry instead.

    Zip entries whose data overlaps an earlier entry's (the same local
    header listed many times, or overlapping data: zip bombs) are read once:
    the others are left out, with one warning for the archive. All layers of
    one file together produce at most :func:`total_bound` bytes.

    ``"unpack"`` (for ``sif dupes --archives``) gives each archive member as
    its stored bytes: a compressed member is not decompressed (only the
    container's own compression is, as the tar inside a ``.tar.gz``); a
    member that is itself an archive also gives its own members, when it
    fits in ``max_entry_bytes``.

    ``record`` (from :func:`sif.walk.walk`) saves a ``stat``, and the file is
    opened only if it is still that file (device and inode; not through a
    symlink unless ``record.symlink``); without one, any regular file. A FIFO
    or a device is never read (a warning). ``stats``, if given, counts the
    bytes expanded and the members taken. Entries are
    produced lazily; a streamed entry must be read before the next is drawn.
    Cost: a plain raw file reads :data:`SAMPLE_SIZE` bytes; a normalised one
    reads the file (at most ``max_entry_bytes``) and runs its normaliser;
    archives and compressed files cost their decompression, bounded by
    :func:`total_bound`. Memory: O(``max_entry_bytes``) per nesting level.
    """
    options = options or ContentOptions()
    origin = os.fspath(path)
    from sif.fileio import open_regular_file

    try:
        handle, st = open_regular_file(
            origin,
            expect=None if record is None else (record.dev, record.ino),
            follow_symlinks=record is None or record.symlink,
        )
        f = cast(io.BufferedReader, handle)
    except OSError as exc:
        on_warning(ScanWarning(origin, exc.strerror or str(exc)))
        return
    with f:
        try:
            head = f.read(SAMPLE_SIZE)
            size = record.size if record is not None else st.st_size
        except OSError as exc:
            on_warning(ScanWarning(origin, exc.strerror or str(exc)))
            return
        budget = _Budget(options, size, stats if stats is not None else ContentStats())
        scan = _Scan(origin, options, on_warning, budget)
        if options.normalize == "raw":
            yield Entry(origin, origin, kind_of(head), View(RAW, kind_of(head)), size, file=origin)
            return
        given = 0
        try:
            for entry in _layer(scan, origin, origin, head, f, 0, (), size, on_disk=True):
                given += 1
                yield entry
        except _Stop as exc:  # the file's budget is spent
            scan.warn(origin, exc.cause)
        if given == 0:
            yield Entry(origin, origin, kind_of(head), View(RAW, kind_of(head)), size, file=origin)


def plain_kind(head: bytes, name: str, mode: str) -> str | None:
    """The kind of a file on disk whose content starts with ``head``, if :func:`entries`
    gives it as one raw entry of the whole file under normalisation ``mode``; else
    ``None`` (compressed, an archive, a view other than raw: ask :func:`entries`).

    The same decisions as :func:`entries` (``_layer`` and ``_leaf``), made from the
    sample alone, so that a batch of plain files skips the generator. Pure.
    """
    if mode == "raw":
        return kind_of(head)
    if mode == "code":
        return None  # source code may be tokenised: the lexer decides
    magic = sniff_magic(head)
    if magic in COMPRESSIONS or magic in ARCHIVES:
        return None
    if magic is not None:  # ELF, PostScript: a view of their own but under unpack
        return kind_of(head) if mode == "unpack" else None
    if mode == "markup" and sniff(head, name) in MARKUPS:
        return None
    return kind_of(head)


def _layer(
    scan: _Scan,
    display: str,
    name: str,
    head: bytes,
    rest: _Readable,
    depth: int,
    decoded: tuple[str, ...],
    size: int | None,
    on_disk: bool = False,
) -> Iterator[Entry]:
    """Entries of one piece of content: ``head`` then ``rest`` (positioned after it)."""
    kind = sniff(head, name)
    o = scan.options
    if kind in COMPRESSIONS or kind in ARCHIVES:
        if depth >= o.max_depth:
            scan.warn(display, f"{kind} nested deeper than max_depth={o.max_depth}: taken raw")
        else:
            opener = _decompress if kind in COMPRESSIONS else _expand
            try:
                yield from opener(scan, display, name, kind, head, rest, depth, decoded, on_disk)
            except _Stop as exc:
                if exc.whole_file:
                    raise
                scan.warn(display, exc.cause)
            except broken() as exc:
                scan.warn(display, f"{kind}: {_cause(exc)}")
            # A failed layer leaves its raw entry to the caller (on disk) or to nothing (a member).
            return
    if o.normalize == "unpack" and decoded:
        return  # decompressed, yet no archive: unpack gives members' stored bytes only
    yield from _leaf(scan, display, name, kind, head, rest, decoded, size, on_disk)


def _decompress(
    scan: _Scan,
    display: str,
    name: str,
    kind: str,
    head: bytes,
    rest: _Readable,
    depth: int,
    decoded: tuple[str, ...],
    on_disk: bool,
) -> Iterator[Entry]:
    source = _Counting(_Chain(head, rest))
    stream = _Metered(_decoder(kind, source), scan.budget, lambda: source.count, kind)
    inner = io.BufferedReader(stream, _CHUNK)
    sample = inner.read(SAMPLE_SIZE)
    yield from _layer(
        scan, display, _decoded_name(name), sample, inner, depth + 1, (*decoded, kind), None
    )


def _expand(
    scan: _Scan,
    display: str,
    name: str,
    kind: str,
    head: bytes,
    rest: _Readable,
    depth: int,
    decoded: tuple[str, ...],
    on_disk: bool,
) -> Iterator[Entry]:
    o = scan.options
    if kind == "zip":
        if on_disk and not decoded:
            archive: IO[bytes] = cast(IO[bytes], rest)  # the file itself: zipfile seeks in it
        else:  # zipfile needs to seek: a nested zip is held in memory
            data, more = _read_upto(_Chain(head, rest), o.max_entry_bytes)
            if more:
                raise _Stop(f"zip larger than max_entry_bytes={o.max_entry_bytes} inside a file")
            archive = io.BytesIO(data)
        members = _zip_members(scan, display, archive)
    else:
        if on_disk and not decoded:
            cast(IO[bytes], rest).seek(0)
            # Seekable: members not read are skipped by seeking, not read.
            import tarfile

            tar = tarfile.open(fileobj=cast(IO[bytes], rest), mode="r:")  # noqa: SIM115 (closed by _tar_members)
        else:
            chained = cast(IO[bytes], _Chain(head, rest))
            import tarfile

            tar = tarfile.open(fileobj=chained, mode="r|")  # noqa: SIM115 (closed by _tar_members)
        members = _tar_members(scan, display, tar)
    for member_name, stream, size in members:
        scan.budget.members_left -= 1
        if scan.budget.members_left < 0:
            raise _Stop(f"more than max_members={o.max_members} archive members: the rest skipped")
        scan.budget.stats.members += 1
        path = f"{display}!/{member_name}"
        try:
            sample = stream.read(SAMPLE_SIZE)
            if o.normalize == "unpack":
                yield from _stored(scan, path, member_name, sample, stream, depth + 1, size)
            else:
                yield from _layer(scan, path, member_name, sample, stream, depth + 1, (), size)
        except _Stop as exc:
            if exc.whole_file:
                raise
            scan.warn(path, exc.cause)


def _stored(
    scan: _Scan,
    display: str,
    name: str,
    head: bytes,
    rest: _Readable,
    depth: int,
    size: int | None,
) -> Iterator[Entry]:
    """``"unpack"``: an archive member as its stored bytes, never decompressed.

    A member that is itself an archive (a zip, a tar, a compressed tar) also
    gives its own members, when its bytes fit in ``max_entry_bytes``.
    """
    o = scan.options
    kind = sniff(head, name)
    text_kind = kind_of(head)
    view = View(RAW, text_kind)
    container = kind in ARCHIVES or (
        kind in COMPRESSIONS and bool(_COMPRESSED_TAR.search(name) or ".tar." in name.lower())
    )
    data, more = _read_upto(_Chain(head, rest), o.max_entry_bytes)
    if more:
        if container:
            scan.warn(
                display,
                f"{kind} member larger than max_entry_bytes={o.max_entry_bytes}: "
                "compared as bytes, its own members not read",
            )
        stream = io.BufferedReader(_Guarded(_Chain(data, rest), display, scan.on_warning), _CHUNK)
        yield Entry(display, scan.origin, text_kind, view, size, stream=stream)
        return
    yield Entry(display, scan.origin, text_kind, view, len(data), data=data)
    if kind not in ARCHIVES and kind not in COMPRESSIONS:
        return
    if not container and not _holds_archive(kind, data, name):
        return  # a compressed member that is no archive: its bytes were all there was
    if depth >= o.max_depth:
        if container:
            scan.warn(display, f"{kind} nested deeper than max_depth={o.max_depth}: not opened")
        return
    body = cast(_Readable, _Chain(cast(bytes, memoryview(data)[SAMPLE_SIZE:]), None))
    yield from _layer(scan, display, name, data[:SAMPLE_SIZE], body, depth, (), len(data))


def _leaf(
    scan: _Scan,
    display: str,
    name: str,
    kind: str,
    head: bytes,
    rest: _Readable,
    decoded: tuple[str, ...],
    size: int | None,
    on_disk: bool,
) -> Iterator[Entry]:
    """The one entry of content that is not a container."""
    o = scan.options
    # sniff() decided text or binary already for all but the magic-number kinds.
    if kind == TEXT or kind in MARKUPS:
        text_kind = TEXT
    elif kind == BINARY:
        text_kind = BINARY
    else:
        text_kind = kind_of(head)
    normaliser = _normaliser(kind, text_kind, name, head, o.normalize)
    if normaliser is None and on_disk and not decoded:
        yield Entry(display, scan.origin, text_kind, View(RAW, text_kind), size, file=scan.origin)
        return
    data, more = _read_upto(_Chain(head, rest), o.max_entry_bytes)
    if normaliser is not None and not more:
        view_name, source, func = normaliser
        try:
            out = func(data)
        except Exception as exc:  # a normaliser must never stop a scan: fall back to raw
            scan.warn(display, f"{view_name} view failed ({exc!r}): taken raw")
        else:
            if out is not None:
                view = View(view_name, source, decoded)
                yield Entry(display, scan.origin, text_kind, view, len(out), data=out)
                return
    elif normaliser is not None:
        scan.warn(
            display,
            f"larger than max_entry_bytes={o.max_entry_bytes}: not normalised ({normaliser[0]}), "
            "taken raw",
        )
    view = View(RAW, text_kind, decoded)
    if on_disk and not decoded:
        yield Entry(display, scan.origin, text_kind, view, size, file=scan.origin)
    elif not more:
        yield Entry(display, scan.origin, text_kind, view, len(data), data=data)
    else:
        stream = io.BufferedReader(_Guarded(_Chain(data, rest), display, scan.on_warning), _CHUNK)
        yield Entry(display, scan.origin, text_kind, view, size, stream=stream)


Normaliser = tuple[str, str, Callable[[bytes], bytes | None]]


def _normaliser(kind: str, text_kind: str, name: str, head: bytes, mode: str) -> Normaliser | None:
    """The view for content of type ``kind`` under ``mode``: (view name, source, function)."""
    if mode == "unpack":
        return None
    if kind == "postscript":
        from sif.normalizers import strip_postscript

        return POSTSCRIPT, "postscript", strip_postscript
    if kind == "elf":
        from sif.normalizers import elf_strings

        return ELF_STRINGS, "elf", elf_strings
    if mode == "markup" and kind in MARKUPS:
        from sif.normalizers import strip_markup_html, strip_tex, strip_troff

        func = {"troff": strip_troff, "tex": strip_tex}.get(kind, strip_markup_html)
        return MARKUP, kind, func
    if mode == "code" and text_kind == TEXT:
        from sif.normalizers import _code_tokens, _lexer_for

        lexer = _lexer_for(name, head.decode("utf-8", "surrogateescape"))
        if lexer is not None:
            alias = lexer.aliases[0] if lexer.aliases else lexer.name.lower()
            return (
                CODE,
                alias,
                lambda data: _code_tokens(lexer, data.decode("utf-8", "surrogateescape")),
            )
    return None
