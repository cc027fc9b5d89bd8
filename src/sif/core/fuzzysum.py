"""FuzzySum: Nick Johnson's word-level fuzzy checksum (seed 2), bit-exact, and a variant v2.

:func:`checksum` gives the digest of the Java ``net.spatula.utils.FuzzySum.checkSum`` for every
text, vectorised with numpy. What the Java does, and what the port relies on (each point was
checked against the original class under OpenJDK 17, locale en-US):

- ``toLowerCase()`` only matters where it yields ASCII letters, since ``\\W`` later removes
  everything else: ``A-Z``, U+212A KELVIN SIGN (to ``k``) and U+0130 (to ``i`` + U+0307; the
  combining dot is removed by ``\\W``). No other code point lowercases to ASCII in Java 17.
- ``replaceAll("<[^>]*>", "")`` removes from each ``<`` to the next ``>`` (newlines included)
  and can join two words; ``>`` never occurs inside a UTF-8 multi-byte sequence, so the same
  regular expression runs on the UTF-8 bytes.
- ``\\s`` is ASCII only (space, TAB, LF, VT, FF, CR) and ``\\W`` is ``[^a-zA-Z0-9_]``. Empty
  words (the leading one ``split`` keeps) have coordinates (0, 0) and are skipped, so the
  ``split`` quirks do not change the digest.
- ``sumChars`` adds ``c - 'a'`` over UTF-16 units, but only ASCII survives ``\\W``: digits
  count -49..-40 and ``_`` counts -2, so coordinates can be negative.
- ``round`` is ``17 * (long)(v / 17.0)``: truncation toward zero.
- A distance is added only when the *previous* kept word has ``x > 0 && y > 0``.
- ``sumCount % 11 == 0`` stays true on the following kept words that add no distance, and
  each of them appends a 0 to the list of sums.
- ``distanceSum`` is summed left to right in double precision; the port sums in the same
  order. The last partial block is added only when its sum is not 0.
- Each pair of neighbouring sums gives ``(int)((a + b) / 2F)`` (a double division, then
  truncation), whose decimal digits go into MD5, with no separator.

The digest of a text with fewer than two sums is the MD5 of nothing.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
import numpy.typing as npt

__all__ = ["AVG_SIZE", "ROUND_TO", "checksum", "decode_like_java"]

ROUND_TO = 17
"""The Java's ``ROUND_TO``: coordinates and block averages are rounded (toward 0) to it."""

AVG_SIZE = 11
"""The Java's ``AVG_SIZE``: distances are averaged over blocks of this many words."""

_TAG = re.compile(rb"<[^>]*>")

# Java's UTF-8 decoder takes ED followed by A0-BF (the start of an encoded surrogate) and one
# more continuation byte, if there is one, as one malformed sequence; Python replaces each byte.
_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]?")

# Java's \s without UNICODE_CHARACTER_CLASS: space, TAB, LF, VT, FF, CR.
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True

# Per byte, what it adds to the vowel sum and to the consonant sum of its word: c - 'a' for the
# characters of \w, split by [aeiouy]; 0 for every other byte (all of them removed by \W).
_VOWEL_WEIGHT = np.zeros(256, dtype=np.int8)
_CONSONANT_WEIGHT = np.zeros(256, dtype=np.int8)
for _c in b"0123456789_abcdefghijklmnopqrstuvwxyz":
    if _c in b"aeiouy":
        _VOWEL_WEIGHT[_c] = _c - ord("a")
    else:
        _CONSONANT_WEIGHT[_c] = _c - ord("a")

