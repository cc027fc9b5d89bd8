"""The index directory itself: its marker, the names sif owns in it, safe temporaries.

An index directory carries :data:`MARKER`, a small text file whose first
line is ``sif-index N`` (:data:`MARKER_FORMAT`). sif writes into a directory
only if it is new, empty, or marked; it deletes, in a marked directory, only
the names it writes (:data:`OWN_NAMES`, segment and manifest names), never
anything else. An index made before the marker existed is adopted (marked)
when it holds a catalog and nothing but sif's names.

Temporaries are made with :func:`tempfile.mkstemp` / :func:`tempfile.mkdtemp`
(unpredictable names, created exclusively, never through a symbolic link),
then given the permissions a plain ``open`` would have given them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import threading

from sif.errors import IndexCorrupt, IndexInUse, IndexUnusable

MARKER = "SIF-INDEX"
#: Version of the directory layout, the marker's first line: ``sif-index 1``.
MARKER_FORMAT = 1
MARKER_TEXT = (
    f"sif-index {MARKER_FORMAT}\n"
    "This directory is a sif index. sif writes and deletes only its own entries here:\n"
    "SIF-INDEX, lock, catalog.duckdb, catalog.duckdb.wal, CURRENT, pathkey, segments/,\n"
    "manifests/, anchors/ and tmp/.\n"
)
CATALOG = "catalog.duckdb"
LOCK = "lock"
#: The secret of the index's path keys (:mod:`sif.pathkeys`): :data:`PATHKEY_BYTES`
#: random bytes, made with the index (or by the migration to schema 9), never changed
#: but by ``--rebuild`` of an index whose one is damaged.
PATHKEY = "pathkey"
PATHKEY_BYTES = 32  # sif.pathkeys.SECRET_BYTES (not imported: readers never need numpy here)
#: Directories of the layout, and files (sif may replace either kind under ``--rebuild``).
LAYOUT_DIRS = ("segments", "manifests", "anchors", "tmp")
LAYOUT_FILES = (CATALOG, CATALOG + ".wal", "CURRENT", PATHKEY)
#: ... and ``catalog.duckdb.tmp/``, where DuckDB spills when no ``temp_directory`` is set.
OWN_NAMES = frozenset((MARKER, LOCK, *LAYOUT_DIRS, *LAYOUT_FILES, CATALOG + ".tmp"))
#: Temporaries: ``CURRENT.tmpPID`` (before mkstemp), ``CURRENT.tmpXXXXXXXX``, the marker's
#: and the path key's.
_OWN_TEMP = re.compile(r"(CURRENT|SIF-INDEX|pathkey)\.tmp[A-Za-z0-9_]*\Z")
SEGMENT_NAME = re.compile(r"seg-(\d+)(\.[A-Za-z0-9_.]*)?\Z")
MANIFEST_NAME = re.compile(r"gen-(\d+)\.[A-Za-z0-9_.]*\Z")
#: A rebuild is built in ``tmp/rebuild-XXXXXXXX`` and swapped in when complete.
STAGING_PREFIX = "rebuild-"
_MARKER_LINE = re.compile(rb"sif-index (\d+)\Z")


def is_own_name(name: str) -> bool:
    """Whether ``name``, at the top of an index directory, is one that sif writes."""
    return name in OWN_NAMES or _OWN_TEMP.match(name) is not None


def cannot_write(root: str, exc: OSError) -> IndexUnusable:
    """The one-line error for an ``OSError`` met writing the index at ``root``."""
    where = f" ({exc.filename})" if exc.filename and exc.filename != root else ""
    cause = exc.strerror or str(exc)
    if exc.errno is None and _nearly_full(root):  # numpy's short write: "N requested..."
        cause = os.strerror(errno.ENOSPC)
    return IndexUnusable(
        f"cannot write the index {root}: {cause}{where}; it keeps its last committed state"
    )


def _nearly_full(path: str) -> bool:
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a plain file"
    return "a special file"


def prepare(root: str) -> None:
    """Make ``root`` a directory sif may write into, or refuse; before the lock is taken.

    Creates it (and its parents) if missing. An existing directory must be
    marked, empty, or an unmarked index to adopt (see :func:`_adoptable`).
    Raises :class:`IndexUnusable` naming ``root`` otherwise, or when it cannot
    be created or read (permission denied), and :class:`IndexCorrupt` for a
    damaged marker.
    """
    try:
        st = os.stat(root)
    except FileNotFoundError:
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise IndexUnusable(
                f"cannot create the index directory {root}: {exc.strerror or exc}"
            ) from None
        return
    except OSError as exc:
        raise IndexUnusable(f"cannot open the index directory {root}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise IndexUnusable(f"not a sif index directory: {root} is {_kind(st.st_mode)}")
    try:
        names = os.listdir(root)
    except OSError as exc:
        raise IndexUnusable(f"cannot read the index directory {root}: {exc.strerror}") from None
    if MARKER in names:
        check_marker(root)
    elif names and not _adoptable(root, names):
        raise IndexUnusable(
            f"not a sif index directory: {root} is not empty and has no {MARKER} marker; "
            "give --index a new or empty directory"
        )


def _adoptable(root: str, names: list[str]) -> bool:
    """An index made before the marker (a catalog file and nothing but sif's names),
    or one whose creation was interrupted before the marker was written: nothing but
    the lock file and the marker's temporary (``sif index`` stopped by Ctrl-C there)."""
    if all(n == "lock" or n.startswith(MARKER + ".tmp") for n in names):
        return True
    try:
        st = os.lstat(os.path.join(root, CATALOG))
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and all(is_own_name(n) for n in names)


def check_marker(root: str) -> bool:
    """Whether ``root`` is marked; raises :class:`IndexCorrupt` for a damaged marker."""
    path = os.path.join(root, MARKER)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise IndexCorrupt(
            f"index corrupt: {path} ({exc.strerror}, not sif's marker file); "
            "remove it by hand if this is a sif index"
        ) from None
    try:
        st = os.fstat(fd)
        first = os.read(fd, 256).split(b"\n", 1)[0] if stat.S_ISREG(st.st_mode) else b""
    finally:
        os.close(fd)
    m = _MARKER_LINE.match(first)
    if m is None:
        raise IndexCorrupt(
            f"index corrupt: {path} (not a sif index marker); "
            "remove it by hand if this is a sif index"
        )
    if int(m.group(1)) > MARKER_FORMAT:
        raise IndexUnusable(
            f"{root}: index layout {int(m.group(1))} is newer than this sif's "
            f"({MARKER_FORMAT}); upgrade sif"
        )
    return True


def mark(root: str) -> None:
    """Write the marker into ``root`` unless it is there (under the writer's lock)."""
    if check_marker(root):
        return
    _write_whole(root, MARKER, MARKER_TEXT.encode("ascii"), 0o666)


def _write_whole(root: str, name: str, data: bytes, mode: int) -> None:
    """``root/name`` holds ``data``, whole or not at all: written and synced under a
    temporary name (``name.tmp…``, with ``mode`` less the umask), renamed, the directory
    synced; the temporary is removed if anything fails."""
    fd, tmp = temp_file(root, name + ".tmp")
    try:
        os.fchmod(fd, mode & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(root, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(root)


def _read_pathkey(root: str) -> bytes | str:
    """The secret in ``root``'s :data:`PATHKEY`, or why there is none (a cause)."""
    path = os.path.join(root, PATHKEY)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        data = os.read(fd, PATHKEY_BYTES + 1)
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(fd)
    if len(data) != PATHKEY_BYTES:
        return f"{len(data)} bytes, not {PATHKEY_BYTES}"
    return data


def read_pathkey(root: str) -> bytes:
    """The secret of the index at ``root`` (:data:`PATHKEY`); :class:`IndexCorrupt` when
    it is missing or damaged (the catalog's keys were made with it: ``--rebuild``)."""
    got = _read_pathkey(root)
    if isinstance(got, str):
        raise _corrupt(os.path.join(root, PATHKEY), got)
    return got


def peek_pathkey(root: str) -> bytes | None:
    """The secret of the index at ``root`` as it is now, without the lock, or ``None``
    (a guess for the walk: the run's plan checks it against the store's)."""
    got = _read_pathkey(root)
    return None if isinstance(got, str) else got


def ensure_pathkey(root: str) -> bytes:
    """The secret of the index at ``root``, made (under the writer's lock) if it is
    missing or damaged: for a catalog that has no keys under it yet (a new one, a
    rebuild's, one migrated to schema 9). Written whole under a temporary name, then
    renamed, readable by its owner and group only."""
    got = _read_pathkey(root)
    if isinstance(got, bytes):
        return got
    secret = os.urandom(PATHKEY_BYTES)
    _write_whole(root, PATHKEY, secret, 0o660)
    return secret


def _corrupt(path: str, cause: str) -> IndexCorrupt:
    """:class:`IndexCorrupt` for a damaged file of the index (``--rebuild`` cures it)."""
    return IndexCorrupt(f"index corrupt: {path} ({cause}); run with --rebuild")


def check_layout(root: str, repair: bool) -> None:
    """Each entry of the layout is absent or of its kind (directory or regular file).

    One of the wrong kind is :class:`IndexCorrupt` ("run with --rebuild"),
    or, with ``repair`` (``--rebuild``, in a marked directory), replaced: a
    file or a symbolic link is unlinked (never what it points to), an empty
    directory removed; a non-empty directory where a file belongs, and a
    ``lock`` or marker of the wrong kind, are never removed (sif did not
    write them): :class:`IndexCorrupt` naming them.
    """
    for name in (*LAYOUT_DIRS, *LAYOUT_FILES):
        path = os.path.join(root, name)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        want_dir = name in LAYOUT_DIRS
        if (stat.S_ISDIR(mode) if want_dir else stat.S_ISREG(mode)) and not stat.S_ISLNK(mode):
            continue
        what = f"{_kind(mode)}, not a {'directory' if want_dir else 'regular file'}"
        if repair and not stat.S_ISDIR(mode):
            os.unlink(path)
            continue
        if repair:
            try:
                os.rmdir(path)
                continue
            except OSError:
                raise IndexCorrupt(
                    f"index corrupt: {path} ({what}, and not empty); "
                    "sif deletes only what it wrote: move it away by hand"
                ) from None
        raise IndexCorrupt(f"index corrupt: {path} ({what}); run with --rebuild")


#: How often :func:`lock` tries again while it waits with a ``cancel`` event.
LOCK_POLL = 0.05


class Cancelled(Exception):
    """The opening of the index was given up: its ``cancel`` event was set."""


def lock(root: str, wait: bool, shared: bool = False, cancel: threading.Event | None = None) -> int:
    """flock ``lock``: exclusive for the writer (which writes its pid), else shared.

    Never through a symbolic link, never anything but a regular file: a
    ``lock`` of another kind is :class:`IndexCorrupt`, and is left alone.
    A reader that may not create it (a read-only index) does without.

    ``wait`` blocks while another process holds it; with ``cancel`` (a thread that
    opens the index while its caller walks, :mod:`sif.index.opening`), it tries every
    :data:`LOCK_POLL` seconds instead and raises :class:`Cancelled` once ``cancel`` is
    set (a thread blocked in ``flock`` would hold on until the other writer let go).
    """
    path = os.path.join(root, LOCK)
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_CREAT
    try:
        try:
            fd = os.open(path, flags | (os.O_RDONLY if shared else os.O_RDWR), 0o644)
        except OSError as exc:
            if not shared or exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            fd = os.open(path, flags & ~os.O_CREAT | os.O_RDONLY)
    except FileNotFoundError:
        return -1  # a read-only directory that no writer ever locked
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise
        raise IndexCorrupt(
            f"index corrupt: {path} (not a regular file: {exc.strerror}); sif deletes "
            "only what it wrote: remove it by hand"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IndexCorrupt(
            f"index corrupt: {path} (not a regular file); sif deletes only what it "
            "wrote: remove it by hand"
        )
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        _flock(fd, mode, wait, cancel)
    except OSError as exc:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        if not pid:  # no writer wrote its pid: readers hold it (a writer empties it on exit)
            raise IndexInUse(
                f"index in use: {root} is being read by another sif; wait for it, or use --wait"
            ) from None
        raise IndexInUse(
            f"index in use (pid {pid}): {root} is being written; wait for it, or use --wait"
        ) from None
    if not shared:
        with contextlib.suppress(OSError):  # only informative (and may not fit a full disk)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _flock(fd: int, mode: int, wait: bool, cancel: threading.Event | None) -> None:
    """flock ``fd``: at once (else ``OSError``), blocking with ``wait``, or with ``wait``
    and ``cancel`` polled (:class:`Cancelled`; ``fd`` closed)."""
    if not wait or cancel is None:
        fcntl.flock(fd, mode | (0 if wait else fcntl.LOCK_NB))
        return
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if cancel.wait(LOCK_POLL):
            os.close(fd)
            raise Cancelled("the index was not opened: stopped while waiting for it")


def unlock(fd: int, exclusive: bool) -> None:
    """Release :func:`lock`'s ``fd`` (``-1``: nothing); a writer empties its pid first."""
    if fd >= 0:
        if exclusive:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        os.close(fd)  # releases the flock


def used_numbers(root: str) -> tuple[int, int]:
    """The highest segment and manifest numbers found under ``root`` (0 if none)."""
    out = []
    for sub, pattern in (("segments", SEGMENT_NAME), ("manifests", MANIFEST_NAME)):
        try:
            names = os.listdir(os.path.join(root, sub))
        except OSError:
            names = []
        nums = [int(m.group(1)) for m in map(pattern.match, names) if m is not None]
        out.append(max(nums, default=0))
    return out[0], out[1]


#: What a killed run leaves in ``tmp/``, by the start of its name: a rebuild's staging,
#: and ``sif similar``'s spilled pairs and small-pass table (sif.similar.spill,
#: sif.similar.smallpass), each made by sif in a directory of its own.
LEFTOVER_PREFIXES = (STAGING_PREFIX, "sif-pairs-", "sif-smallpass-")


def clear_staging(root: str) -> None:
    """Delete what killed runs left in ``tmp/`` (:data:`LEFTOVER_PREFIXES`; under the
    writer's lock: a live run holds it, so what is there is a dead run's)."""
    tmp = os.path.join(root, "tmp")
    try:
        names = os.listdir(tmp)
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        if name.startswith(LEFTOVER_PREFIXES):
            import shutil  # here: its import pulls in bz2 and lzma, which readers never need

            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def remove_entry(path: str) -> None:
    """Delete ``path``: a directory tree, or a file or link (never what a link points to)."""
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def temp_file(directory: str, prefix: str) -> tuple[int, str]:
    """A new file in ``directory`` with an unpredictable name: (descriptor, path)."""
    import tempfile  # only writers need it (sif query imports this module)

    fd, path = tempfile.mkstemp(prefix=prefix, dir=directory)
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, path


def temp_dir(directory: str, prefix: str, suffix: str = "") -> str:
    """A new directory in ``directory`` with an unpredictable name."""
    import tempfile

    path = tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=directory)
    os.chmod(path, 0o777 & ~_umask())
    return path


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
