"""Render results: text, fdupes, json lines, csv; and NUL-separated raw names.

Renderers write to a binary stream, so that names that are not valid UTF-8
keep their exact bytes where a format allows it:

- ``text`` shows such a name (and any name with control characters) in the
  shell's ``$'...'`` quoting (:func:`sif.events.display_path`);
- ``fdupes`` writes names as raw bytes, one per line, as fdupes does;
- ``json`` writes valid UTF-8 JSON; an undecodable byte ``0xNN`` appears as
  the escape ``\\udcNN``, which Python's ``json.loads`` and ``os.fsencode``
  turn back into the original byte;
- ``csv`` writes raw bytes in quoted fields (RFC 4180), booleans as ``true``/``false``;
- with ``nul=True`` (``-0``), names are raw bytes ending in NUL and groups
  end with an extra NUL, as ``jdupes -0`` does.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from sif.events import display_path

if TYPE_CHECKING:  # not imported at run time: sif query needs none of the replica pipeline
    from sif.exact import Group

DUPES_FORMATS = ("text", "fdupes", "json", "csv")

_LONE_SURROGATE = re.compile("[\udc80-\udcff]")


def json_line(obj: object) -> bytes:
    """One JSON document on one line, UTF-8, with undecodable name bytes as ``\\udcNN``."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8") + b"\n"


