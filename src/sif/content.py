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

The normalisers are pure functions over bytes; :func:`entries` is the only
function that opens files.
"""

from __future__ import annotations

import bz2
import gzip
import html
import importlib.util
import io
import lzma
import os
import re
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from sif.errors import ConfigError
from sif.events import ScanWarning, WarningSink, ignore_warning

if TYPE_CHECKING:
    from sif.walk import FileRecord

TEXT = "text"
BINARY = "binary"
KINDS = (TEXT, BINARY)

#: How much of a file's start decides its kind (git looks at 8000 bytes for a NUL).
SAMPLE_SIZE = 8192
#: Largest share of non-text bytes a text sample may hold (Perl's ``-T`` uses 30%).
MAX_NONTEXT_SHARE = 0.30

# Control bytes that text commonly holds: BS, TAB, LF, VT, FF, CR, ESC.
_NONTEXT = np.ones(256, dtype=bool)
_NONTEXT[32:127] = False
_NONTEXT[128:] = False  # UTF-8 and the Latin encodings are text
_NONTEXT[[8, 9, 10, 11, 12, 13, 27]] = False


def kind_of(sample: bytes | bytearray | memoryview) -> str:
    """``"text"`` or ``"binary"`` for a file whose content starts with ``sample``.

    Binary when the sample holds a NUL byte, or when more than
    :data:`MAX_NONTEXT_SHARE` of its bytes are control characters other
    than the usual whitespace (and ESC). An empty sample is text. Only the
    first :data:`SAMPLE_SIZE` bytes are looked at. Cost: O(len(sample)),
    vectorised.
    """
    arr = np.frombuffer(sample, dtype=np.uint8)[:SAMPLE_SIZE]
    if len(arr) == 0:
        return TEXT
    if not arr.all():  # a NUL byte
        return BINARY
    odd = int(np.count_nonzero(_NONTEXT[arr]))
    return BINARY if odd > MAX_NONTEXT_SHARE * len(arr) else TEXT


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

#: Content types that :func:`sniff` tells apart.
COMPRESSIONS = ("gzip", "bzip2", "xz", "zstd")
ARCHIVES = ("zip", "tar")
MARKUPS = ("troff", "tex", "html", "xml")


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

        Raises ``OSError`` if ``file`` cannot be opened. A stream entry can
        be opened once.
        """
        if self.data is not None:
            return io.BytesIO(self.data)
        if self.file is not None:
            return open(self.file, "rb")
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
    - ``max_total_bytes``: decompressed and extracted bytes produced from one
      file, at all depths; reaching it stops that file with a warning;
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
        if self.normalize == "code" and importlib.util.find_spec("pygments") is None:
            raise ConfigError("--normalize code needs Pygments: pip install pygments")


# --- sniffing ---------------------------------------------------------------------

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),  # an empty zip
    (b"\x7fELF", "elf"),
)
# bzip2: "BZh", a block size digit, then a block or end-of-stream magic (pi or sqrt(pi)).
_BZIP2 = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
# PostScript: "%!" first (after an optional UTF-8 BOM or the ^D some drivers put).
_POSTSCRIPT = re.compile(rb"(?:\xef\xbb\xbf|\x04)?%!")
_HTML = re.compile(rb"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]", re.I)
_XML = re.compile(rb"\s*(?:\xef\xbb\xbf)?<\?xml\s")
_TEX = re.compile(
    rb"\\(?:documentclass|documentstyle|begin\{document\}|input\s|chapter\{|section\*?\{|"
    rb"usepackage|bye\b|magnification)"
)
_TROFF_STRONG = re.compile(rb"\A(?:\s*\n)*(?:[.'][ \t]*\\\"|\.TH\s|\.Dd\s|\.de\s|\.so\s)")
_TROFF_REQUEST = re.compile(rb"^[.'][ \t]*[A-Za-z][A-Za-z0-9]{0,2}(?=[ \t]|$)", re.M)

_MAN_SECTIONS = tuple(f".{i}" for i in range(1, 10))
_EXT_HINTS = {
    "html": (".html", ".htm", ".xhtml", ".shtml"),
    "xml": (".xml", ".xsl", ".xslt", ".svg", ".rss", ".atom", ".xsd", ".docbook"),
    "tex": (".tex", ".ltx", ".sty", ".cls", ".dtx", ".latex"),
    "troff": (".ms", ".me", ".mm", ".mom", ".man", ".roff", ".tr", ".t", ".mdoc", *_MAN_SECTIONS),
}


