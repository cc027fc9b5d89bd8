"""The file-system walker: roots in, a stream of :class:`FileRecord` out.

Defaults (the same in every command):

- directories are walked recursively; a root may be a file or a directory;
- hidden files and directories (a name starting with ``.``) are included,
  as fdupes and jdupes do; ``hidden=False`` skips them;
- symbolic links are not followed, except a root given on the command line
  that is a link (``find -H``); ``follow_symlinks=True`` follows them all,
  and a directory reached twice (a loop, or two links to one place) is
  walked once;
- FIFOs, sockets and devices are never opened, only counted;
- empty files are left out unless ``empty=True``;
- every problem (permission denied, a file that vanished, a symlink loop, a
  name that is not valid UTF-8) is a :class:`ScanWarning` handed to
  ``on_warning``; the walk goes on.

Paths are ``str``; bytes that are not valid UTF-8 are carried as surrogate
escapes (:func:`os.fsdecode`), so :func:`os.fsencode` gives the exact name
back.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from stat import S_ISDIR, S_ISREG
from typing import Any, BinaryIO, NamedTuple

from sif.errors import ConfigError
from sif.events import NullProgress, Progress, ScanWarning, WarningSink, ignore_warning


class FileRecord(NamedTuple):
    """A regular file met by the walker, with what ``lstat`` (or ``stat``) said of it.

    A named tuple: immutable, and cheap to make and to pickle for 10^5 files.
    """

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    nlink: int = 1
    ctime_ns: int = 0
    """The inode's change time, which ``utime`` cannot set: part of a file's identity."""


@dataclass(frozen=True)
class WalkOptions:
    """Which files the walker yields. Sizes are in bytes, bounds inclusive.

    ``include`` and ``exclude`` are shell globs. A glob without ``/`` matches
    the file's name; a glob with ``/`` matches the whole path. ``exclude``
    also prunes directories; ``include`` applies to files only.
    """

    min_size: int = 0
    max_size: int | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    hidden: bool = True
    follow_symlinks: bool = False
    one_file_system: bool = False
    empty: bool = False

    def __post_init__(self) -> None:
        if self.min_size < 0:
            raise ConfigError(f"--min-size must be >= 0, got {self.min_size}")
        if self.max_size is not None and self.max_size < self.min_size:
            raise ConfigError(
                f"--max-size ({self.max_size}) is smaller than --min-size ({self.min_size})"
            )


@dataclass
class WalkStats:
    """What the walker met, for the summary."""

    files: int = 0
    bytes: int = 0
    directories: int = 0
    special: int = 0
    symlinks_skipped: int = 0
    filtered: int = 0
    warnings: int = 0


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"10"``, ``"4K"``, ``"1.5MiB"``, ``"2G"`` -> bytes (binary units).

    Raises :class:`ConfigError` for anything else.
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ConfigError(f"not a size: {text!r} (use e.g. 100, 4K, 10M, 1G)")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).upper()])


def read_path_list(stream: BinaryIO, nul: bool = False) -> Iterator[str]:
    """Paths from a list, one per line (or NUL-terminated with ``nul``), as raw names.

    Empty entries are skipped. Names keep their exact bytes (surrogate escapes).
    """
    data = stream.read()
    sep = b"\0" if nul else b"\n"
    for raw in data.split(sep):
        if not nul and raw.endswith(b"\r"):
            raw = raw[:-1]
        if raw:
            yield os.fsdecode(raw)


class _Matcher:
    """Compiled include/exclude globs."""

    def __init__(self, globs: tuple[str, ...]) -> None:
        names = [g for g in globs if "/" not in g]
        paths = [g for g in globs if "/" in g]
        self.name_re = re.compile("|".join(fnmatch.translate(g) for g in names)) if names else None
        self.path_re = re.compile("|".join(fnmatch.translate(g) for g in paths)) if paths else None
        self.empty = not globs

    def match(self, name: str, path: str) -> bool:
        if self.name_re is not None and self.name_re.match(name):
            return True
        return self.path_re is not None and self.path_re.match(path) is not None


def _cause(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "vanished during the scan"
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)


def _valid_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class Walker:
    """Walks roots and yields :class:`FileRecord` values; counts into :attr:`stats`.

    Cost: one ``readdir`` per directory and one ``lstat`` per file (``DirEntry``
    caches the type, so directories are told apart without a ``stat``) and one
    per directory (to detect loops and mount points). Memory: the stack of
    pending directories and the set of visited directory inodes.
    """

    options: WalkOptions = field(default_factory=WalkOptions)
    on_warning: WarningSink = ignore_warning
    stats: WalkStats = field(default_factory=WalkStats)

    def __post_init__(self) -> None:
        self._include = _Matcher(self.options.include)
        self._exclude = _Matcher(self.options.exclude)
        self._visited: set[tuple[int, int]] = set()
        lo = self.options.min_size
        if not self.options.empty:
            lo = max(lo, 1)
        self._min = lo
        self._max = self.options.max_size

    def _warn(self, path: str, cause: str, skipped: bool = True) -> None:
        self.stats.warnings += skipped
        self.on_warning(ScanWarning(path, cause, skipped))

    def _keep(self, name: str, path: str, st: os.stat_result) -> bool:
        size = st.st_size
        if size < self._min or (self._max is not None and size > self._max):
            self.stats.filtered += 1
            return False
        if not self._include.empty and not self._include.match(name, path):
            self.stats.filtered += 1
            return False
        return True

    def _record(self, path: str, st: os.stat_result) -> FileRecord:
        self.stats.files += 1
        self.stats.bytes += st.st_size
        return FileRecord(
            path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_nlink, st.st_ctime_ns
        )

    def walk(self, roots: Iterable[str | os.PathLike[str]]) -> Iterator[FileRecord]:
        """Yield every regular file under ``roots`` that passes the filters, once per file.

        Directory roots are walked first, in the order given; then file roots,
        each skipped if a directory already walked holds it.
        """
        seen_roots: set[str] = set()
        files: list[tuple[str, os.stat_result]] = []
        for root in roots:
            path = os.path.normpath(os.fspath(root))
            if path in seen_roots:
                continue
            seen_roots.add(path)
            st = self._stat_root(path)
            if st is None:
                continue
            if stat.S_ISDIR(st.st_mode):
                yield from self._walk_dir(path, st.st_dev, st)
            elif stat.S_ISREG(st.st_mode):
                files.append((path, st))
            else:
                self.stats.special += 1
        for path, st in files:
            if not self._under_visited(path) and self._keep(os.path.basename(path), path, st):
                yield self._record(path, st)

    def _stat_root(self, root: str) -> os.stat_result | None:
        if not _valid_utf8(root):
            self._warn(root, "name is not valid UTF-8 (shown escaped)", False)
        try:
            return os.stat(root)  # a root that is a symlink is followed (find -H)
        except OSError as exc:
            if exc.errno == errno.ENOENT and os.path.islink(root):
                self._warn(root, "broken symlink")
            else:
                self._warn(root, _cause(exc))
            return None

    def _under_visited(self, path: str) -> bool:
        """Whether a directory above ``path`` was walked already (compared by inode)."""
        if not self._visited:
            return False  # only file roots: nothing to check (a --from-file list, say)
        parent = os.path.dirname(os.path.abspath(path))
        while True:
            try:
                st = os.stat(parent)
            except OSError:
                return False
            if (st.st_dev, st.st_ino) in self._visited:
                return True
            up = os.path.dirname(parent)
            if up == parent:
                return False
            parent = up

    def _walk_dir(self, top: str, top_dev: int, top_st: os.stat_result) -> Iterator[FileRecord]:
        key = (top_st.st_dev, top_st.st_ino)
        if key in self._visited:
            return
        self._visited.add(key)
        yield from self._walk_units([(top, top_dev, frozenset({key}))])

    def _walk_units(self, units: list[_Unit]) -> Iterator[FileRecord]:
        """Depth-first walk below each unit (a directory already marked visited)."""
        stack = list(reversed(units))
        while stack:
            subdirs: list[_Unit] = []
            files = RecordColumns()
            self._scan(stack.pop(), files, subdirs)
            yield from files
            # Reversed so that the walk visits subdirectories in readdir order.
            stack.extend(reversed(subdirs))

    def _scan(self, unit: _Unit, files: RecordColumns, subdirs: list[_Unit]) -> None:
        """Read one directory: its files go to ``files``, its subdirectories to ``subdirs``.

        The hot loop of the walk, kept lean: one ``lstat`` per entry, no call per file.
        """
        dirpath, top_dev, ancestors = unit
        opts = self.options
        stats = self.stats
        skip_hidden = not opts.hidden
        exclude = None if self._exclude.empty else self._exclude
        include = None if self._include.empty else self._include
        follow = opts.follow_symlinks
        lo = self._min
        hi = self._max if self._max is not None else 1 << 63
        add_name, add_dir = files.names.append, files.dir_of.append
        add_dev, add_ino = files.dev.append, files.ino.append
        add_size, add_mtime = files.size.append, files.mtime_ns.append
        add_nlink, add_ctime = files.nlink.append, files.ctime_ns.append
        visited = self._visited
        n_files = n_bytes = n_filtered = n_links = n_special = 0
        dir_no = -1  # registered with the first file kept
        stats.directories += 1
        try:
            it = os.scandir(dirpath)
        except OSError as exc:
            self._warn(dirpath, _cause(exc))
            return
        try:
            with it:
                for entry in it:
                    name = entry.name
                    if skip_hidden and name[0] == ".":
                        continue
                    path = entry.path
                    if exclude is not None and exclude.match(name, path):
                        continue
                    if not name.isascii() and not _valid_utf8(name):
                        self._warn(path, "name is not valid UTF-8 (shown escaped)", False)
                    try:
                        if entry.is_symlink():
                            if not follow:
                                n_links += 1
                                continue
                            try:
                                st = entry.stat()
                            except FileNotFoundError:
                                self._warn(path, "broken symlink")
                                continue
                        else:
                            st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        self._warn(path, _cause(exc))
                        continue
                    mode = st.st_mode
                    if S_ISREG(mode):
                        size = st.st_size
                        if lo <= size <= hi and (include is None or include.match(name, path)):
                            n_files += 1
                            n_bytes += size
                            if dir_no < 0:
                                dir_no = files.add_dir(dirpath)
                            add_dir(dir_no)
                            add_name(name)
                            add_dev(st.st_dev)
                            add_ino(st.st_ino)
                            add_size(size)
                            add_mtime(st.st_mtime_ns)
                            add_nlink(st.st_nlink)
                            add_ctime(st.st_ctime_ns)
                        else:
                            n_filtered += 1
                    elif S_ISDIR(mode):
                        dkey = (st.st_dev, st.st_ino)
                        if dkey in ancestors:
                            self._warn(path, "symlink loop (leads back to a parent directory)")
                        elif dkey in visited:
                            pass  # reached before through another link
                        elif opts.one_file_system and st.st_dev != top_dev:
                            pass
                        else:
                            visited.add(dkey)
                            subdirs.append((path, top_dev, ancestors | {dkey}))
                    else:
                        n_special += 1
        except OSError as exc:  # readdir itself failed part-way
            self._warn(dirpath, _cause(exc))
        stats.files += n_files
        stats.bytes += n_bytes
        stats.filtered += n_filtered
        stats.symlinks_skipped += n_links
        stats.special += n_special

    def walk_into(
        self, cols: RecordColumns, units: list[_Unit], max_dirs: int | None = None
    ) -> list[_Unit]:
        """Walk ``units`` depth-first into ``cols``; stop after ``max_dirs`` directories.

        Returns the directories left to walk (none when ``max_dirs`` is ``None``).
        """
        stack = list(reversed(units))
        n = 0
        while stack and (max_dirs is None or n < max_dirs):
            subdirs: list[_Unit] = []
            self._scan(stack.pop(), cols, subdirs)
            # Reversed so that the walk visits subdirectories in readdir order.
            stack.extend(reversed(subdirs))
            n += 1
        return stack

    def split(
        self, roots: Iterable[str | os.PathLike[str]], min_units: int
    ) -> tuple[RecordColumns, list[_Unit]]:
        """Start a walk and cut the rest into at least ``min_units`` directories, if it can.

        Returns the files met so far (file roots included) and the directories
        still to walk; walking each of those with :meth:`walk_units`, in any
        process, completes the walk. Directories are expanded breadth-first, so
        the units are subtrees of similar depth.
        """
        files = RecordColumns()
        frontier: list[_Unit] = []
        file_roots: list[str] = []
        for root in roots:
            path = os.path.normpath(os.fspath(root))
            st = self._stat_root(path)
            if st is None:
                continue
            if stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key not in self._visited:
                    self._visited.add(key)
                    frontier.append((path, st.st_dev, frozenset({key})))
            elif stat.S_ISREG(st.st_mode):
                file_roots.append(path)
            else:
                self.stats.special += 1
        for _ in range(4):  # a few levels are enough to give every worker work
            if not frontier or len(frontier) >= min_units:
                break
            nxt: list[_Unit] = []
            for unit in frontier:
                self._scan(unit, files, nxt)
            frontier = nxt
        files.extend(self.walk(file_roots))
        return files, frontier


_Unit = tuple[str, int, frozenset[tuple[int, int]]]
"""A directory to walk: its path, the device of its root, and its ancestors' inodes."""