def csv_row(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` for a csv writer: booleans as ``true``/``false``, as in json (not ``True``)."""
    return {k: ("true" if v else "false") if isinstance(v, bool) else v for k, v in record.items()}


def human_size(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def write_dupes(
    groups: Iterable[Group],
    out: BinaryIO,
    fmt: str,
    nul: bool = False,
    header: dict[str, Any] | None = None,
) -> None:
    """Write replica groups to ``out`` in format ``fmt`` (one of :data:`DUPES_FORMATS`).

    In ``json``, ``header`` (:func:`sif.actions.report.dupes_header`) is the
    first line, and each group also lists its ``files`` (names, device, inode,
    size, mtime and ctime): the report that ``sif link``/``remove``/``dedupe`` read.
    """
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
        from sif.actions.report import replica_record

        if header is not None:
            out.write(json_line(header))
        for g in groups:
            out.write(
                json_line(
                    {
                        "size": g.size,
                        "digest": g.digest,
                        "paths": list(g.paths),
                        "hardlinks": [list(r.hardlinks) for r in g.replicas],
                        "symlinks": [list(r.symlinks) for r in g.replicas],
                        "files": [replica_record(r, g.size) for r in g.replicas],
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
            own = r.path not in r.symlinks  # with -L, a file may be met only through links
            out.write(display_path(r.path).encode("utf-8") + (b"\n" if own else b"  (symlink)\n"))
            for link in r.hardlinks:
                out.write(b"  = " + display_path(link).encode("utf-8") + b"  (hardlink)\n")
            for link in r.symlinks:  # a name of the file, but no copy and no hardlink
                if link != r.path:
                    out.write(b"  = " + display_path(link).encode("utf-8") + b"  (symlink)\n")


def _dupes_csv(groups: Iterable[Group], out: BinaryIO) -> None:
    import csv  # only the csv format needs it

    text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
    w = csv.writer(text)
    w.writerow(["group", "size", "digest", "path", "hardlink_of", "symlink_to"])
    for i, g in enumerate(groups, 1):
        for r in g.replicas:
            w.writerow([i, g.size, g.digest, r.path, "", ""])
            for link in r.hardlinks:
                w.writerow([i, g.size, g.digest, link, r.path, ""])
            for link in r.symlinks:
                if link != r.path:
                    w.writerow([i, g.size, g.digest, link, "", r.path])
    text.flush()
    text.detach()


# --- sif query ----------------------------------------------------------------------

QUERY_FORMATS = ("text", "json", "csv")

_QUERY_FIELDS = [
    "query",
    "path",
    "size",
    "content_size",
    "kind",
    "view",
    "score",
    "score_exact",
    "score_low",
    "score_high",
    "similarity",
    "percent",
    "hits",
    "shared",
    "query_fingerprints",
    "exact_query_in_file",
    "exact_file_in_query",
    "estimate_query_in_file",
    "estimate_file_in_query",
    "exact",
]


def write_query(results: Iterable[Any], out: BinaryIO, fmt: str) -> None:
    """Write :class:`sif.query.QueryResult` values to ``out`` in ``fmt`` (:data:`QUERY_FORMATS`).

    ``text`` follows the paper's Figure 3: ``R`` and the query's size, then
    one line per match with the score the threshold compared (``q.by``: the
    similarity by default), the path and the size; exact copies end with
    ``(exact copy)``; an estimate (``--fast``, or a file changed since it was
    indexed) shows ``~N`` and its 90% interval; a blank line between queries.
    A size is the file's on disk, followed by ``(content N)`` when what was
    compared differs (decompressed bytes, an ELF's strings). ``json`` and
    ``csv`` give one record per match, every share in percent: the score the
    threshold compared and whether it is exact, the similarity, the paper's
    percentage (``percent``: it can exceed 100), both containments exact and
    estimated, ``size`` (the file's, where known, else the content's) and
    ``content_size``.
    """
    if fmt == "text":
        first = True
        for q in results:
            if not first:
                out.write(b"\n")
            first = False
            size = _sizes(getattr(q, "file_size", None), q.size)
            out.write(f"R100 {display_path(q.path)} {size}\n".encode())
            by = getattr(q, "by", "similarity")
            for m in q.matches:
                mark = "  (exact copy)" if m.exact else ""
                score = m.score(by)
                size = _sizes(getattr(m, "file_size", None), m.size)
                if getattr(m, "score_low", None) is None:
                    line = f"{score:4.0f} {display_path(m.path)} {size}{mark}\n"
                else:
                    note = f"  (estimate, 90%: {m.score_low:.0f}-{m.score_high:.0f})"
                    line = f"~{score:3.0f} {display_path(m.path)} {size}{mark}{note}\n"
                out.write(line.encode())
            out.flush()
    elif fmt == "json":
        for q in results:
            for m in q.matches:
                out.write(json_line(_query_record(q, m)))
            out.flush()
    elif fmt == "csv":
        import csv

        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        w = csv.DictWriter(text, fieldnames=_QUERY_FIELDS)
        w.writeheader()
        for q in results:
            for m in q.matches:
                w.writerow(csv_row(_query_record(q, m)))
        text.flush()
        text.detach()
    else:
        raise ValueError(f"unknown format {fmt!r}")


def _sizes(file_size: int | None, view_size: int) -> str:
    """The file's size, then its content's (decompressed, or a view) where it differs."""
    if file_size is None or file_size == view_size:
        return f"{view_size}"
    return f"{file_size} (content {view_size})"


def _query_record(q: Any, m: Any) -> dict[str, Any]:
    """One match: every share in percent (the paper's percentage can exceed 100)."""

    def pct(x: float | None) -> float | None:
        return None if x is None else round(100.0 * x, 2)

    by = getattr(q, "by", "similarity")
    file_size = getattr(m, "file_size", None)
    return {
        "query": q.path,
        "path": m.path,
        "size": m.size if file_size is None else file_size,
        "content_size": m.size,
        "kind": m.kind,
        "view": m.view,
        "score": round(m.score(by), 2),
        "score_exact": by == "percent" or m.scored_exactly,
        "score_low": None if m.score_low is None else round(m.score_low, 2),
        "score_high": None if m.score_high is None else round(m.score_high, 2),
        "similarity": round(m.score("similarity"), 2),
        "percent": round(m.percent, 2),
        "hits": m.hits,
        "shared": m.shared,
        "query_fingerprints": q.n_fp,
        "exact_query_in_file": pct(m.exact_query_in_file),
        "exact_file_in_query": pct(m.exact_file_in_query),
        "estimate_query_in_file": pct(m.query_in_file),
        "estimate_file_in_query": pct(m.file_in_query),
        "exact": m.exact,
    }


# --- sif similar --------------------------------------------------------------------

SIMILAR_FORMATS = ("text", "json", "csv")

_SIMILAR_FIELDS = [
    "a",
    "b",
    "size_a",
    "size_b",
    "kind",
    "score",
    "score_exact",
    "score_low",
    "score_high",
    "exact_a_in_b",
    "exact_b_in_a",
    "estimate_a_in_b",
    "estimate_b_in_a",
    "estimate_jaccard",
    "shared",
    "fingerprints_a",
    "fingerprints_b",
    "percent_a_in_b",
    "percent_b_in_a",
    "identical",
]


SIMILAR_BY = ("score", "percent")


def _member_line(m: Any, by: str) -> str:
    """A member's line of Figure 3: its figure, path and size, and what the figure is."""
    mark = "  (exact copy)" if m.identical else ""
    if by == "percent":
        return f"{m.percent:4.0f} {display_path(m.file.path)} {m.file.size}{mark}\n"
    if m.exact or m.pair is None or m.pair.score_low is None:
        return f"{m.score:4.0f} {display_path(m.file.path)} {m.file.size}{mark}\n"
    p = m.pair
    note = f"  (estimate, 90%: {p.score_low:.0f}-{p.score_high:.0f})"
    return f"~{m.score:3.0f} {display_path(m.file.path)} {m.file.size}{mark}{note}\n"


def _write_group_table(groups: Any, out: BinaryIO, by: str) -> None:
    """The text report's groups straight from a :class:`sif.similar.table.GroupTable`: the lines of
    :func:`_member_line`, without a value object a member (2 M member lines
    of 100,000 files: about 4x faster)."""
    p = groups.pairs
    f = p.files
    paths, sizes, digests = f["path"], f["size"], f["digest"]

    def shown(i: int) -> str:
        return display_path(os.fsdecode(bytes(paths[i])))

    for k in range(len(groups)):
        ref, others, rows = groups.rows(k)
        lines = [f"\nR100 {shown(ref)} {int(sizes[ref])}\n"]
        for o, j in zip(others.tolist(), rows.tolist(), strict=True):
            size = int(sizes[o])
            mark = "  (exact copy)" if size == sizes[ref] and digests[o] == digests[ref] else ""
            if by == "percent":
                pct = p.pa[j] if p.a_in_b[j] >= p.b_in_a[j] else p.pb[j]
                lines.append(f"{pct:4.0f} {shown(o)} {size}{mark}\n")
            elif p.known[j]:
                lines.append(f"{p.score[j]:4.0f} {shown(o)} {size}{mark}\n")
            else:
                note = f"  (estimate, 90%: {p.low[j]:.0f}-{p.high[j]:.0f})"
                lines.append(f"~{p.score[j]:3.0f} {shown(o)} {size}{mark}{note}\n")
        out.write("".join(lines).encode("utf-8", "surrogateescape"))


def write_similar(result: Any, out: BinaryIO, fmt: str, by: str = "score") -> None:
    """Write a :class:`sif.similar.SimilarResult` to ``out`` in ``fmt`` (:data:`SIMILAR_FORMATS`).

    ``text`` follows the paper's Figure 3: a header with the minimum
    similarity, then per group an ``R`` line (``R100``, the reference's path
    and size) and one line per member: the score that ``-t`` was compared
    with (how much of the smaller file the larger holds, in percent: exact,
    or ``~N`` and its 90% interval for an estimate), path, size, and ``(exact
    copy)`` for identical content; a blank line between groups. ``by="percent"``
    shows the paper's percentage instead (multiplicity, taken from the smaller
    file towards the larger; it can exceed 100). With interesting sets, each
    set's lines give each member's least score with the others. ``json`` and
    ``csv`` give one record per pair, every share in percent (with sets,
    ``json`` gives one set per line).
    """
    from sif.similar.table import GroupTable

    opts = result.options
    if fmt == "text":
        if result.options.sets is None:
            shown = " (the paper's percentages shown)" if by == "percent" else ""
            out.write(
                b"The following groups of files are similar. "
                + f"Minimum similarity = {opts.threshold:g}%{shown}\n".encode()
            )
            if isinstance(result.groups, GroupTable):
                _write_group_table(result.groups, out, by)
            for g in () if isinstance(result.groups, GroupTable) else result.groups:
                r = g.reference
                out.write(f"\nR100 {display_path(r.path)} {r.size}\n".encode())
                for m in g.members:
                    out.write(_member_line(m, by).encode())
        else:
            what = "pairwise similar" if opts.sets == "cliques" else "connected by similarity"
            out.write(
                f"The following sets of files are {what}. "
                f"Minimum similarity = {opts.threshold:g}%\n".encode()
            )
            for s in result.sets:
                out.write(b"\n")
                for f, least in zip(s.files, s.least, strict=True):
                    out.write(f"{least:4.0f} {display_path(f.path)} {f.size}\n".encode())
    elif fmt == "json":
        if opts.sets is not None:
            for s in result.sets:
                record = {
                    "set": opts.sets,
                    "paths": [f.path for f in s.files],
                    "sizes": [f.size for f in s.files],
                    "least_score": [round(x, 2) for x in s.least],
                }
                out.write(json_line(record))
        else:
            for record in _similar_records(result.pairs):
                out.write(json_line(record))
    elif fmt == "csv":
        import csv

        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        w = csv.DictWriter(text, fieldnames=_SIMILAR_FIELDS)
        w.writeheader()
        for record in _similar_records(result.pairs):
            w.writerow(csv_row(record))
        text.flush()
        text.detach()
    else:
        raise ValueError(f"unknown format {fmt!r}")
    out.flush()


def _similar_records(pairs: Any) -> Iterator[dict[str, Any]]:
    """The record of each pair: from the columns of a :class:`sif.similar.table.PairTable`
    a batch at a time, else one :class:`SimilarPair` at a time (the same records)."""
    if hasattr(pairs, "records"):
        yield from pairs.records()
        return
    for p in pairs:
        yield _similar_record(p)


def _similar_record(p: Any) -> dict[str, Any]:
    """One pair: every share in percent (0..100; the paper's percentages can exceed it)."""

    def pct(x: float | None) -> float | None:
        return None if x is None else round(100.0 * x, 2)

    return {
        "a": p.a.path,
        "b": p.b.path,
        "size_a": p.a.size,
        "size_b": p.b.size,
        "kind": p.a.kind,
        "score": round(p.score, 2),
        "score_exact": p.exact,
        "score_low": None if p.score_low is None else round(p.score_low, 2),
        "score_high": None if p.score_high is None else round(p.score_high, 2),
        "exact_a_in_b": pct(p.exact_a_in_b),
        "exact_b_in_a": pct(p.exact_b_in_a),
        "estimate_a_in_b": pct(p.a_in_b),
        "estimate_b_in_a": pct(p.b_in_a),
        "estimate_jaccard": pct(p.jaccard),
        "shared": p.shared,
        "fingerprints_a": p.a.n_distinct,
        "fingerprints_b": p.b.n_distinct,
        "percent_a_in_b": round(p.percent_a_in_b, 2),
        "percent_b_in_a": round(p.percent_b_in_a, 2),
        "identical": p.identical,
    }