def _ext(name: str) -> str:
    base = name.rsplit("/", 1)[-1].lower()
    return "." + base.rsplit(".", 1)[-1] if "." in base else ""


def sniff(sample: bytes, name: str = "") -> str:
    """The type of content that starts with ``sample`` (``name`` is a hint from its file name).

    Returns one of ``"gzip"``, ``"bzip2"``, ``"xz"``, ``"zstd"`` (magic
    numbers), ``"zip"`` (a local header at offset 0; jar, docx and odt are
    zips), ``"tar"`` (the POSIX or GNU ``ustar`` magic at offset 257; the
    sample must hold 263 bytes), ``"elf"``, ``"postscript"`` (``%!`` first),
    then for text: ``"html"``, ``"xml"``, ``"tex"``, ``"troff"`` (markers, or
    the name's extension and some markup), else ``"text"`` or ``"binary"``
    (:func:`kind_of`). Pure; cost O(len(sample)).
    """
    for magic, kind in _MAGIC:
        if sample.startswith(magic):
            return kind
    if _BZIP2.match(sample):
        return "bzip2"
    if sample[257:262] == b"ustar":
        return "tar"
    if _POSTSCRIPT.match(sample):
        return "postscript"
    if kind_of(sample) != TEXT:
        return BINARY
    ext = _ext(name)
    head = sample[:4096]
    if _XML.match(head):
        return "html" if _HTML.search(head) else "xml"
    if _HTML.search(head) or (ext in _EXT_HINTS["html"] and b"<" in head):
        return "html"
    if ext in _EXT_HINTS["xml"] and b"<" in head:
        return "xml"
    if _TEX.search(sample) or (ext in _EXT_HINTS["tex"] and b"\\" in head):
        return "tex"
    if _TROFF_STRONG.match(sample):
        return "troff"
    if not (sample[:1] in (b".", b"'") or b"\n." in sample or b"\n'" in sample):
        return TEXT  # no line starts a request: skip the regex (most text)
    requests = len(_TROFF_REQUEST.findall(sample))
    lines = sample.count(b"\n") + 1
    # A few request lines make troff when the name says so; otherwise a tenth of the lines.
    if requests >= 3 and (ext in _EXT_HINTS["troff"] or requests * 10 >= lines):
        return "troff"
    return TEXT


# --- normalisers: pure functions over bytes ---------------------------------------

_WS = re.compile(rb"\s+")


def _squeeze(data: bytes) -> bytes:
    """Whitespace runs to one space, ends trimmed: line breaks differ between sources."""
    return _WS.sub(b" ", data).strip()


_PS_HEADER = re.compile(rb"\A(?:[^\r\n]*(?:\r\n|\r|\n))*?%%EndComments[^\r\n]*(?:\r\n|\r|\n)?")
_PS_END_PROLOG = re.compile(rb"^%%EndProlog\b[^\r\n]*(?:\r\n|\r|\n)?", re.M)
# DSC sections that are set-up, not the document: resources (procsets, fonts,
# encodings), document and page set-up, printer features, EPS previews.
_PS_BLOCK = re.compile(
    rb"^%%Begin(Prolog|Setup|DocumentSetup|PageSetup|Resource|ProcSet|Font|Feature|"
    rb"Defaults|Preview|Encoding)\b.*?^%%End\1\b[^\r\n]*(?:\r\n|\r|\n)?",
    re.M | re.S,
)
_PS_COMMENT = re.compile(rb"^%[^\r\n]*(?:\r\n|\r|\n)?", re.M)


