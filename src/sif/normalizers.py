"""The normalisers: the content views' functions over bytes (Manber, section 6).

:func:`strip_postscript`, :func:`strip_troff`, :func:`strip_tex`,
:func:`strip_markup_html`, :func:`elf_strings` and :func:`normalize_code` make
the views of :mod:`sif.content` from the types :func:`sif.filetypes.sniff`
tells apart. All are pure functions over bytes. Imported only when a view
needs one (:mod:`sif.content` re-exports them on first use).
"""

from __future__ import annotations

import re
import struct
from typing import Any

from sif.filetypes import SAMPLE_SIZE

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
    import html  # only the markup view needs it

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
