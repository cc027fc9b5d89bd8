"""Render results: text, fdupes, json lines, csv; and NUL-separated raw names.

Renderers write to a binary stream, so that names that are not valid UTF-8
keep their exact bytes where a format allows it:

- ``text`` shows such a name (and any name with control characters) in the
  shell's ``$'...'`` quoting (:func:`sif.events.display_path`);
- ``fdupes`` writes names as raw bytes, one per line, as fdupes does;
- ``json`` writes valid UTF-8 JSON; an undecodable byte ``0xNN`` appears as
  the escape ``\\udcNN``, which Python's ``json.loads`` and ``os.fsencode``
  turn back into the original byte;
- ``csv`` writes raw bytes in quoted fields (RFC 4180);
- with ``nul=True`` (``-0``), names are raw bytes ending in NUL and groups
  end with an extra NUL, as ``jdupes -0`` does.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterable
from typing import Any, BinaryIO

from sif.events import display_path
from sif.exact import Group

DUPES_FORMATS = ("text", "fdupes", "json", "csv")

_LONE_SURROGATE = re.compile("[\udc80-\udcff]")


def json_line(obj: object) -> bytes:
    """One JSON document on one line, UTF-8, with undecodable name bytes as ``\\udcNN``."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8") + b"\n"


def human_size(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def write_dupes(groups: Iterable[Group], out: BinaryIO, fmt: str, nul: bool = False) -> None:
    """Write replica groups to ``out`` in format ``fmt`` (one of :data:`DUPES_FORMATS`)."""
    if nul:
        for g in groups:
            for p in g.all_paths:
                out.write(os.fsencode(p) + b"\0")
            out.write(b"\0")
        return
    if fmt == "text":
        _dupes_text(groups, out)
    elif fmt == "fdupes":
        for g in groups:  # as fdupes: each group, then a blank line (the last one too)
            for p in g.all_paths:
                out.write(os.fsencode(p) + b"\n")
            out.write(b"\n")
    elif fmt == "json":
        for g in groups:
            out.write(
                json_line(
                    {
                        "size": g.size,
                        "digest": g.digest,
                        "paths": list(g.paths),
                        "hardlinks": [list(r.hardlinks) for r in g.replicas],
                    }
                )
            )
    elif fmt == "csv":
        _dupes_csv(groups, out)
    else:
        raise ValueError(f"unknown format {fmt!r}")


def _dupes_text(groups: Iterable[Group], out: BinaryIO) -> None:
    first = True
    for g in groups:
        if not first:
            out.write(b"\n")
        first = False
        n = len(g.replicas)
        head = f"{n} files of {g.size:,} bytes ({human_size(g.size)}) each, {g.digest}\n"
        out.write(head.encode())
        for r in g.replicas:
            out.write(display_path(r.path).encode("utf-8") + b"\n")
            for link in r.hardlinks:
                out.write(b"  = " + display_path(link).encode("utf-8") + b"  (hardlink)\n")


def _dupes_csv(groups: Iterable[Group], out: BinaryIO) -> None:
    text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
    w = csv.writer(text)
    w.writerow(["group", "size", "digest", "path", "hardlink_of"])
    for i, g in enumerate(groups, 1):
        for r in g.replicas:
            w.writerow([i, g.size, g.digest, r.path, ""])
            for link in r.hardlinks:
                w.writerow([i, g.size, g.digest, link, r.path])
    text.flush()
    text.detach()


# --- sif query ----------------------------------------------------------------------

QUERY_FORMATS = ("text", "json", "csv")

_QUERY_FIELDS = [
    "query",
    "path",
    "size",
    "kind",
    "percent",
    "hits",
    "shared",
    "query_fingerprints",
    "containment_query_in_file",
    "containment_file_in_query",
    "exact",
]


def write_query(results: Iterable[Any], out: BinaryIO, fmt: str) -> None:
    """Write :class:`sif.query.QueryResult` values to ``out`` in ``fmt`` (:data:`QUERY_FORMATS`).

    ``text`` follows the paper's Figure 3: ``R`` and the query's size, then
    one line per match with the paper's percentage (it can exceed 100), the
    path and the size; exact copies end with ``(exact copy)``; a blank line
    between queries. ``json`` and ``csv`` give one record per match.
    """
    if fmt == "text":
        first = True
        for q in results:
            if not first:
                out.write(b"\n")
            first = False
            out.write(f"R100 {display_path(q.path)} {q.size}\n".encode())
            for m in q.matches:
                mark = "  (exact copy)" if m.exact else ""
                line = f"{m.percent:4.0f} {display_path(m.path)} {m.size}{mark}\n"
                out.write(line.encode())
            out.flush()
    elif fmt == "json":
        for q in results:
            for m in q.matches:
                out.write(json_line(_query_record(q, m)))
            out.flush()
    elif fmt == "csv":
        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        w = csv.DictWriter(text, fieldnames=_QUERY_FIELDS)
        w.writeheader()
        for q in results:
            for m in q.matches:
                w.writerow(_query_record(q, m))
        text.flush()
        text.detach()
    else:
        raise ValueError(f"unknown format {fmt!r}")


def _query_record(q: Any, m: Any) -> dict[str, Any]:
    return {
        "query": q.path,
        "path": m.path,
        "size": m.size,
        "kind": m.kind,
        "percent": round(m.percent, 2),
        "hits": m.hits,
        "shared": m.shared,
        "query_fingerprints": q.n_fp,
        "containment_query_in_file": round(m.query_in_file, 4),
        "containment_file_in_query": round(m.file_in_query, 4),
        "exact": m.exact,
    }
