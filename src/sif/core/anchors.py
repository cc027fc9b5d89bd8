"""The paper's first method: learned anchors (Manber, section 2).

"An anchor is simply a string of characters [...] The idea is to achieve
synchronization by extracting from the text strings that start with
anchors." A fixed set of anchors is learned from sample text, "selecting a
fixed set of representative strings, which are quite common but not too
common" (the paper's example: ``acte``); every occurrence of any anchor in a
file starts a ``w``-byte window whose value is a fingerprint.

Here anchors all have one length ``q`` (4 by default, the length of
``acte``), which turns multi-pattern matching into a vectorised lookup of
each position's ``q``-gram code; no automaton is needed.

Learning (:func:`learn_anchors`), given samples (one per file) and a target
density ``d`` in fingerprints per byte:

1. count every ``q``-gram: its occurrences and the number of samples that
   hold it;
2. drop degenerate ``q``-grams (periodic with a period of at most ``q/2``:
   ``"    "``, ``"abab"``), those found in fewer than ``min_samples``
   samples (not representative: "quite common"), and those whose rate
   exceeds ``d / min_anchors`` ("not too common": no single anchor may
   carry more than a ``1/min_anchors`` share, so that the fingerprints
   come from many different anchors and spread out);
3. take candidates in decreasing order of how many samples hold them,
   skipping any that overlaps an anchor already taken (``acte`` and ``ract``
   co-occur in ``character``: both would fingerprint the same spot), until
   their summed rate reaches ``d``.

Pure: arrays and values in, values out; parsing errors are ``ValueError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sif.core.rolling import BASE, U8, U64, WINDOW, karp_rabin_at, mix64
from sif.core.sampling import MAX_PERIOD, degenerate_at, want_jit

I64 = npt.NDArray[np.int64]

#: Default anchor length: that of the paper's example anchor ``acte``.
ANCHOR_LENGTH = 4
#: Default target density: the paper's one fingerprint per 256 bytes (k = 8, section 2).
DENSITY = 1 / 256
#: No anchor may carry more than this share of the target density.
MIN_ANCHORS = 16
FORMAT = "sif-anchors"
FORMAT_VERSION = 1
# Multiplicative hashing of q-gram codes into a bitmap filter of 2^_FILTER_BITS entries.
_FILTER_BITS = 20
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def qgram_codes(data: U8, length: int) -> U64:
    """The little-endian integer code of every ``length``-byte substring (``length <= 8``).

    Cost: O(n * length), ``length`` vectorised passes.
    """
    m = len(data) - length + 1
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    codes = data[:m].astype(np.uint64)
    for j in range(1, length):
        codes |= data[j : j + m].astype(np.uint64) << np.uint64(8 * j)
    return codes


def _code_bytes(code: int, length: int) -> bytes:
    return int(code).to_bytes(length, "little")


def _periodic(gram: bytes) -> bool:
    return any(gram[q:] == gram[:-q] for q in range(1, len(gram) // 2 + 1))


def _overlaps(a: bytes, b: bytes) -> bool:
    # A proper suffix of one is a prefix of the other: they meet inside one longer string.
    return any(a[s:] == b[: len(a) - s] or b[s:] == a[: len(b) - s] for s in range(1, len(a)))


@dataclass(frozen=True)
class AnchorSet:
    """A learned set of anchors, all of ``length`` bytes, sorted and distinct.

    ``density`` is the rate of anchor occurrences per byte measured on the
    learning sample: the expected fingerprint density on similar text.
    """

    anchors: tuple[bytes, ...]
    length: int = ANCHOR_LENGTH
    density: float = 0.0

    def __post_init__(self) -> None:
        if not 2 <= self.length <= 8:
            raise ValueError(f"anchor length must be 2..8 bytes, not {self.length}")
        if not self.anchors:
            raise ValueError("an anchor set needs at least one anchor")
        if any(len(a) != self.length for a in self.anchors):
            raise ValueError(f"every anchor must be {self.length} bytes long")
        if list(self.anchors) != sorted(set(self.anchors)):
            raise ValueError("anchors must be sorted and distinct")

    @property
    def digest(self) -> str:
        """A stable name of the set (SHA-256 of length and anchors, 32 hex digits)."""
        import hashlib

        h = hashlib.sha256(f"{FORMAT}/{FORMAT_VERSION} {self.length}\n".encode())
        for a in self.anchors:
            h.update(a)
        return h.hexdigest()[:32]

    def codes(self) -> U64:
        """The anchors' q-gram codes (see :func:`qgram_codes`), ascending."""
        codes = np.array([int.from_bytes(a, "little") for a in self.anchors], dtype=np.uint64)
        return np.sort(codes)

    def to_json(self) -> str:
        """The anchor file's text: JSON with the format, version, digest and hex anchors."""
        doc = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "length": self.length,
            "density": self.density,
            "digest": self.digest,
            "anchors": [a.hex() for a in self.anchors],
        }
        return json.dumps(doc, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> AnchorSet:
        """Parse :meth:`to_json`'s output; ``ValueError`` names what is wrong."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported {FORMAT} version {doc.get('version')!r}")
        try:
            anchors = tuple(sorted(bytes.fromhex(a) for a in doc["anchors"]))
            result = cls(anchors, int(doc["length"]), float(doc.get("density", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad anchor list: {exc}") from exc
        if "digest" in doc and doc["digest"] != result.digest:
            raise ValueError("digest does not match the anchors (file edited or damaged)")
        return result


def learn_anchors(
    samples: Iterable[U8],
    length: int = ANCHOR_LENGTH,
    density: float = DENSITY,
    min_anchors: int = MIN_ANCHORS,
    min_samples: int = 2,
) -> AnchorSet:
    """Learn an anchor set from ``samples`` (one array per file) for a target ``density``.

    See the module docstring for the rule. Raises ``ValueError`` when the
    samples cannot give a single anchor (too little or too uniform text).
    Cost: O(total bytes * log) time for the sort-based counts, and memory
    of about 16 bytes per distinct q-gram of each sample.
    """
    if not 0 < density < 1:
        raise ValueError("density must be in (0, 1)")
    uniques: list[U64] = []
    counts: list[npt.NDArray[np.int64]] = []
    total = 0
    for sample in samples:
        codes = qgram_codes(sample, length)
        total += len(codes)
        u, c = np.unique(codes, return_counts=True)
        uniques.append(u)
        counts.append(c.astype(np.int64))
    if total == 0:
        raise ValueError("no sample text to learn anchors from")
    all_codes = np.concatenate(uniques)
    codes, inverse = np.unique(all_codes, return_inverse=True)
    occurrences = np.bincount(inverse, weights=np.concatenate(counts)).astype(np.int64)
    holders = np.bincount(inverse)  # each sample contributed a code once
    rate = occurrences / total
    cap = density / min_anchors
    keep = (holders >= min_samples) & (rate <= cap)
    # Most widely held first; among equals the more frequent, then the code, for determinism.
    order = np.lexsort((codes[keep], -occurrences[keep], -holders[keep]))
    chosen: list[bytes] = []
    reached = 0.0
    for idx in np.flatnonzero(keep)[order]:
        gram = _code_bytes(int(codes[idx]), length)
        if _periodic(gram) or any(_overlaps(gram, a) for a in chosen):
            continue
        chosen.append(gram)
        reached += float(rate[idx])
        if reached >= density:
            break
    if not chosen:
        raise ValueError("the samples yield no anchor (too little or too repetitive text)")
    return AnchorSet(tuple(sorted(chosen)), length, reached)


def find_anchors(data: U8, anchors: AnchorSet, *, jit: bool | None = None) -> I64:
    """Start of every occurrence of any anchor in ``data``, ascending.

    Multi-pattern matching for patterns of one length: each position's
    q-gram code is looked up in a bitmap of hashed anchor codes and the few
    hits are checked exactly by binary search. ``jit`` as in
    :func:`sif.core.sampling.winnow_select`: the numba pass costs about
    1.5 ns a byte; the numpy form allocates several 8-byte arrays per byte
    and runs ten times slower, which small inputs do not notice. Cost: O(n)
    plus O(hits * log(anchors)).
    """
    m = len(data) - anchors.length + 1
    if m <= 0:
        return np.empty(0, dtype=np.int64)
    wanted = anchors.codes()
    bitmap = np.zeros(1 << _FILTER_BITS, dtype=bool)
    shift = np.uint64(64 - _FILTER_BITS)
    with np.errstate(over="ignore"):
        bitmap[(wanted * _GOLDEN) >> shift] = True
    if jit is None:
        jit = want_jit(len(data))
    if jit:
        from sif.core.kernels import find_anchors_kernel

        out = np.empty(m, dtype=np.int64)  # untouched pages cost nothing
        n = find_anchors_kernel(
            np.ascontiguousarray(data), anchors.length, bitmap, _FILTER_BITS, _GOLDEN, wanted, out
        )
        return out[:n].copy()
    codes = qgram_codes(data, anchors.length)
    with np.errstate(over="ignore"):
        hits = np.flatnonzero(bitmap[(codes * _GOLDEN) >> shift])
    found = codes[hits]
    k = np.minimum(np.searchsorted(wanted, found), len(wanted) - 1)
    return hits[wanted[k] == found].astype(np.int64)


def anchor_select(
    data: U8,
    anchors: AnchorSet,
    window: int = WINDOW,
    max_period: int = MAX_PERIOD,
    base: int = BASE,
    *,
    jit: bool | None = None,
) -> tuple[I64, U64]:
    """Anchor fingerprints of ``data``: ``(starts, values)``, starts ascending.

    Every anchor occurrence whose ``window`` bytes fit in ``data`` and are
    not degenerate (see :mod:`sif.core.sampling`) gives the value of those
    bytes, :func:`sif.core.rolling.window_hashes`'s value for that window.
    ``jit`` as in :func:`find_anchors`. Cost: :func:`find_anchors` plus
    O(occurrences * window).
    """
    starts = find_anchors(data, anchors, jit=jit)
    starts = starts[starts <= len(data) - window]
    if max_period:
        starts = starts[~degenerate_at(data, starts, window, max_period)]
    return starts, mix64(karp_rabin_at(data, starts, window, base))