def strip_postscript(data: bytes) -> bytes:
    """PostScript without its prolog and set-up: what remains is the pages.

    Following Adobe's Document Structuring Conventions (DSC 3.0): everything
    up to the first ``%%EndProlog`` goes (the header comments, then the
    prolog's procsets); so do ``%%BeginSetup``..``%%EndSetup``,
    ``%%BeginResource``..``%%EndResource`` (fonts, procsets, encodings),
    ``%%BeginFont``/``ProcSet``/``Feature``/``PageSetup``/``Preview`` blocks
    and every comment line (``%%Page:``, ``%%Trailer``, ...). A file without
    ``%%EndProlog`` loses its header comments (up to ``%%EndComments``), its
    DSC blocks and comments. Two files made by the same program share these
    parts whatever they say (the paper's worst false positives, section 2),
    so they must not count. Pure; O(len(data)) regex passes.
    """
    end = _PS_END_PROLOG.search(data)
    data = data[end.end() :] if end is not None else _PS_HEADER.sub(b"", data, count=1)
    data = _PS_BLOCK.sub(b"", data)
    return _PS_COMMENT.sub(b"", data)


# troff: macro definitions (.de/.am/.ig up to ".."), then requests and escapes.
_TROFF_DEF = re.compile(
    rb"^[.'][ \t]*(?:de|de1|am|am1|ig)\b[^\n]*\n.*?^[.'][ \t]*\.[ \t]*(?:\n|\Z)", re.M | re.S
)
_TROFF_COMMENT = re.compile(rb'\\"[^\n]*|\\#[^\n]*\n')
# Macros whose arguments are text: fonts (man), headings and titles (man, ms, mdoc).
_TROFF_TEXT_MACROS = (
    b"B|I|BR|BI|IB|IR|RB|RI|SM|SB|SH|SS|TL|AU|AI|NH|UL|IP|TP"
    b"|Nm|Nd|Sh|Ss|Em|Sy|Ar|Fl|Cm|Pa|Op|Dq|Ql|Xr"
)
_TROFF_LINE = re.compile(
    rb"^[.'][ \t]*(?:(" + _TROFF_TEXT_MACROS + rb")(?:[ \t]+([^\n]*))?|[^\n]*)$", re.M
)
_TROFF_ESCAPE = re.compile(
    rb"\\(?:"
    rb"[fF](?:\[[^\]\n]*\]|\(..|.)"  # font
    rb"|s[+-]?(?:\[[^\]\n]*\]|\(\d\d|'[^'\n]*'|\d)"  # size
    rb"|[*nmgkz](?:[+-]?\[[^\]\n]*\]|[+-]?\(..|[+-]?.)"  # strings, registers, colours, marks
    rb"|[hvwlLoXbDRSxZNA]'[^'\n]*'"  # escapes with a quoted argument
    rb"|[&|^%c!0ptdurua)]"  # zero-width and motion escapes
    rb")"
)
_TROFF_SPECIAL = re.compile(rb"\\(?:\[[^\]\n]*\]|\(..)")
_TROFF_CHAR = re.compile(rb"\\(.)")


def _troff_line(m: re.Match[bytes]) -> bytes:
    args = m.group(2)
    return args.replace(b'"', b"") if m.group(1) and args else b""


def strip_troff(data: bytes) -> bytes:
    """The text of a troff (man, ms, me, mdoc) source: requests, macros and escapes removed.

    Macro definitions (``.de``..``..``) and ``.ig`` blocks go; request and
    macro lines go, except the arguments of the macros that carry text (font
    changes such as ``.B``/``.IR``, headings such as ``.SH``/``.NH``/``.TL``,
    tags of ``.IP``/``.TP``, the mdoc text macros); comments (``\\"``,
    ``\\#``) go; escapes for fonts, sizes, strings, registers and motions go;
    special characters (``\\(em``, ``\\[...]``) become a space; ``\\-`` and
    other escaped characters become the character. Whitespace runs become one
    space: one sentence per line and filled text give the same result.
    Pure; O(len(data)) regex passes.
    """
    data = _TROFF_DEF.sub(b"", data)
    data = _TROFF_COMMENT.sub(b"", data)
    data = _TROFF_LINE.sub(_troff_line, data)
    data = _TROFF_ESCAPE.sub(b"", data)
    data = _TROFF_SPECIAL.sub(b" ", data)
    data = _TROFF_CHAR.sub(rb"\1", data)
    return _squeeze(data)


