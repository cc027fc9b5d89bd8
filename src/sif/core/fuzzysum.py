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

__all__ = [
    "AVG_SIZE",
    "ROUND_TO",
    "V2_MATCH_THRESHOLD",
    "V2_PREFIX",
    "checksum",
    "checksum_v2",
    "compare_v2",
    "decode_like_java",
    "parse_v2",
]

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


# --------------------------------------------------------------------------------------------
# v2: content-defined word chunks, one base64 piece per chunk, compared by edit distance.
# --------------------------------------------------------------------------------------------

V2_PREFIX = "v2:"
"""Every v2 digest starts with it, so that v1 and v2 digests can share a list."""

V2_PIECES = 64
"""At most this many pieces in the first part of a v2 digest (ssdeep's SPAMSUM_LENGTH)."""

V2_MIN_LEVEL = 2
"""Chunks hold at least 2**V2_MIN_LEVEL words on average: shorter chunks of common words make
the same pieces in unrelated texts."""

V2_MATCH_THRESHOLD = 75
"""A :func:`compare_v2` score at or above it is a match (see ``bench/fuzzysum.py``)."""

V2_MIN_COMMON_RUN = 4
"""Two digests that share no run of this many pieces score 0 (ssdeep requires 7 characters)."""

V2_MIN_PIECES = 6
"""Parts with fewer pieces get no graded score; such texts (a few dozen words) match only
when their digests are equal."""

_V2_ALPHABET = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
)
_V2_TAG = re.compile(rb"<[a-z!/?][^<>]*>")

# ASCII letters and digits make words; a non-ASCII character does when ``str.isalnum`` says so
# (the letters and digits of any script); everything else separates words.
_V2_WORD_BYTE = np.zeros(256, dtype=bool)
_V2_WORD_BYTE[list(b"abcdefghijklmnopqrstuvwxyz0123456789")] = True
_BMP_ALNUM: npt.NDArray[np.bool_] | None = None


