"""One directory of the walk, read: its files into the walk's columns, the rest returned.

:class:`DirReader` holds a walk's filters and reads directories for
:mod:`sif.walk` (which decides which directories, under which names).
Where it can, it reads through :mod:`sif._dirc` (C: ``readdir`` and one
``fstatat`` a name without the GIL, columns handed back whole, about three
times the speed of the Python loop on a tree of small directories); the
Python reader, :meth:`DirReader.read_py`, serves the other cases (symbolic
links followed, ``--include`` or ``--exclude`` patterns, a file-system
encoding that is not UTF-8, the extension not built) and is the reference
the C reader is tested against: both give the same files, subdirectories,
warnings and counts, in the same order.
"""

from __future__ import annotations

import errno
import os
import sys
from array import array
from collections.abc import Callable
from stat import S_ISDIR, S_ISREG
from typing import Any, NamedTuple

from sif.events import ScanWarning
from sif.records import RecordColumns
from sif.walkoptions import WalkOptions, _Matcher

try:
    from sif import _dirc  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # not built (no compiler at install): the Python reader
    _dirc = None

__all__ = ["DirReader"]


def _cause(exc: OSError) -> str:
    return _errno_cause(exc.errno, exc.strerror or str(exc))


def _errno_cause(err: int | None, strerror: str) -> str:
    if err == errno.ENOENT:
        return "vanished during the scan"
    if err == errno.ELOOP:
        return "symlink loop"
    if err in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return strerror


def _valid_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
"""How a directory is opened to be read (as ``opendir`` does); ``O_DIRECTORY``
refuses anything else swapped in, before any open of it could block."""


def _not_built(*args: object) -> Any:
    raise RuntimeError("sif._dirc was not built")


_BAD_NAME = "name is not valid UTF-8 (shown escaped)"

_Counts = tuple[int, int, int, int]
"""Of one directory: bytes of its files kept, files filtered out, symlinks skipped,
special files."""


class _Dir(NamedTuple):
    """One directory as read, whatever path led to it and whichever process read it.

    A function of its path and the options only (neither the visited set nor
    the ancestors decide anything here), so that reads made by any process,
    in any order, are taken or left by the one pass that decides the walk
    (:meth:`Walker._resolve`), as the serial walk would.
    """

    path: str
    key: tuple[int, int]
    start: int
    """Its files are rows ``start:stop`` of the columns it was read into."""
    stop: int
    subdirs: list[str]
    """The names of its subdirectories (skipped ones left out), in readdir order."""
    keys: array[int]
    """Their device and inode, two numbers each."""
    warnings: list[ScanWarning]
    counts: _Counts