class RecordColumns:
    """Many :class:`FileRecord` values stored column by column.

    A path is stored as its directory (shared by all files of that directory)
    and its name: about 100 bytes a file instead of 350 for records, and
    cheap to send between processes (the names travel as one string, the
    numbers as arrays). :meth:`path` joins the two on demand.
    """

    __slots__ = ("ctime_ns", "dev", "dir_of", "dirs", "ino", "mtime_ns", "names", "nlink", "size")

    def __init__(self) -> None:
        self.dirs: list[str] = []  # each ends with a separator, or is "" for a bare name
        self.dir_of = array("I")
        self.names: list[str] = []
        self.dev = array("Q")
        self.ino = array("Q")
        self.size = array("q")
        self.mtime_ns = array("q")
        self.nlink = array("Q")
        self.ctime_ns = array("q")

    def __len__(self) -> int:
        return len(self.names)

    def path(self, i: int) -> str:
        return self.dirs[self.dir_of[i]] + self.names[i]

    @property
    def paths(self) -> list[str]:
        """Every path (a new list)."""
        dirs = self.dirs
        return [dirs[d] + n for d, n in zip(self.dir_of, self.names, strict=True)]

    def add_dir(self, dirpath: str) -> int:
        """Register a directory; files added with its number get ``dirpath/name`` paths."""
        self.dirs.append(dirpath if dirpath.endswith("/") else dirpath + "/")
        return len(self.dirs) - 1

    def __iter__(self) -> Iterator[FileRecord]:
        return map(
            FileRecord,
            self.paths,
            self.dev,
            self.ino,
            self.size,
            self.mtime_ns,
            self.nlink,
            self.ctime_ns,
        )

    def extend(self, records: Iterable[FileRecord]) -> None:
        for r in records:
            head, name = os.path.split(r.path)
            self.dir_of.append(self.add_dir(head) if head else self._bare())
            self.names.append(name)
            self.dev.append(r.dev)
            self.ino.append(r.ino)
            self.size.append(r.size)
            self.mtime_ns.append(r.mtime_ns)
            self.nlink.append(r.nlink)
            self.ctime_ns.append(r.ctime_ns)

    def _bare(self) -> int:
        self.dirs.append("")
        return len(self.dirs) - 1

    def record(self, i: int) -> FileRecord:
        return FileRecord(
            self.path(i),
            self.dev[i],
            self.ino[i],
            self.size[i],
            self.mtime_ns[i],
            self.nlink[i],
            self.ctime_ns[i],
        )

    def __getstate__(
        self,
    ) -> tuple[int, str, str, bytes, bytes, bytes, bytes, bytes, bytes, bytes]:
        return (
            len(self.dirs),  # "" joins both [] and [""]: the count tells them apart
            "\0".join(self.dirs),  # no file name holds a NUL
            "\0".join(self.names),
            self.dir_of.tobytes(),
            self.dev.tobytes(),
            self.ino.tobytes(),
            self.size.tobytes(),
            self.mtime_ns.tobytes(),
            self.nlink.tobytes(),
            self.ctime_ns.tobytes(),
        )

    def __setstate__(
        self, state: tuple[int, str, str, bytes, bytes, bytes, bytes, bytes, bytes, bytes]
    ) -> None:
        self.__init__()  # type: ignore[misc]
        ndirs, dirs, names, dir_of, dev, ino, size, mtime_ns, nlink, ctime_ns = state
        self.dirs = dirs.split("\0") if ndirs else []
        self.dir_of.frombytes(dir_of)
        self.names = names.split("\0") if len(self.dir_of) else []
        self.dev.frombytes(dev)
        self.ino.frombytes(ino)
        self.size.frombytes(size)
        self.mtime_ns.frombytes(mtime_ns)
        self.nlink.frombytes(nlink)
        self.ctime_ns.frombytes(ctime_ns)

    def digest(self) -> str:
        """A digest of every file's path, device, inode, size, mtime and ctime, as hex.

        Two walks that met the same files with the same stat fields give the
        same digest, whatever the order in which processes returned their
        directories (directories are put in path order; the files of one
        directory, which the walker keeps together, in readdir order, which is
        stable while the directory is unchanged). ``nlink`` is left out: a new
        hard link elsewhere changes no content. Cost: a sort of the directories,
        one stable argsort of the files (numpy), a hash of about 40 bytes a
        file plus its name (blake2b, ~5 ms for 40k files).
        """
        import hashlib

        import numpy as np

        h = hashlib.blake2b(digest_size=16)
        by_path = sorted(range(len(self.dirs)), key=self.dirs.__getitem__)
        rank = np.empty(len(self.dirs), dtype=np.int64)
        rank[by_path] = np.arange(len(self.dirs))
        dir_rank = rank[np.frombuffer(self.dir_of, dtype=np.uint32)] if len(self) else rank[:0]
        order = np.argsort(dir_rank, kind="stable")
        names = self.names
        h.update(b"%d\0" % len(self))
        h.update("\0".join([self.dirs[i] for i in by_path]).encode("utf-8", "surrogateescape"))
        h.update(b"\0\0")
        h.update("\0".join([names[i] for i in order.tolist()]).encode("utf-8", "surrogateescape"))
        h.update(dir_rank[order].tobytes())
        for col, dtype in ((self.dev, np.uint64), (self.ino, np.uint64)):
            h.update(np.frombuffer(col, dtype=dtype)[order].tobytes())
        for col in (self.size, self.mtime_ns, self.ctime_ns):
            h.update(np.frombuffer(col, dtype=np.int64)[order].tobytes())
        return h.hexdigest()

    def absorb(self, other: RecordColumns) -> None:
        """Append all of ``other``."""
        base = len(self.dirs)
        self.dirs.extend(other.dirs)
        self.dir_of.extend(array("I", [d + base for d in other.dir_of]))
        self.names.extend(other.names)
        self.dev.extend(other.dev)
        self.ino.extend(other.ino)
        self.size.extend(other.size)
        self.mtime_ns.extend(other.mtime_ns)
        self.nlink.extend(other.nlink)
        self.ctime_ns.extend(other.ctime_ns)