_TEX_COMMENT = re.compile(rb"(?<!\\)%[^\n]*(?:\n[ \t]*)?")
_TEX_BEGIN = re.compile(rb"\\begin[ \t]*\{document\}")
_TEX_END = re.compile(rb"\\end[ \t]*\{document\}")
_BRACED = rb"\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}"  # up to three levels of nesting
_TEX_DEF = re.compile(rb"\\[egx]?def\s*\\(?:[A-Za-z@]+|.)[^{]*" + _BRACED)
# Commands whose arguments are not text: references, set-up, environments' names.
_TEX_NONTEXT = re.compile(
    rb"\\(?:label|ref|eqref|pageref|autoref|cref|Cref|cite[a-zA-Z]*|nocite|usepackage|"
    rb"RequirePackage|documentclass|documentstyle|input|include|includeonly|bibliography|"
    rb"bibliographystyle|includegraphics|begin|end|(?:re)?newcommand|providecommand|"
    rb"(?:re)?newenvironment|newtheorem|setlength|addtolength|setcounter|addtocounter|"
    rb"[vh]space|vskip|hskip|url|hypersetup|pagestyle|thispagestyle|numberwithin|"
    rb"DeclareMathOperator|let|newlength|newcounter|renewcommand|geometry|graphicspath)"
    rb"(?![A-Za-z@])\*?[ \t]*(?:\[[^\]]*\]|" + _BRACED + rb"|\\[A-Za-z@]+)*"
)
_TEX_COMMAND = re.compile(rb"\\[A-Za-z@]+\*?[ \t]*")
_TEX_ESCAPED = re.compile(rb"\\([%&$#_{}])")
_TEX_SYMBOL = re.compile(rb"\\\\(?:\[[^\]]*\])?|\\[^A-Za-z]")
_TEX_BRACES = re.compile(rb"[{}~]")


def strip_tex(data: bytes) -> bytes:
    """The text of a TeX or LaTeX source: preamble, commands and comments removed.

    The preamble (up to ``\\begin{document}``) and what follows
    ``\\end{document}`` go when present; comments go; definitions
    (``\\def``, ``\\newcommand``...) and commands whose arguments are not
    text (``\\label``, ``\\cite``, ``\\ref``, ``\\usepackage``,
    ``\\begin{env}``, ``\\includegraphics``...) go with their arguments; other
    control words go but their braced arguments stay (``\\emph{new}`` gives
    ``new``); ``\\%`` and the like become the character, braces and ``~``
    go, and whitespace runs become one space. Braces nested more than three
    deep in a removed argument may leave some of it. Pure; O(len(data))
    regex passes.
    """
    data = _TEX_COMMENT.sub(b"", data)
    begin = _TEX_BEGIN.search(data)
    if begin is not None:
        data = data[begin.end() :]
    end = _TEX_END.search(data)
    if end is not None:
        data = data[: end.start()]
    data = _TEX_DEF.sub(b" ", data)
    data = _TEX_NONTEXT.sub(b" ", data)
    data = _TEX_ESCAPED.sub(rb"\1", data)
    data = _TEX_COMMAND.sub(b" ", data)
    data = _TEX_SYMBOL.sub(b" ", data)
    data = _TEX_BRACES.sub(b" ", data)
    return _squeeze(data)


_HTML_DROP = re.compile(
    rb"<!--.*?-->|<(script|style|template|svg|math)\b[^>]*>.*?</\1\s*>|<\?.*?\?>|<!\[CDATA\[|\]\]>",
    re.I | re.S,
)
_HTML_TAG = re.compile(rb"<[A-Za-z/!][^>]*>")
_HTML_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?")
_UWS = re.compile(r"\s+")


def strip_markup_html(data: bytes) -> bytes:
    """The text of an HTML or XML document: tags, comments, scripts and entities resolved.

    Comments, ``<script>``/``<style>``/``<template>``/inline ``<svg>``/``<math>``
    elements (with their content), processing instructions and the
    ``<!DOCTYPE>`` go; every other tag becomes a space (its text stays;
    CDATA content stays); entities (``&amp;``, ``&rsquo;``, ``&#8217;``) become
    the characters they name, so ``&rsquo;`` and a literal ``’`` agree; all
    whitespace, including no-break spaces, becomes one space. Input that is
    not UTF-8 keeps its bytes (surrogate escapes). Pure; O(len(data)).
    """
    data = _HTML_DROP.sub(b" ", data)
    data = _HTML_TAG.sub(b" ", data)
    text = data.decode("utf-8", "surrogateescape")
    text = _HTML_ENTITY.sub(lambda m: html.unescape(m.group(0)), text)
    text = _UWS.sub(" ", text).strip()
    return text.encode("utf-8", "surrogateescape")


