"""Integrity checks of index files: lengths, headers and checksums.

The one place where a damaged index file becomes :class:`sif.errors.IndexCorrupt`
("index corrupt: PATH (cause); run with --rebuild"): :func:`load_array` opens
every ``.npy`` of the index (whatever a damaged header raises: ``ValueError``,
``SyntaxError``, ``tokenize.TokenError``, ``EOFError``...), and
:func:`checksum_files` / :func:`verify_segment` record and compare each
file's length and XXH3-128 checksum (several GB/s). ``FileNotFoundError``
passes: a reader retries when a writer retired what it was opening.
"""

from __future__ import annotations

import errno
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.errors import IndexCorrupt, IndexUnusable

Check = dict[str, list[Any]]
"""The checks of a segment's files: file name -> ``[bytes, XXH3-128 hex digest]``."""

_CHUNK = 1 << 20


#: An array that cannot be opened for one of these is not damaged: "run with --rebuild"
#: would be wrong advice (a low ``ulimit -n`` made sif query say it).
_NOT_DAMAGE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EACCES, errno.EPERM})


def corrupt(path: str, cause: str) -> IndexCorrupt:
    """The error for a damaged index file: ``index corrupt: PATH (cause); run with --rebuild``."""
    return IndexCorrupt(f"index corrupt: {path} ({cause}); run with --rebuild")


def file_checksum(path: str) -> str:
    """XXH3-128 of the file at ``path`` (hex), read in 1 MiB chunks: ~10 GB/s from cache."""
    import xxhash  # a reader only compares lengths: it never imports it

    h = xxhash.xxh3_128()
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb") as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def checksum_files(directory: str) -> Check:
    """The length and checksum of every file of the segment ``directory``."""
    out: Check = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        out[name] = [os.path.getsize(path), file_checksum(path)]
    return out


def verify_segment(directory: str, check: Mapping[str, Sequence[Any]]) -> None:
    """Compare every file of ``directory`` with its recorded length and checksum.

    Raises :class:`IndexCorrupt` naming the first file that differs, is
    missing, or is not recorded. Cost: one read of the segment.
    """
    names = set(_listdir(directory))
    for name in sorted(names - set(check)):
        raise corrupt(os.path.join(directory, name), "a file the manifest does not record")
    for name, (size, digest) in sorted(check.items()):
        path = os.path.join(directory, name)
        if name not in names:
            raise corrupt(path, "missing")
        check_size(path, int(size))
        try:
            got = file_checksum(path)
        except OSError as exc:
            raise corrupt(path, exc.strerror or str(exc)) from exc
        if got != digest:
            raise corrupt(path, "checksum mismatch: its content changed after it was written")


def _listdir(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise corrupt(directory, exc.strerror or str(exc)) from exc


def check_size(path: str, size: int) -> None:
    try:
        got = os.stat(path).st_size
    except FileNotFoundError:
        raise  # retired by a writer (the reader reads CURRENT again), or lost
    except OSError as exc:
        raise corrupt(path, exc.strerror or str(exc)) from exc
    if got != size:
        raise corrupt(path, f"{got:,} bytes where the manifest records {size:,}")


def load_array(path: str, dtypes: Sequence[np.dtype[Any]]) -> npt.NDArray[Any]:
    """The 1-D ``.npy`` array at ``path``, memory-mapped, after checking it.

    The one place where index arrays are opened: the header must parse, give
    one of ``dtypes`` and one dimension, and the file must be exactly as long
    as the header implies; any failure (a 0-byte file, a damaged header:
    ``ValueError``, ``SyntaxError``, ``tokenize.TokenError``, ``EOFError``...)
    is :class:`IndexCorrupt`. ``FileNotFoundError`` passes (a reader retries).
    """
    try:
        with open(path, "rb") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a damaged header may warn as it is parsed
            size = os.fstat(f.fileno()).st_size
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"npy format {version}")
            offset = f.tell()
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in _NOT_DAMAGE:  # the process's limits or rights, not the index's state
            raise IndexUnusable(f"{path}: {exc.strerror or exc}") from exc
        raise corrupt(path, f"unreadable array header: {cause_of(exc)}") from exc
    except Exception as exc:  # whatever a damaged header raises
        raise corrupt(path, f"unreadable array header: {cause_of(exc)}") from exc
    if dtype not in dtypes or len(shape) != 1 or dtype.hasobject:
        raise corrupt(path, f"unexpected array {dtype} {shape}")
    expected = offset + shape[0] * dtype.itemsize
    if size != expected:
        raise corrupt(path, f"{size:,} bytes where its header implies {expected:,} (truncated?)")
    if shape[0] == 0:
        return np.empty(0, dtype=dtype)
    try:
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in _NOT_DAMAGE:  # out of descriptors or memory: not the index's state
            raise IndexUnusable(f"{path}: {exc.strerror or exc}") from exc
        raise corrupt(path, cause_of(exc)) from exc
    except ValueError as exc:
        raise corrupt(path, cause_of(exc)) from exc


def cause_of(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