def _walk_some(
    options: WalkOptions, units: list[_Unit], max_dirs: int
) -> tuple[RecordColumns, list[_Unit], list[ScanWarning], WalkStats]:
    """Walk ``units`` depth-first for at most ``max_dirs`` directories; runs in a worker.

    Returns the files found and the directories left to walk, which go back
    to the queue: so a worker never sits on a huge subtree while another idles.
    """
    warnings: list[ScanWarning] = []
    walker = Walker(options, warnings.append)
    cols = RecordColumns()
    left = walker.walk_into(cols, units, max_dirs)
    return cols, left, warnings, walker.stats


BATCH_DIRS = 256
"""Directories one batch of a parallel walk reads before it hands the rest back."""


def parallel_walk(
    roots: Iterable[str | os.PathLike[str]],
    options: WalkOptions,
    on_warning: WarningSink = ignore_warning,
    pool: Any = None,
    jobs: int = 1,
    progress: Progress | None = None,
) -> tuple[RecordColumns, WalkStats]:
    """The walk of :func:`walk` as columns, shared by this process and a pool's workers.

    ``pool`` is a :class:`sif.executors.WorkerPool` of ``jobs - 1`` workers,
    or ``None`` to walk here alone. Work goes out as small batches of
    directories; what a batch leaves unwalked returns to the queue, so no
    process sits on a huge subtree while another idles. With
    ``follow_symlinks``, two processes could reach one directory through
    links, so that walk stays in this process.
    """
    walker = Walker(options, on_warning)
    advance = (progress or NullProgress()).advance
    if pool is None or options.follow_symlinks or jobs < 2:
        cols, units = walker.split(roots, 0)
        while units:
            before = len(cols)
            units = walker.walk_into(cols, units, BATCH_DIRS)
            advance(len(cols) - before)
        return cols, walker.stats
    cols, pending = walker.split(roots, 4 * jobs)
    total = walker.stats
    inflight: deque[Any] = deque()

    def take() -> list[_Unit]:
        nonlocal pending
        share = max(1, len(pending) // (2 * jobs))
        batch, pending = pending[:share], pending[share:]
        return batch

    def merge(result: tuple[RecordColumns, list[_Unit], list[ScanWarning], WalkStats]) -> None:
        part, left, warnings, stats = result
        pending.extend(left)
        cols.absorb(part)
        advance(len(part))
        for w in warnings:
            walker._warn(w.path, w.cause, w.skipped)
        total.files += stats.files
        total.bytes += stats.bytes
        total.directories += stats.directories
        total.special += stats.special
        total.symlinks_skipped += stats.symlinks_skipped
        total.filtered += stats.filtered

    while pending or inflight:
        while pending and len(inflight) < 2 * (jobs - 1):
            inflight.append(pool.submit(_walk_some, options, take(), BATCH_DIRS))
        while inflight and inflight[0].done():
            merge(inflight.popleft().result())
        if pending:
            batch = take()  # before naming `pending`: take() rebinds it
            before = len(cols)
            pending.extend(walker.walk_into(cols, batch, BATCH_DIRS))  # this process works too
            advance(len(cols) - before)
        elif inflight:
            merge(inflight.popleft().result())
    return cols, walker.stats


def walk(
    roots: Iterable[str | os.PathLike[str]],
    options: WalkOptions | None = None,
    on_warning: WarningSink = ignore_warning,
) -> Iterator[FileRecord]:
    """Yield every regular file under ``roots`` that passes ``options``."""
    return Walker(options or WalkOptions(), on_warning).walk(roots)
