"""File types: text or binary, and what a file's start says it is.

:func:`kind_of` is the paper's decision (section 4: "only two types, text files and
non-text files"); :func:`sniff` tells compressed files, archives, ELF, PostScript and
markup apart. Both are pure functions over bytes. The normalisers that make the
content views of those types are in :mod:`sif.normalizers` (imported only when a
view needs one: their regular expressions cost a cold ``sif query`` ~2 ms).
"""

from __future__ import annotations

import re

import numpy as np

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
_TEXT_BYTES = bytes(np.flatnonzero(~_NONTEXT).astype(np.uint8).tolist())


def kind_of(sample: bytes | bytearray | memoryview) -> str:
    """``"text"`` or ``"binary"`` for a file whose content starts with ``sample``.

    Binary when the sample holds a NUL byte, or when more than
    :data:`MAX_NONTEXT_SHARE` of its bytes are control characters other
    than the usual whitespace (and ESC). An empty sample is text. Only the
    first :data:`SAMPLE_SIZE` bytes are looked at. Cost: O(len(sample)),
    vectorised.
    """
    head = bytes(sample[:SAMPLE_SIZE])
    if not head:
        return TEXT
    if b"\0" in head:
        return BINARY
    # The non-text bytes are what is left once the text bytes are deleted (C speed,
    # no array: this runs once a file).
    odd = len(head.translate(None, _TEXT_BYTES))
    return BINARY if odd > MAX_NONTEXT_SHARE * len(head) else TEXT


#: Content types that :func:`sniff` tells apart.
COMPRESSIONS = ("gzip", "bzip2", "xz", "zstd")
ARCHIVES = ("zip", "tar")
MARKUPS = ("troff", "tex", "html", "xml")


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


def sniff_magic(sample: bytes) -> str | None:
    """The type that ``sample``'s magic number or marker says, or ``None``: the first
    steps of :func:`sniff` (compressions, archives, ELF, PostScript)."""
    for magic, kind in _MAGIC:
        if sample.startswith(magic):
            return kind
    if _BZIP2.match(sample):
        return "bzip2"
    if sample[257:262] == b"ustar":
        return "tar"
    if _POSTSCRIPT.match(sample):
        return "postscript"
    return None


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
    magic = sniff_magic(sample)
    if magic is not None:
        return magic
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