class DirReader:
    """Reads directories with one walk's filters: hidden names, sizes, patterns, links."""

    def __init__(self, options: WalkOptions) -> None:
        include, exclude = _Matcher(options.include), _Matcher(options.exclude)
        self.skip_hidden = not options.hidden
        self.include = None if include.empty else include
        self.exclude = None if exclude.empty else exclude
        self.skip = options.skip_dirs or None
        self.follow = options.follow_symlinks
        self.lo = options.min_size if options.empty else max(options.min_size, 1)
        self.hi = options.max_size if options.max_size is not None else (1 << 63) - 1
        fast = (
            _dirc is not None
            and not self.follow
            and self.include is None
            and self.exclude is None
            and sys.getfilesystemencoding() == "utf-8"
        )
        self.read = self.read_c if fast else self.read_py
        self._c_read: Callable[..., Any] = _dirc.read_dir if _dirc is not None else _not_built
        self.trust_type = True
        """False: the C reader lstats every entry, as where the file system gives no
        ``d_type`` (for the tests)."""

    def read_c(self, dirpath: str, key: tuple[int, int], files: RecordColumns) -> _Dir:
        """:meth:`read_py` through :mod:`sif._dirc`: the same outcome, for a walk that
        follows no links and has no patterns."""
        start = len(files)
        try:
            names, numbers, subdirs, keys_bytes, problems, counts = self._c_read(
                dirpath, self.skip_hidden, self.lo, self.hi, self.trust_type
            )
        except OSError as exc:
            warning = ScanWarning(dirpath, _cause(exc))
            return _Dir(dirpath, key, start, start, [], array("Q"), [warning], (0, 0, 0, 0))
        prefix = dirpath if dirpath.endswith("/") else dirpath + "/"  # as os.path.join
        warnings = []
        for kind, name, err in problems:
            if kind == 0:
                warnings.append(ScanWarning(prefix + name, _BAD_NAME, False))
            elif kind == 1:
                warnings.append(ScanWarning(prefix + name, _errno_cause(err, os.strerror(err))))
            else:  # readdir itself failed part-way
                warnings.append(ScanWarning(dirpath, _errno_cause(err, os.strerror(err))))
        n = len(names)
        if n:
            files.dir_of.extend(array("I", [files.add_dir(dirpath)]) * n)
            files.names.extend(names)
            step = 8 * n
            view = memoryview(numbers)
            files.dev.frombytes(view[:step])
            files.ino.frombytes(view[step : 2 * step])
            files.size.frombytes(view[2 * step : 3 * step])
            files.mtime_ns.frombytes(view[3 * step : 4 * step])
            files.nlink.frombytes(view[4 * step : 5 * step])
            files.ctime_ns.frombytes(view[5 * step :])
            files.symlink.frombytes(bytes(n))
        keys = array("Q")
        keys.frombytes(keys_bytes)
        if self.skip is not None and subdirs:
            skip = self.skip
            kept = [j for j in range(len(subdirs)) if (keys[2 * j], keys[2 * j + 1]) not in skip]
            if len(kept) < len(subdirs):
                subdirs = [subdirs[j] for j in kept]
                keys = array("Q", [k for j in kept for k in (keys[2 * j], keys[2 * j + 1])])
        return _Dir(dirpath, key, start, len(files), subdirs, keys, warnings, counts)

    def read_py(self, dirpath: str, key: tuple[int, int], files: RecordColumns) -> _Dir:
        """:meth:`read` in Python: every case (links followed, --include, --exclude), and
        the reference the C reader is tested against.

        Kept lean: one ``lstat`` per entry, no call per file.
        """
        skip_hidden = self.skip_hidden
        exclude, include = self.exclude, self.include
        skip = self.skip
        follow = self.follow
        lo, hi = self.lo, self.hi
        add_name, add_dir = files.names.append, files.dir_of.append
        add_dev, add_ino = files.dev.append, files.ino.append
        add_size, add_mtime = files.size.append, files.mtime_ns.append
        add_nlink, add_ctime = files.nlink.append, files.ctime_ns.append
        add_link = files.symlink.append
        subdirs: list[str] = []
        keys = array("Q")
        add_sub, add_key = subdirs.append, keys.append
        warnings: list[ScanWarning] = []
        start = len(files)
        n_bytes = n_filtered = n_links = n_special = 0
        dir_no = -1  # registered with the first file kept
        prefix = dirpath if dirpath.endswith("/") else dirpath + "/"  # as os.path.join
        dfd = -1
        try:
            # Read through a descriptor: each entry's lstat is then an fstatat of
            # its bare name, with no path for the kernel to walk again.
            dfd = os.open(dirpath, _DIR_FLAGS)
            it = os.scandir(dfd)
        except OSError as exc:
            if dfd >= 0:
                os.close(dfd)
            warnings.append(ScanWarning(dirpath, _cause(exc)))
            return _Dir(dirpath, key, start, start, subdirs, keys, warnings, (0, 0, 0, 0))
        try:
            with it:
                for entry in it:
                    name = entry.name
                    if skip_hidden and name[0] == ".":
                        continue
                    # The path is made only where needed: a string less a file.
                    if exclude is not None and exclude.match(name, prefix + name):
                        continue
                    if not name.isascii() and not _valid_utf8(name):
                        warnings.append(ScanWarning(prefix + name, _BAD_NAME, False))
                    try:
                        if entry.is_symlink():
                            if not follow:
                                n_links += 1
                                continue
                            link = 1
                            try:
                                st = entry.stat()
                            except FileNotFoundError:
                                warnings.append(ScanWarning(prefix + name, "broken symlink"))
                                continue
                        else:
                            link = 0
                            st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        warnings.append(ScanWarning(prefix + name, _cause(exc)))
                        continue
                    mode = st.st_mode
                    if S_ISREG(mode):
                        size = st.st_size
                        if lo <= size <= hi and (
                            include is None or include.match(name, prefix + name)
                        ):
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
                            add_link(link)
                        else:
                            n_filtered += 1
                    elif S_ISDIR(mode):
                        if skip is None or (st.st_dev, st.st_ino) not in skip:
                            add_sub(name)
                            add_key(st.st_dev)
                            add_key(st.st_ino)
                    else:
                        n_special += 1
        except OSError as exc:  # readdir itself failed part-way
            warnings.append(ScanWarning(dirpath, _cause(exc)))
        finally:
            os.close(dfd)
        counts = (n_bytes, n_filtered, n_links, n_special)
        return _Dir(dirpath, key, start, len(files), subdirs, keys, warnings, counts)
