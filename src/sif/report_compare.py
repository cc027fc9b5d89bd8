"""Render ``sif compare`` and the ``--dirs`` reports: text, json lines, csv.

As :mod:`sif.report`: binary streams, ``text`` quotes odd names as the
shell does (:func:`sif.events.display_path`), ``json`` keeps undecodable
bytes as ``\\udcNN``, csv writes raw bytes.

``sif compare``'s json gives one record a line: ``{"record": "file", "a",
"b", "status", "pass", "score", "a_in_b", "b_in_a", "exact", "direction",
"by_name", "size_a", "size_b"}`` for every file (shares in percent), then
``{"record": "directory", "side", "path", "files", "bytes", "present",
"share", "other"}`` for every directory of the roll-up, then one
``{"record": "summary", ...}`` with files and bytes by status. csv lists
the file records.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any, BinaryIO

from sif.compare.model import STATUSES, CompareResult, DirectoryShare, FileComparison
from sif.events import display_path
from sif.report import csv_row, human_size, json_line

COMPARE_FORMATS = ("text", "json", "csv")

_FILE_FIELDS = [
    "a",
    "b",
    "status",
    "pass",
    "score",
    "a_in_b",
    "b_in_a",
    "exact",
    "direction",
    "by_name",
    "size_a",
    "size_b",
]


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 2)


def file_record(f: FileComparison) -> dict[str, Any]:
    return {
        "a": f.a,
        "b": f.b,
        "status": f.status,
        "pass": f.pass_no,
        "score": None if f.score is None else round(f.score, 2),
        "a_in_b": _pct(f.a_in_b),
        "b_in_a": _pct(f.b_in_a),
        "exact": f.exact,
        "direction": f.direction,
        "by_name": f.by_name,
        "size_a": f.size_a,
        "size_b": f.size_b,
    }


def directory_record(d: DirectoryShare) -> dict[str, Any]:
    return {
        "side": d.side,
        "path": d.path,
        "files": d.files,
        "bytes": d.bytes,
        "present": round(d.present),
        "share": round(100.0 * d.share, 2),
        "other": d.other,
    }


def _score_text(f: FileComparison) -> str:
    if f.score is None:
        return ""
    mark = "" if f.exact else "~"
    s = f"  {mark}{f.score:.1f}%"
    if f.a_in_b is not None and f.b_in_a is not None:
        s += f" (a-in-b {100 * f.a_in_b:.1f}%, b-in-a {100 * f.b_in_a:.1f}%)"
    if f.direction:
        s += f" {f.direction}"
    return s


def _file_line(f: FileComparison) -> str:
    if f.a is not None and f.b is not None and f.a != f.b:
        names = f"{display_path(f.a)} -> {display_path(f.b)}"
    else:
        names = display_path(f.a if f.a is not None else f.b or "")
    scored = f.status in ("changed", "moved+changed")
    tag = f"[pass {f.pass_no}{', names chose' if f.by_name else ''}]"
    return f"{f.status:<14} {names}{_score_text(f) if scored else ''}  {tag}"


def write_compare(result: CompareResult, out: BinaryIO, fmt: str, all_files: bool = False) -> None:
    """``result`` on ``out`` as ``text`` (differences, then the directories and the
    summary; ``all_files`` lists ``same`` files too), ``json`` or ``csv``."""
    if fmt == "json":
        for f in result.files:
            out.write(json_line({"record": "file", **file_record(f)}))
        for d in result.directories:
            out.write(json_line({"record": "directory", **directory_record(d)}))
        out.write(
            json_line({"record": "summary", "a": result.a, "b": result.b, **result.summary()})
        )
    elif fmt == "csv":
        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        w = csv.DictWriter(text, fieldnames=_FILE_FIELDS)
        w.writeheader()
        for f in result.files:
            w.writerow(csv_row(file_record(f)))
        text.flush()
        text.detach()
    else:
        lines = [_file_line(f) for f in result.files if all_files or f.status != "same"]
        dirs = [d for d in result.directories if all_files or d.share < 1 or _moved_dir(d)]
        if dirs:
            lines += ["", "directories (share of bytes found on the other side):"]
            lines += [_dir_line(d) for d in dirs]
        lines += ["", "summary:"]
        for status, v in result.summary().items():
            if v["files"]:
                lines.append(f"  {status:<14} {v['files']:>8,} files  {human_size(v['bytes'])}")
        out.write(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    out.flush()


def _moved_dir(d: DirectoryShare) -> bool:
    return d.other is not None and d.other != d.path


def _dir_line(d: DirectoryShare) -> str:
    where = ""
    if d.other is not None:
        where = f"  mostly in {display_path(d.other)}{'/' if d.other != '.' else ''}"
    name = display_path(d.path) + ("/" if d.path != "." else "")
    return f"  {d.side.upper()}: {name}  {100 * d.share:.1f}% of {human_size(d.bytes)}{where}"


# --- sif similar --dirs, sif dupes --dirs ---------------------------------------------


def write_dir_pairs(pairs: Sequence[Any], out: BinaryIO, fmt: str) -> None:
    """Pairs of similar directories (:class:`sif.compare.dirs.DirectoryPair`)."""
    rows = [
        {
            "a": p.a,
            "b": p.b,
            "a_in_b": round(100.0 * p.a_in_b, 2),
            "b_in_a": round(100.0 * p.b_in_a, 2),
            "bytes_a": p.bytes_a,
            "bytes_b": p.bytes_b,
            "files_a": p.files_a,
            "files_b": p.files_b,
        }
        for p in pairs
    ]
    if fmt == "json":
        for r in rows:
            out.write(json_line(r))
    elif fmt == "csv":
        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        w = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else ["a", "b"])
        w.writeheader()
        for r in rows:
            w.writerow(csv_row(r))
        text.flush()
        text.detach()
    else:
        lines = []
        for p in pairs:
            lines.append(
                f"{100 * min(p.a_in_b, p.b_in_a):5.1f}% {display_path(p.a)}/ "
                f"({100 * p.a_in_b:.1f}% of {human_size(p.bytes_a)} in the other)\n"
                f"       {display_path(p.b)}/ ({100 * p.b_in_a:.1f}% of "
                f"{human_size(p.bytes_b)} in the other)"
            )
        out.write(("\n\n".join(lines) + ("\n" if lines else "")).encode("utf-8", "surrogateescape"))
    out.flush()


def write_dir_groups(groups: Sequence[Any], out: BinaryIO, fmt: str) -> None:
    """Groups of identical directories (:class:`sif.compare.dirs.DirectoryGroup`)."""
    if fmt == "json":
        for g in groups:
            out.write(json_line({"bytes": g.bytes, "files": g.files, "paths": list(g.paths)}))
    elif fmt == "csv":
        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        w = csv.writer(text)
        w.writerow(["group", "bytes", "files", "path"])
        for i, g in enumerate(groups, 1):
            for p in g.paths:
                w.writerow([i, g.bytes, g.files, p])
        text.flush()
        text.detach()
    else:
        blocks = [
            "\n".join(
                [f"{human_size(g.bytes)} in {g.files:,} files each:"]
                + [f"  {display_path(p)}/" for p in g.paths]
            )
            for g in groups
        ]
        out.write(
            ("\n\n".join(blocks) + ("\n" if blocks else "")).encode("utf-8", "surrogateescape")
        )
    out.flush()


__all__ = [
    "COMPARE_FORMATS",
    "STATUSES",
    "directory_record",
    "file_record",
    "write_compare",
    "write_dir_groups",
    "write_dir_pairs",
]