def _alnum(cps: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """``chr(c).isalnum()`` for each code point: a table for the BMP, a loop for the rest."""
    global _BMP_ALNUM
    if _BMP_ALNUM is None:  # built once, on the first non-ASCII text (~20 ms)
        _BMP_ALNUM = np.fromiter((chr(c).isalnum() for c in range(0x10000)), bool, 0x10000)
    out = np.zeros(cps.size, dtype=bool)
    bmp = cps < 0x10000
    out[bmp] = _BMP_ALNUM[cps[bmp]]
    if not bmp.all():
        astral = np.unique(cps[~bmp])
        table = np.array([chr(int(c)).isalnum() for c in astral])
        out[~bmp] = table[np.searchsorted(astral, cps[~bmp])]
    return out


def _word_bytes(raw: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Which bytes of UTF-8 ``raw`` belong to letters or digits, vectorised.

    Each multi-byte character is decoded from its lead byte and continuation
    bytes with array arithmetic and classified with :func:`_alnum`; all its
    bytes take the result.
    """
    word = _V2_WORD_BYTE[raw]
    lead = np.flatnonzero(raw >= 0xC0)
    if lead.size == 0:
        return word
    b0 = raw[lead].astype(np.int64)
    n = np.where(b0 >= 0xF0, 4, np.where(b0 >= 0xE0, 3, 2))
    cp = b0 & np.where(n == 4, 0x07, np.where(n == 3, 0x0F, 0x1F))
    padded = np.concatenate([raw, np.zeros(3, dtype=np.uint8)])
    for k in (1, 2, 3):
        more = n > k
        cont = padded[lead + k].astype(np.int64) & 0x3F
        cp = np.where(more, (cp << 6) | cont, cp)
    isword = _alnum(cp)
    for k in range(4):
        has = n > k
        word[lead[has] + k] = isword[has]
    return word


_M64 = (1 << 64) - 1


def _splitmix_table(count: int, seed: int) -> npt.NDArray[np.uint64]:
    """``count`` fixed pseudo-random 64-bit values: part of the v2 format, never change them."""
    out = []
    state = seed
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & _M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out.append(z ^ (z >> 31))
    return np.array(out, dtype=np.uint64)


_V2_BYTE_KEY = _splitmix_table(256, 0x5F0A)
_V2_PAIR_SALT = 0x2545F4914F6CDD1D
_V2_MULTIPLIER = np.uint64(0x100000001B3)  # FNV-1a 64-bit prime: odd, so powers never vanish


def _mix(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The splitmix64 finaliser on each value (a bijection of 64-bit integers)."""
    z = values ^ (values >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _v2_word_hashes(text: str) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each normalised word of ``text``, in order.

    Normalised: lowercased, HTML tags (``<`` then a letter, ``/``, ``!`` or ``?``) removed, words
    are runs of letters and digits of any script (underscore and punctuation separate them).
    Vectorised: one regex pass for the tags, then array operations on the UTF-8 bytes.
    """
    data = _V2_TAG.sub(b" ", text.lower().encode("utf-8", "surrogatepass"))
    raw = np.frombuffer(data, dtype=np.uint8)
    word = _V2_WORD_BYTE[raw] if text.isascii() else _word_bytes(raw)
    where = np.flatnonzero(word)
    if where.size == 0:
        return np.zeros(0, dtype=np.uint64)
    # Starts of words among the word bytes: a gap in the positions of word bytes.
    first = np.ones(where.size, dtype=bool)
    first[1:] = np.diff(where) > 1
    starts = np.flatnonzero(first)
    lengths = np.diff(np.append(starts, where.size))
    offset = np.arange(where.size) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max()), _V2_MULTIPLIER, dtype=np.uint64))
    terms = _V2_BYTE_KEY[raw[where]] * powers[offset]
    return _mix(np.add.reduceat(terms, starts))


def _trailing_ones(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """How many of the low bits of each value are 1, counted from bit 0 (at most 63)."""
    lowest_zero = ~values & (values + np.uint64(1))  # the lowest 0 bit of v, alone
    lowest_zero[lowest_zero == 0] = np.uint64(1) << np.uint64(63)  # all ones: cap at 63
    return np.log2(lowest_zero.astype(np.float64)).astype(np.int64)


def _v2_pieces(hashes: npt.NDArray[np.uint64], levels: npt.NDArray[np.int64], level: int) -> str:
    """One base64 character per chunk, a chunk ending after each word of at least ``level``."""
    ends = np.flatnonzero(levels >= level)
    starts = np.append(0, ends + 1)
    starts = starts[starts < hashes.size]
    # A chunk's piece ignores the order of its words: a swap inside a chunk changes nothing.
    sums = np.add.reduceat(hashes, starts)
    return _V2_ALPHABET[(_mix(sums) >> np.uint64(58)).astype(np.intp)].tobytes().decode("ascii")


def checksum_v2(text: str) -> str:
    """The v2 fuzzy digest of ``text``: ``v2:<level>:<pieces>:<pieces at level + 1>``.

    Words are cut into chunks where a word's hash ends in ``level`` 1 bits, so a boundary
    depends on one word only and an edit moves at most the boundaries at the words it touches.
    The level is the smallest one (from :data:`V2_MIN_LEVEL`) that gives at most
    :data:`V2_PIECES` chunks; each chunk gives one base64 character. A spelling change, a word
    added or removed or two words swapped change one or two characters in each part.
    Cost: a few numpy passes over the bytes and the words.
    """
    hashes = _v2_word_hashes(text)
    if hashes.size == 0:
        return f"{V2_PREFIX}{V2_MIN_LEVEL}::"
    # A boundary depends on a word and the one before it: single words are too skewed (a
    # frequent word that ends chunks at one level makes that level's chunks tiny).
    pairs = hashes.copy()
    pairs[1:] += _mix(hashes[:-1] ^ np.uint64(_V2_PAIR_SALT))
    levels = _trailing_ones(_mix(pairs) >> np.uint64(32))
    per_level = np.bincount(levels, minlength=64)
    at_least = np.cumsum(per_level[::-1])[::-1]  # at_least[k]: words of level >= k
    last = int(levels[-1])
    chunks = at_least + (np.arange(at_least.size) > last)  # a last chunk without a boundary
    level = V2_MIN_LEVEL
    while level < 62 and chunks[level] > V2_PIECES:
        level += 1
    # A phrase repeated all over a text can make one level's chunks many and the next level's
    # very few: then take up to twice as many pieces rather than a handful.
    if (
        level > V2_MIN_LEVEL
        and chunks[level] < V2_PIECES // 4
        and chunks[level - 1] <= 2 * V2_PIECES
    ):
        level -= 1
    first = _v2_pieces(hashes, levels, level)
    second = _v2_pieces(hashes, levels, level + 1)
    return f"{V2_PREFIX}{level}:{first}:{second}"


def parse_v2(digest: str) -> tuple[int, str, str]:
    """``(level, pieces, pieces at level + 1)`` of a v2 digest; ValueError if it is not one."""
    parts = digest.split(":")
    if len(parts) != 4 or parts[0] + ":" != V2_PREFIX or not parts[1].isdigit():
        raise ValueError(f"not a v2 fuzzysum digest: {digest!r}")
    alphabet = set(_V2_ALPHABET.tobytes().decode("ascii"))
    if not set(parts[2]) <= alphabet or not set(parts[3]) <= alphabet:
        raise ValueError(f"not a v2 fuzzysum digest: {digest!r}")
    return int(parts[1]), parts[2], parts[3]


def _lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (bit-parallel, Hyyrö 2004)."""
    if not a or not b:
        return 0
    mask = (1 << len(a)) - 1
    match: dict[str, int] = {}
    for i, char in enumerate(a):
        match[char] = match.get(char, 0) | (1 << i)
    row = mask
    for char in b:
        common = row & match.get(char, 0)
        row = ((row + common) | (row - common)) & mask
    return len(a) - bin(row).count("1")


def _has_common_run(a: str, b: str, run: int) -> bool:
    """Whether ``a`` and ``b`` share a substring of ``run`` characters."""
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return any(shorter[i : i + run] in longer for i in range(len(shorter) - run + 1))


def _score_pieces(a: str, b: str) -> int:
    if min(len(a), len(b)) < V2_MIN_PIECES:
        return 0  # too few pieces for a graded score: only equal digests match
    if a == b:
        return 100
    if not _has_common_run(a, b, V2_MIN_COMMON_RUN):
        return 0
    # Dice on the longest common subsequence: 100 minus the share of pieces an edit changed.
    return (200 * _lcs_length(a, b)) // (len(a) + len(b))


def compare_v2(a: str, b: str) -> int:
    """A similarity score from 0 (unrelated) to 100 (same digest) between two v2 digests.

    Digests made at the same level compare both parts and keep the better score; at
    neighbouring levels they compare the part they share; further apart they score 0. A score
    at or above :data:`V2_MATCH_THRESHOLD` is a match. ValueError if one is not a v2 digest.
    """
    level_a, first_a, second_a = parse_v2(a)
    level_b, first_b, second_b = parse_v2(b)
    if a == b:
        return 100  # short texts too: too few pieces for a graded score, yet the same
    if level_a == level_b:
        return max(_score_pieces(first_a, first_b), _score_pieces(second_a, second_b))
    if level_a + 1 == level_b:
        return _score_pieces(second_a, first_b)
    if level_b + 1 == level_a:
        return _score_pieces(first_a, second_b)
    return 0
