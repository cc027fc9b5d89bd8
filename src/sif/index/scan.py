"""The one per-file function of the index: path -> (kind, digest, fingerprints).

Each file is read once: the same blocks feed the fingerprints, the BLAKE3
digest of the whole content (for exact copies) and the sample that decides
the kind (:func:`sif.content.kind_of`). Content views (issue 7) hook in
here, between the read and the fingerprints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import blake3
import numpy as np
import numpy.typing as npt

from sif.content import SAMPLE_SIZE, kind_of
from sif.core.anchors import AnchorSet
from sif.fingerprint import FingerprintParams, fingerprint_reader

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]

DIGEST_SIZE = 32
"""Bytes of the BLAKE3 content digest kept per file."""


@dataclass(frozen=True)
class ScannedFile:
    """What one read of a file gives the index.

    ``fingerprints`` are the stored 32-bit values (see :func:`fold32`), in
    the order of their windows, with multiplicity; ``size`` is the number of
    bytes actually read (the file may have changed since it was stat'ed).
    """

    kind: str
    digest: bytes
    fingerprints: U32
    size: int

    @property
    def n_distinct(self) -> int:
        return len(np.unique(self.fingerprints))


def fold32(values: U64) -> U32:
    """64-bit (or narrower) fingerprint values -> well-mixed 32-bit stored values.

    The splitmix64 finaliser, then the high half: ``winnow`` values are
    already mixed, but ``sif94`` values hold 22-24 bits and ``anchors``
    values are structured, and the index buckets on the high bits, so all
    are mixed alike. Pure and vectorised; O(n).
    """
    z = values.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(32)).astype(np.uint32)


def scan_file(
    path: str | os.PathLike[str],
    params: FingerprintParams,
    anchors: AnchorSet | None = None,
) -> ScannedFile:
    """Read the file at ``path`` once: its kind, BLAKE3 digest and fingerprints.

    Raises ``OSError`` when the file cannot be opened or read (the caller
    turns it into a :class:`sif.events.ScanWarning`). Cost: one sequential
    read of the file in 1 MiB blocks, BLAKE3 and the fingerprint kernel over
    each block; memory O(block).
    """
    hasher = blake3.blake3()
    sample = bytearray()
    read = 0

    def on_block(view: memoryview) -> None:
        nonlocal read
        hasher.update(view)
        read += len(view)
        if len(sample) < SAMPLE_SIZE:
            sample.extend(view[: SAMPLE_SIZE - len(sample)])

    with open(path, "rb", buffering=0) as f:
        fps = fingerprint_reader(f, params, anchors=anchors, on_block=on_block)
    return ScannedFile(kind_of(sample), hasher.digest(), fold32(fps.values), read)
