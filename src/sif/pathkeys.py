"""The 128-bit key of a path, by which a walk and the index's catalog meet.

A key is BLAKE2b with a 16-byte digest of the path's bytes (as the file system
spells them), keyed by the index's secret (:data:`SECRET_BYTES` random bytes,
the index directory's ``pathkey`` file: :mod:`sif.index.indexdir`): its first 8
bytes (little-endian) are sorted and searched, the other 8 compared where the
first meet. The catalog keeps each origin's key (:mod:`sif.index.duck`), and
the C walk (:mod:`sif._treec`) computes the walked paths' keys as it meets them,
in the same way (the tests hold them to agree): a run's plan then compares two
arrays of numbers, with no Python string for a path of the index.

Why keyed, and cryptographic: a run takes a walked path whose key and stat
fields match a row's for that row's file, without reading its path. Keys that
anyone can compute (XXH64 with fixed seeds, before) let two valid file names of
one key be made in under a second, and a directory renamed to such a name left
its old path in the index for good. Without the secret nobody can aim at a key;
with it, two paths of one key still cost about 2**64 hashes.

Hashed in C where :mod:`sif._treec` was built (:func:`path_keys`: 0.19 s for
1 M paths of 55 bytes), else with :func:`hashlib.blake2b` (0.6 s): the same keys.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from sif.records import RecordColumns

try:
    from sif import _treec  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # not built: hashlib
    _treec = None

#: Bytes of a secret (BLAKE2b takes keys of up to 64).
SECRET_BYTES = 32

#: Paths hashed at a time by :func:`path_keys`.
KEY_CHUNK = 1 << 16

U64 = npt.NDArray[np.uint64]


def new_secret() -> bytes:
    """A new secret: :data:`SECRET_BYTES` from the system's random source."""
    return os.urandom(SECRET_BYTES)


def secret_check(secret: bytes) -> str:
    """What the catalog records of its secret (hex): tells the secret its keys were made
    with from another, without telling the secret."""
    return hashlib.blake2b(b"sif path key check", key=secret, digest_size=16).hexdigest()


def path_key(path: bytes, secret: bytes) -> tuple[int, int]:
    """The key of one path's bytes under ``secret``: (first half, second half)."""
    d = hashlib.blake2b(path, key=secret, digest_size=16).digest()
    return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:], "little")


def path_keys(paths: Iterable[bytes], n: int, secret: bytes) -> U64:
    """The :func:`path_key` of ``n`` paths, as an ``(n, 2)`` array; made
    :data:`KEY_CHUNK` at a time (a bytes object each only for a chunk), in C where
    built. Raises :class:`ValueError` when ``paths`` holds fewer than ``n``."""
    out = np.empty((n, 2), dtype=np.uint64)
    it = iter(paths)
    for start in range(0, n, KEY_CHUNK):
        m = min(KEY_CHUNK, n - start)
        chunk = list(itertools.islice(it, m))
        if len(chunk) != m:
            raise ValueError("fewer paths than counted")
        if _treec is not None:
            part = np.frombuffer(_treec.path_keys(chunk, secret), dtype=np.uint64)
        else:
            key = path_key
            part = np.fromiter(
                itertools.chain.from_iterable(key(p, secret) for p in chunk), dtype=np.uint64
            )
        out[start : start + m] = part.reshape(m, 2)
    return out


def walk_keys(cols: RecordColumns, secret: bytes, start: int = 0) -> U64:
    """The keys of the walked paths ``cols[start:]``, in walk order."""
    dirs = [os.fsencode(d) for d in cols.dirs]
    enc = os.fsencode
    dir_of = cols.dir_of[start:]
    paths = map(bytes.__add__, map(dirs.__getitem__, dir_of), map(enc, cols.names[start:]))
    return path_keys(paths, len(cols) - start, secret)