_STRINGS = re.compile(rb"[\x20-\x7e\t]{4,}")
_SHT_PROGBITS, _SHT_STRTAB = 1, 3
_SHF_ALLOC, _SHF_EXECINSTR = 2, 4


def _elf_sections(data: bytes) -> list[tuple[int, int]] | None:
    """(offset, size) of the sections holding a program's invariants; None if unreadable."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    try:
        if is64:
            shoff, shentsize, shnum, shstrndx = (
                struct.unpack_from(end + "Q", data, 0x28)[0],
                *struct.unpack_from(end + "HHH", data, 0x3A),
            )
            fmt, size_of = end + "IIQQQQ", 64
        else:
            shoff, shentsize, shnum, shstrndx = (
                struct.unpack_from(end + "I", data, 0x20)[0],
                *struct.unpack_from(end + "HHH", data, 0x2E),
            )
            fmt, size_of = end + "IIIIII", 40
        if shoff == 0 or shnum == 0 or shentsize < size_of:
            return None
        out = []
        for i in range(min(shnum, 4096)):
            _name, sh_type, flags, _addr, offset, size = struct.unpack_from(
                fmt, data, shoff + i * shentsize
            )
            alloc_data = (
                sh_type == _SHT_PROGBITS and flags & _SHF_ALLOC and not flags & _SHF_EXECINSTR
            )
            if (alloc_data or (sh_type == _SHT_STRTAB and i != shstrndx)) and size:
                out.append((offset, min(size, max(0, len(data) - offset))))
        return out
    except struct.error:
        return None


def elf_strings(data: bytes) -> bytes:
    """The printable strings of an ELF file, one a line, as ``strings`` prints them.

    A string is a run of at least 4 printable ASCII characters (or tabs).
    They are taken from the sections that hold a program's invariants: the
    loaded data sections that are not code (``.rodata``, ``.data``: messages,
    tables, names) and the string tables but the section names' one
    (``.dynstr``, ``.strtab``: imported and defined symbol names). Code
    sections are left out: a one-line change moves every later address and
    the accidental "strings" in machine code change with them (the paper's
    section 6); so is ``.comment`` (the compiler's banner, the same in every
    program it made). When the section table is missing or unreadable
    (a stripped-to-the-bone or truncated file), the whole file is scanned.
    Pure; O(len(data)).
    """
    sections = _elf_sections(data)
    if sections is None:
        return b"\n".join(_STRINGS.findall(data))
    parts: list[bytes] = []
    for offset, size in sections:
        parts.extend(_STRINGS.findall(data, offset, offset + size))
    return b"\n".join(parts)


def _lexer_for(filename: str, text: str) -> Any:
    """A Pygments lexer for a source file: by its name, else by its content; None if not code.

    A content guess is kept only if the lexer rates the text at least 0.3
    (its ``analyse_text``), since plain prose gets some lexer's weak vote.
    """
    from pygments.lexers import get_lexer_for_filename, guess_lexer
    from pygments.lexers.special import TextLexer
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_for_filename(filename.rsplit("/", 1)[-1], code=text[:SAMPLE_SIZE])
    except ClassNotFound:
        try:
            lexer = guess_lexer(text[:SAMPLE_SIZE])
        except ClassNotFound:
            return None
        if type(lexer).analyse_text(text[:SAMPLE_SIZE]) < 0.3:
            return None
    return None if isinstance(lexer, TextLexer) else lexer


# Tokens a formatter adds or removes without changing the program: grouping
# parentheses (black, ast.unparse), line continuations, trailing commas.
_LAYOUT_TOKENS = frozenset(("(", ")", "\\"))
_CLOSERS = frozenset((")", "]", "}"))


def _code_tokens(lexer: Any, text: str) -> bytes:
    from pygments.token import Comment, Keyword, Literal, Name, Number, Operator, String

    out: list[str] = []
    for ttype, value in lexer.get_tokens(text):
        if ttype in Comment or ttype in String.Doc or not value.strip():
            continue
        if ttype in Name.Builtin or ttype in Keyword or ttype in Operator:
            token = value.strip()
        elif ttype in Name:
            token = "I"  # identifiers are parameters (Baker): any renaming matches
        elif ttype in String:
            token = "S"
            if out and out[-1] == "S":  # one literal is several tokens; "a" "b" is one too
                continue
        elif ttype in Number:
            token = "N"
        elif ttype in Literal:
            token = "L"
        else:  # punctuation, errors and anything unclassified stay as written
            token = value.strip()
        if token in _CLOSERS and out and out[-1] == ",":
            out.pop()
        if token in _LAYOUT_TOKENS:
            continue
        out.append(token)
    return " ".join(out).encode("utf-8", "surrogateescape")


def normalize_code(data: bytes, filename: str = "") -> bytes | None:
    """Source code as a compact token stream (Baker's parameterized matching, paper section 1).

    The Pygments lexer is chosen by ``filename``, else guessed from the
    content; ``None`` when neither gives a programming language. Identifiers
    become ``I`` and string, number and other literals ``S``, ``N``, ``L``;
    comments, docstrings and whitespace go, and so do what formatters add or
    drop: parentheses, line continuations, trailing commas; keywords,
    builtins (``len``, ``self``), operators and other punctuation stay.
    Tokens are joined by one space. A copy with renamed identifiers, changed
    literals and a new layout gives the same stream. Needs Pygments
    (``ImportError`` otherwise). Cost: Pygments' lexing, about 1-3 MB/s.
    """
    text = data.decode("utf-8", "surrogateescape")
    lexer = _lexer_for(filename, text)
    if lexer is None:
        return None
    return _code_tokens(lexer, text)


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


# What a corrupt or truncated archive or compressed stream raises.
_BROKEN: tuple[type[BaseException], ...] = (
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


_ENDINGS: tuple[type[BaseException], ...] = (_Stop, *_BROKEN)


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
        except _ENDINGS as exc:
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
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if kind == "bzip2":
        return bz2.BZ2File(raw, "rb")
    if kind == "xz":
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

    ``record`` (from :func:`sif.walk.walk`) saves a ``stat``; ``stats``, if
    given, counts the bytes expanded and the members taken. Entries are
    produced lazily; a streamed entry must be read before the next is drawn.
    Cost: a plain raw file reads :data:`SAMPLE_SIZE` bytes; a normalised one
    reads the file (at most ``max_entry_bytes``) and runs its normaliser;
    archives and compressed files cost their decompression, bounded by
    :func:`total_bound`. Memory: O(``max_entry_bytes``) per nesting level.
    """
    options = options or ContentOptions()
    origin = os.fspath(path)
    try:
        f = open(origin, "rb")  # noqa: SIM115 (closed below; an open error is told apart)
    except OSError as exc:
        on_warning(ScanWarning(origin, exc.strerror or str(exc)))
        return
    with f:
        try:
            head = f.read(SAMPLE_SIZE)
            size = record.size if record is not None else os.fstat(f.fileno()).st_size
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
            except _BROKEN as exc:
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
            tar = tarfile.open(fileobj=cast(IO[bytes], rest), mode="r:")  # noqa: SIM115 (closed by _tar_members)
        else:
            chained = cast(IO[bytes], _Chain(head, rest))
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
    if depth >= o.max_depth:
        if container:
            scan.warn(display, f"{kind} nested deeper than max_depth={o.max_depth}: not opened")
        return
    body = cast(_Readable, _Chain(cast(bytes, memoryview(data)[SAMPLE_SIZE:]), None))
    yield from _layer(scan, display, name, data[:SAMPLE_SIZE], body, depth, (), len(data))


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
            except _BROKEN as exc:
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
        return POSTSCRIPT, "postscript", strip_postscript
    if kind == "elf":
        return ELF_STRINGS, "elf", elf_strings
    if mode == "markup" and kind in MARKUPS:
        func = {"troff": strip_troff, "tex": strip_tex}.get(kind, strip_markup_html)
        return MARKUP, kind, func
    if mode == "code" and text_kind == TEXT:
        lexer = _lexer_for(name, head.decode("utf-8", "surrogateescape"))
        if lexer is not None:
            alias = lexer.aliases[0] if lexer.aliases else lexer.name.lower()
            return (
                CODE,
                alias,
                lambda data: _code_tokens(lexer, data.decode("utf-8", "surrogateescape")),
            )
    return None
