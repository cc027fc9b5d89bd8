"""The 128-bit key of a path, by which a walk and the index's catalog meet.

A key is two 64-bit halves of the path's bytes (as the file system spells them):
XXH64 with seed :data:`KEY_SEED`, sorted and searched, and XXH64 with seed
:data:`CHECK_SEED`, compared where the first halves meet. The catalog keeps each
origin's key (:mod:`sif.index.duck`), and the C walk (:mod:`sif._treec`) computes
the walked paths' keys as it meets them, in the same way (the tests hold them
to agree): a run's plan then compares two arrays of numbers, with no Python
string for a path of the index.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import xxhash

from sif.records import RecordColumns

KEY_SEED = 0
CHECK_SEED = 0x736966206B657931
"""``b"sif key1"`` as a number: any seed other than :data:`KEY_SEED` would do."""

#: Paths hashed at a time by :func:`path_keys`.
KEY_CHUNK = 1 << 16

U64 = npt.NDArray[np.uint64]


def path_key(path: bytes) -> tuple[int, int]:
    """The key of one path's bytes: (first half, second half)."""
    return xxhash.xxh64_intdigest(path, KEY_SEED), xxhash.xxh64_intdigest(path, CHECK_SEED)


def path_keys(paths: Iterable[bytes], n: int) -> U64:
    """The :func:`path_key` of ``n`` paths, as an ``(n, 2)`` array; made
    :data:`KEY_CHUNK` at a time (a bytes object each only for a chunk). Raises
    :class:`ValueError` when ``paths`` holds fewer than ``n``."""
    out = np.empty((n, 2), dtype=np.uint64)
    it = iter(paths)
    for start in range(0, n, KEY_CHUNK):
        m = min(KEY_CHUNK, n - start)
        part = np.fromiter(
            itertools.chain.from_iterable(map(path_key, itertools.islice(it, m))),
            dtype=np.uint64,
        )
        if len(part) != 2 * m:
            raise ValueError("fewer paths than counted")
        out[start : start + m] = part.reshape(m, 2)
    return out


def walk_keys(cols: RecordColumns, start: int = 0) -> U64:
    """The keys of the walked paths ``cols[start:]``, in walk order."""
    dirs = [os.fsencode(d) for d in cols.dirs]
    enc = os.fsencode
    dir_of = cols.dir_of[start:]
    paths = map(bytes.__add__, map(dirs.__getitem__, dir_of), map(enc, cols.names[start:]))
    return path_keys(paths, len(cols) - start)
