"""Archive members as replicas (``sif dupes --archives``).

The members of zip and tar archives (``a.zip!/dir/x.txt``) join the replica
groups of plain files. A member is its stored bytes: the archive's own
compression is undone (the tar inside ``a.tar.gz``), the member's never
(``a.zip!/x.txt.gz`` is a replica of a plain ``x.txt.gz``, not of ``x.txt``);
a member that is an archive is also opened, for its own members. A member
has no offset to read again cheaply, so it
is read once, streamed, for its size and BLAKE3 digest; it joins a group
when both equal those of the group's content (BLAKE3 is cryptographic:
equal digests mean equal content). Plain files keep their byte-exact
grouping; those whose size equals a member's are read once more, whole, for
their digest. A member can never be removed or linked: its
:class:`~sif.exact.Replica` names the archive that holds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from blake3 import blake3

from sif.content import ContentOptions, entries
from sif.events import ScanWarning, WarningSink
from sif.exact.pipeline import Group, Replica
from sif.walk import RecordColumns

ARCHIVE_SUFFIXES = (
    ".zip",
    ".jar",
    ".war",
    ".ear",
    ".whl",
    ".apk",
    ".tar",
    ".tgz",
    ".tbz",
    ".tbz2",
    ".txz",
    ".tzst",
    ".tar.gz",
    ".tar.bz2",
    ".tar.xz",
    ".tar.zst",
)
"""Files with these names are opened as archives; others are never sniffed (no extra reads)."""

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Member:
    """An archive member: its display path, the archive file, its size and BLAKE3."""

    path: str
    archive: str
    size: int
    digest: str


def archive_members(
    cols: RecordColumns, on_warning: WarningSink, min_size: int = 1
) -> list[Member]:
    """Every member of the archives among ``cols`` (each inode opened once).

    Members smaller than ``min_size`` are left out, like empty plain files.
    Corrupt archives, bombs and limits are warnings (see :mod:`sif.content`).
    Cost: each archive is read and decompressed once; memory is one chunk.
    """
    options = ContentOptions(normalize="unpack")
    seen: set[tuple[int, int]] = set()
    out: list[Member] = []
    for i in range(len(cols)):
        if not cols.names[i].lower().endswith(ARCHIVE_SUFFIXES):
            continue
        key = (cols.dev[i], cols.ino[i])
        if key in seen:
            continue
        seen.add(key)
        archive = cols.path(i)
        for entry in entries(archive, options=options, on_warning=on_warning):
            if "!/" not in entry.path:
                continue  # the archive itself, when it could not be opened
            h = blake3(max_threads=1)
            size = 0
            with entry.open() as f:
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
            if size >= min_size:
                out.append(Member(entry.path, archive, size, h.hexdigest()))
    return out


def _digest_file(
    path: str, size: int, on_warning: WarningSink, expect: tuple[int, int] | None = None
) -> str | None:
    """BLAKE3 of a plain file, or ``None`` (with a warning) if it changed or is unreadable.

    Opened only if it is still a regular file (and, given ``expect``, the
    walk's device and inode): a FIFO swapped in is a warning, never a hang.
    """
    from sif.fileio import open_regular_file

    h = blake3(max_threads=1)
    n = 0
    try:
        f, _ = open_regular_file(path, expect=expect, buffering=0)
        with f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                n += len(chunk)
    except OSError as exc:
        on_warning(ScanWarning(path, exc.strerror or str(exc)))
        return None
    if n != size:
        on_warning(ScanWarning(path, "changed while being read (size differs); skipped"))
        return None
    return h.hexdigest()


def merge_members(
    groups: Iterable[Group],
    members: list[Member],
    cols: RecordColumns,
    on_warning: WarningSink,
) -> list[Group]:
    """The plain ``groups`` with ``members`` joined by (size, BLAKE3), plus new groups.

    A member joins the plain group of equal content, or a plain file that
    had no replica, or other members; groups of one entry are dropped.
    Groups that gain members carry the BLAKE3 digest.
    """
    result = list(groups)
    if not members:
        return result
    sizes = {m.size for m in members}
    by_key: dict[tuple[int, str], list[Member]] = {}
    for m in members:
        by_key.setdefault((m.size, m.digest), []).append(m)
    grouped: set[str] = set()
    for k, g in enumerate(result):
        if g.size not in sizes:
            continue
        grouped.update(g.all_paths)
        first = g.replicas[0]
        digest = _digest_file(first.path, g.size, on_warning, (first.dev, first.ino))
        joined = by_key.pop((g.size, digest), None) if digest else None
        if joined:
            extra = tuple(_replica(m) for m in joined)
            result[k] = Group(g.size, "blake3:" + str(digest), g.replicas + extra)
    # Plain files of a member's size that had no plain replica (one per inode).
    names: dict[tuple[int, int], list[int]] = {}
    for i in range(len(cols)):
        if cols.size[i] in sizes and cols.path(i) not in grouped:
            names.setdefault((cols.dev[i], cols.ino[i]), []).append(i)
    for (dev, ino), idx in names.items():
        i = idx[0]
        size, path = cols.size[i], cols.path(i)
        digest = _digest_file(path, size, on_warning, (dev, ino))
        joined = by_key.pop((size, digest), None) if digest else None
        if joined:
            paths = tuple(sorted(cols.path(j) for j in idx))
            plain = Replica(paths, dev, ino, cols.mtime_ns[i], ctime_ns=cols.ctime_ns[i])
            result.append(
                Group(size, "blake3:" + str(digest), (plain, *(_replica(m) for m in joined)))
            )
    for (size, digest), joined in by_key.items():
        if len(joined) > 1:
            result.append(Group(size, "blake3:" + digest, tuple(_replica(m) for m in joined)))
    result.sort(key=lambda g: (-g.size, g.replicas[0].path))
    return result


def _replica(m: Member) -> Replica:
    return Replica((m.path,), 0, 0, 0, archive=m.archive)
