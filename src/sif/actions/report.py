"""A ``sif dupes --format json`` report, read back for the actions.

The report's first line is a header::

    {"report": "sif dupes", "format": 1, "sif_version": "0.1.0", "args": [...],
     "roots": ["/abs/root", ...], "cwd": "/where/it/ran", "time": "2026-...Z",
     "host": "name", "machine_id": "..."}

then one group a line, whose ``files`` list gives, for every file (inode),
its names, device, inode, size, mtime and ctime in nanoseconds (and the
archive holding it, for an archive member). A report without that header,
of another format, or made on another machine is refused with
:class:`sif.errors.InputError`; nothing is done.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _jstr
from typing import IO, Any, BinaryIO

from sif import __version__
from sif.errors import InputError
from sif.exact import Group, Replica

REPORT_KIND = "sif dupes"
REPORT_FORMAT = 1
"""Bumped whenever a field the actions read changes meaning."""


def hostname() -> str:
    """This machine's name: ``hostname()`` (the kernel's ``uname`` node name),
    without importing :mod:`socket`."""
    return os.uname().nodename


def machine_id() -> str:
    """``/etc/machine-id`` (systemd, D-Bus), or ``""`` where there is none."""
    for name in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(name, encoding="ascii") as f:
                return f.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
    return ""


def dupes_header(roots: Iterable[str], args: Iterable[str]) -> dict[str, Any]:
    """The header line of a report made now, here, from ``roots`` with ``args``."""
    return {
        "report": REPORT_KIND,
        "format": REPORT_FORMAT,
        "sif_version": __version__,
        "args": list(args),
        "roots": [os.path.abspath(r) for r in roots],
        "cwd": os.getcwd(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": hostname(),
        "machine_id": machine_id(),
    }


def replica_record(r: Replica, size: int) -> dict[str, Any]:
    """The ``files`` entry of one replica."""
    return {
        "names": list(r.paths),
        "dev": r.dev,
        "ino": r.ino,
        "size": size,
        "mtime_ns": r.mtime_ns,
        "ctime_ns": r.ctime_ns,
        "archive": r.archive,
        "symlinks": list(r.symlinks),
    }


def _strs(items: Iterable[str]) -> str:
    return "[" + ",".join(map(_jstr, items)) + "]"


def group_line(g: Group) -> bytes:
    """One group of the json report: ``json_line`` of the group's record, written by hand
    (json.dumps of thousands of groups was a third of ``sif dupes``). A replica with one
    name, no symlink and no archive (the usual case) costs one f-string."""
    size, reps = g.size, g.replicas
    paths, hardlinks, symlinks, files = [], [], [], []
    for r in reps:
        names = r.paths
        if len(names) == 1 and r.archive is None and not r.symlinks:
            name = _jstr(names[0])
            paths.append(name)
            hardlinks.append("[]")
            symlinks.append("[]")
            files.append(
                f'{{"names":[{name}],"dev":{r.dev},"ino":{r.ino},"size":{size},'
                f'"mtime_ns":{r.mtime_ns},"ctime_ns":{r.ctime_ns},"archive":null,"symlinks":[]}}'
            )
            continue
        paths.append(_jstr(r.path))
        hardlinks.append(_strs(r.hardlinks))
        symlinks.append(_strs(r.symlinks))
        files.append(
            f'{{"names":{_strs(names)},"dev":{r.dev},"ino":{r.ino},"size":{size},'
            f'"mtime_ns":{r.mtime_ns},"ctime_ns":{r.ctime_ns},'
            f'"archive":{"null" if r.archive is None else _jstr(r.archive)},'
            f'"symlinks":{_strs(r.symlinks)}}}'
        )
    text = (
        f'{{"size":{size},"digest":{_jstr(g.digest)},"paths":[{",".join(paths)}],'
        f'"hardlinks":[{",".join(hardlinks)}],"symlinks":[{",".join(symlinks)}],'
        f'"files":[{",".join(files)}]}}\n'
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a name with undecodable bytes: json_line escapes them
        from sif.report import json_line

        return json_line(
            {
                "size": size,
                "digest": g.digest,
                "paths": list(g.paths),
                "hardlinks": [list(r.hardlinks) for r in reps],
                "symlinks": [list(r.symlinks) for r in reps],
                "files": [replica_record(r, size) for r in reps],
            }
        )


def write_report(groups: Iterable[Group], out: BinaryIO, header: dict[str, Any]) -> None:
    """``sif dupes --format json``: the header line, then one :func:`group_line` a group
    (the bytes :func:`sif.report.write_dupes` writes in json, faster)."""
    from sif.report import json_line

    out.write(json_line(header))
    out.writelines(map(group_line, groups))


@dataclass
class Report:
    """A report read back: its header and its groups (names made absolute)."""

    header: dict[str, Any]
    groups: list[Group] = field(default_factory=list)
    source: str = "-"

    @property
    def roots(self) -> list[str]:
        return list(self.header.get("roots", []))


def _int(doc: dict[str, Any], key: str, where: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{where}: field {key!r} is missing or not an integer")
    return value


def _absolute(cwd: str, names: list[str]) -> tuple[str, ...]:
    return tuple(n if n[:1] == "/" else os.path.join(cwd, n) for n in names)


def _group(doc: Any, cwd: str, where: str) -> Group:
    """The group of one report line; :class:`InputError` naming what is wrong with it."""
    group = _group_fast(doc, cwd)
    return group if group is not None else _group_checked(doc, cwd, where)


def _group_fast(doc: Any, cwd: str) -> Group | None:
    """:func:`_group_checked` for a well-formed line (the checks in bulk); None for any
    doubt, which the checked reading then names."""
    if type(doc) is not dict:
        return None
    files, size, digest = doc.get("files"), doc.get("size"), doc.get("digest")
    if type(files) is not list or len(files) < 2 or type(size) is not int:
        return None
    if type(digest) is not str or ":" not in digest:
        return None
    replicas = []
    for f in files:
        if type(f) is not dict:
            return None
        get = f.get
        names, archive, links = get("names"), get("archive"), get("symlinks", ())
        dev, ino, mtime, ctime = get("dev"), get("ino"), get("mtime_ns"), get("ctime_ns")
        if not (
            type(names) is list
            and names
            and (type(links) is list or links == ())
            and (archive is None or type(archive) is str)
            and type(get("size")) is int
            and f["size"] == size
            and type(dev) is int
            and type(ino) is int
            and type(mtime) is int
            and type(ctime) is int
        ):
            return None
        if len(names) == 1 and not links:  # the common case, without generators
            name = names[0]
            if type(name) is not str:
                return None
            if archive is None and name[:1] != "/":
                name = os.path.join(cwd, name)
            paths: tuple[str, ...] = (name,)
            symlinks: tuple[str, ...] = ()
        else:
            if not (all(type(n) is str for n in names) and all(type(n) is str for n in links)):
                return None
            if archive is None:
                paths, symlinks = _absolute(cwd, names), _absolute(cwd, links)
            else:
                paths, symlinks = tuple(names), tuple(links)
        replicas.append(
            Replica(paths, dev, ino, mtime, archive=archive, symlinks=symlinks, ctime_ns=ctime)
        )
    return Group(size, digest, tuple(replicas))


def _name_ok(name: Any) -> bool:
    """Whether ``name`` has bytes at all (``surrogateescape``: a lone surrogate other than
    those escapes has none). A NUL is left to the step, which skips that file alone."""
    if not isinstance(name, str):
        return False
    try:
        name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


#: A surrogate, written as a JSON escape or as raw bytes (``json.loads`` of bytes lets
#: those through): a chunk holding one is read line by line, where each name is checked
#: (:func:`_name_ok`).
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def _group_checked(doc: Any, cwd: str, where: str) -> Group:
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise InputError(f"{where}: not a group of a sif dupes report (no 'files' list)")
    size = _int(doc, "size", where)
    digest = doc.get("digest")
    if not isinstance(digest, str) or ":" not in digest:
        raise InputError(f"{where}: field 'digest' is missing or malformed")
    replicas = []
    for f in doc["files"]:
        if not isinstance(f, dict):
            raise InputError(f"{where}: a file entry is not an object")
        names = f.get("names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise InputError(f"{where}: a file entry has no 'names'")
        if _int(f, "size", where) != size:
            raise InputError(f"{where}: {names[0]}: size differs from the group's")
        archive = f.get("archive")
        if archive is not None and not isinstance(archive, str):
            raise InputError(f"{where}: field 'archive' is not a string")
        links = f.get("symlinks", [])
        if not isinstance(links, list) or not all(isinstance(n, str) for n in links):
            raise InputError(f"{where}: field 'symlinks' is not a list of names")
        bad = next((n for n in [*names, *links] if not _name_ok(n)), None)
        if bad is not None:
            raise InputError(f"{where}: a name no file can have ({bad!a})")
        if archive is None:
            names = [os.path.join(cwd, n) for n in names]
            links = [os.path.join(cwd, n) for n in links]
        replicas.append(
            Replica(
                tuple(names),
                _int(f, "dev", where),
                _int(f, "ino", where),
                _int(f, "mtime_ns", where),
                archive=archive,
                symlinks=tuple(links),
                ctime_ns=_int(f, "ctime_ns", where),
            )
        )
    if len(replicas) < 2:
        raise InputError(f"{where}: a group needs at least two files")
    return Group(size, digest, tuple(replicas))


def check_header(header: Any, source: str, *, any_machine: bool = False) -> dict[str, Any]:
    """The header if it is one of a report the actions can use; else :class:`InputError`."""
    if isinstance(header, dict) and set(header) == {"bytes", "files", "paths"}:
        raise InputError(
            f"{source}: a 'sif dupes --dirs' report (directories alike) cannot be acted on: "
            "the actions take the files' report, 'sif dupes --format json' without --dirs"
        )
    if not isinstance(header, dict) or header.get("report") != REPORT_KIND:
        raise InputError(
            f"{source}: not a sif dupes report: its first line must be the header that "
            "'sif dupes --format json' writes (a text, csv or older report cannot be acted on)"
        )
    if header.get("format") != REPORT_FORMAT:
        raise InputError(
            f"{source}: report format {header.get('format')!r} (sif "
            f"{header.get('sif_version', '?')}); this sif reads format {REPORT_FORMAT}: "
            "run sif dupes again"
        )
    for key in ("roots", "cwd", "host"):
        if key not in header:
            raise InputError(f"{source}: the report's header has no {key!r}")
    roots = header["roots"]
    if (
        not isinstance(header["cwd"], str)
        or not _name_ok(header["cwd"])
        or not isinstance(header["host"], str)
        or not isinstance(roots, list)
        or not all(isinstance(r, str) and _name_ok(r) for r in roots)
    ):
        raise InputError(f"{source}: the report's header is malformed (roots, cwd or host)")
    mine = machine_id()
    theirs = header.get("machine_id", "")
    other = (mine and theirs and mine != theirs) or header["host"] != hostname()
    if other and not any_machine:
        raise InputError(
            f"{source}: the report was made on another machine ({header['host']!r}, "
            f"{header.get('time', '?')}): its devices and inodes mean nothing here"
        )
    return header


def read_report(source: str | IO[bytes], *, any_machine: bool = False) -> Report:
    """Read a report from a path (``"-"``: stdin) or a binary stream.

    Raises :class:`InputError` naming the source (and line) for a report that
    is not one, is of another format or machine, or does not parse.
    """
    if isinstance(source, str):
        if source == "-":
            import sys

            return read_report(sys.stdin.buffer, any_machine=any_machine)
        try:
            with open(source, "rb") as f:
                report = read_report(f, any_machine=any_machine)
        except OSError as exc:
            raise InputError(f"{source}: cannot read the report: {exc.strerror}") from None
        report.source = source
        return report
    name = getattr(source, "name", "-")
    name = name if isinstance(name, str) else "-"
    lines = iter(source)
    try:
        first = next(lines)
    except StopIteration:
        raise InputError(f"{name}: empty report") from None
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    header = check_header(header, name, any_machine=any_machine)
    report = Report(header, [], name)
    cwd, n = header["cwd"], 2
    while chunk := list(itertools.islice(lines, CHUNK_LINES)):
        groups = _fast_chunk(chunk, cwd)
        if groups is not None:
            report.groups += groups
            n += len(chunk)
            continue
        for line in chunk:  # a doubt: line by line, naming the first bad line
            if line.strip():
                try:
                    doc = json.loads(line)
                except ValueError as exc:
                    raise InputError(f"{name}: line {n}: not JSON ({exc})") from None
                where = f"{name}: line {n}"
                checked = _SURROGATE.search(line) is not None  # its names, each (_name_ok)
                report.groups.append(
                    _group_checked(doc, cwd, where) if checked else _group(doc, cwd, where)
                )
            n += 1
    return report


CHUNK_LINES = 4096
"""Report lines decoded by one ``json.loads`` (of a JSON array of them)."""


def _fast_chunk(chunk: list[bytes], cwd: str) -> list[Group] | None:
    """The groups of ``chunk``'s lines, decoded in one ``json.loads``; None when any line is
    blank, does not parse or is not a well-formed group (then each line is read alone)."""
    if not all(line.strip() for line in chunk) or any(map(_SURROGATE.search, chunk)):
        return None
    try:
        docs = json.loads(b"[" + b",".join(chunk) + b"]")
    except ValueError:
        return None
    if len(docs) != len(chunk):  # a line with a comma at its top level
        return None
    groups = [_group_fast(doc, cwd) for doc in docs]
    return None if None in groups else groups  # type: ignore[return-value]