_MD5_OF_NOTHING = hashlib.md5(b"").hexdigest()
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _java_round(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``ROUND_TO * (long)(value / ROUND_TO)`` for each value, as a double."""
    return np.trunc(values / float(ROUND_TO)) * float(ROUND_TO)


def _ascii_lower_bytes(text: str) -> bytes:
    """UTF-8 bytes of ``text`` in which every character Java lowercases to ASCII is lowercased.

    Other non-ASCII characters are left as they are: whatever they become, ``\\W`` removes them,
    and none of them lowercases to whitespace, ``<`` or ``>``.
    """
    if not text.isascii():
        text = text.replace("\u0130", "i").replace("\u212a", "k")
    # Lone surrogates (only possible from a caller's str) are one non-word character in Java.
    return text.encode("utf-8", "surrogatepass").lower()


def _word_coordinates(data: bytes) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The rounded (x, y) of each whitespace-separated word of ``data``, in order."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    space = _SPACE[raw]
    after_space = np.empty_like(space)
    after_space[0] = True
    after_space[1:] = space[:-1]
    starts = np.flatnonzero(after_space & ~space)
    if starts.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    # A segment runs from a word's first byte to the next word's first byte; the whitespace it
    # holds weighs 0, so the segment sums are the word sums.
    vowels = np.add.reduceat(_VOWEL_WEIGHT[raw], starts, dtype=np.int64)
    consonants = np.add.reduceat(_CONSONANT_WEIGHT[raw], starts, dtype=np.int64)
    x = _java_round((vowels * 3).astype(np.float64)).astype(np.int64)
    y = _java_round(consonants.astype(np.float64)).astype(np.int64)
    return x, y


def _sums(x: npt.NDArray[np.int64], y: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The Java's list ``sums`` for the word coordinates ``x``, ``y``."""
    kept = (x != 0) | (y != 0)
    x, y = x[kept], y[kept]
    if x.size == 0:
        return np.zeros(0, dtype=np.float64)
    positive = (x > 0) & (y > 0)
    # Word i adds a distance when the previous kept word (not word i itself) is positive.
    adds = np.zeros(x.size, dtype=bool)
    adds[1:] = positive[:-1]
    dx = np.diff(x).astype(np.float64)
    dy = np.diff(y).astype(np.float64)
    step = np.sqrt(dx * dx + dy * dy)
    distances = step[adds[1:]]
    count = distances.size

    # Blocks of AVG_SIZE distances, each summed left to right as the Java does.
    blocks = count // AVG_SIZE
    table = distances[: blocks * AVG_SIZE].reshape(blocks, AVG_SIZE)
    block_sum = table[:, 0].copy()
    for column in range(1, AVG_SIZE):
        block_sum += table[:, column]
    block_value = _java_round(block_sum / float(AVG_SIZE))

    # A block's value is appended on the word that completes it; every later kept word that adds
    # no distance while the count is still a multiple of AVG_SIZE appends a 0.
    running = np.cumsum(adds)
    appends = (running > 0) & (running % AVG_SIZE == 0)
    which = running[appends] // AVG_SIZE - 1
    values = np.where(adds[appends], block_value[which], 0.0)

    rest = count - blocks * AVG_SIZE
    if rest:
        tail = float(np.cumsum(distances[blocks * AVG_SIZE :])[-1])
        if tail != 0.0:
            values = np.append(values, _java_round(np.array([tail / float(AVG_SIZE)])))
    return values


def decode_like_java(data: bytes) -> str:
    """``data`` decoded as Java's ``new String(data, UTF_8)`` does, U+FFFD for U+FFFD.

    Malformed input becomes U+FFFD as in Python's ``errors="replace"``, except for encoded
    surrogates (``ED A0..BF ..``), which Java replaces with one U+FFFD where Python puts one per
    byte. A byte order mark is kept. ASCII characters are never absorbed by either decoder.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _ENCODED_SURROGATE.sub(b"\xef\xbf\xbd", data).decode("utf-8", errors="replace")


def checksum(text: str) -> str:
    """The FuzzySum digest of ``text``: 32 lowercase hex digits, the Java's for every input.

    ``text`` is the decoded file (the Java read UTF-8 with replacement of malformed input).
    Cost: a few numpy passes over the UTF-8 bytes; no Python loop per word or character.
    """
    x, y = _word_coordinates(_TAG.sub(b"", _ascii_lower_bytes(text)))
    sums = _sums(x, y)
    if sums.size < 2:
        return _MD5_OF_NOTHING
    pairs = np.clip(np.trunc((sums[:-1] + sums[1:]) / 2.0), _INT_MIN, _INT_MAX).astype(np.int64)
    return hashlib.md5("".join(map(str, pairs.tolist())).encode("ascii")).hexdigest()
