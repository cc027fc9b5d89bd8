"""FuzzySum v1 and v2 over a stream of bytes: memory independent of the input's size.

:class:`FuzzySum` and :class:`FuzzySumV2` take a file's bytes in chunks of any size
(``update``) and give the digest of :func:`~sif.core.fuzzysum.checksum` and
:func:`~sif.core.fuzzysum.checksum_v2` of the whole file decoded as Java does
(:func:`~sif.core.fuzzysum.decode_like_java`), bit for bit. What crosses a chunk border
is carried as state, never as text:

- the word being read: its sums (v1) or its partial polynomial hash (v2);
- the words' state machine: v1's previous point, running distance sum and count, the last
  block value and the MD5 so far; v2's previous word hash, the count of words of each level
  and, for each level that can still be chosen (at most ``2 * V2_PIECES`` chunks), its pieces;
- a tag left open at the end of a chunk. ``<[^>]*>`` (v1) and ``<[a-z!/?][^<>]*>`` (v2) can
  span any length, and whether they match is known only when the ``>`` comes (or never
  does): the state at the ``<`` is kept (the tag will be removed) beside the state that reads
  on as text (it will not); the first ``>`` (or, for v2, ``<``) decides which one goes on.
- v1 needs no decoding: only ASCII bytes, ``İ`` (``C4 B0``) and ``K`` (``E2 84 AA``) count,
  and a malformed sequence never absorbs one of them (their lead bytes are never continuation
  bytes); two bytes that may start one of them are held back. v2 decodes incrementally
  (UTF-8, U+FFFD for malformed input: how many U+FFFD makes no difference, they separate
  words) and lowercases text cut where neither side is a capital sigma or case-ignorable,
  so that ``str.lower``'s final-sigma rule sees what it would see in the whole text (a run
  of more than :data:`MAX_HELD` characters without such a place is cut anyway).

Cost: the same numpy passes as the whole-text functions, per chunk; memory O(chunk).
"""

from __future__ import annotations

import codecs
import hashlib
import re
import unicodedata
from typing import Any

import numpy as np
import numpy.typing as npt

from sif.core.fuzzysum import (
    _CONSONANT_WEIGHT,
    _INT_MAX,
    _INT_MIN,
    _SPACE,
    _TAG,
    _V2_ALPHABET,
    _V2_BYTE_KEY,
    _V2_MULTIPLIER,
    _V2_PAIR_SALT,
    _V2_TAG,
    _V2_WORD_BYTE,
    _VOWEL_WEIGHT,
    AVG_SIZE,
    V2_MIN_LEVEL,
    V2_PIECES,
    V2_PREFIX,
    _java_round,
    _mix,
    _trailing_ones,
    _word_bytes,
)

__all__ = ["CHUNK", "MAX_HELD", "FuzzySum", "FuzzySumV2"]

CHUNK = 1 << 20
"""A good size for the chunks given to ``update`` (any size gives the same digest)."""

MAX_HELD = 1 << 20
"""v2 holds at most this many characters back while it looks for a place to cut the text."""

_M64 = (1 << 64) - 1
_EMPTY_U64 = np.zeros(0, dtype=np.uint64)


# --------------------------------------------------------------------------------------------
# v1
# --------------------------------------------------------------------------------------------


class _V1State:
    """The Java's loop between two words, and the word being read."""

    __slots__ = ("count", "distance", "in_word", "last", "md5", "wc", "wv", "x", "y")

    def __init__(self) -> None:
        self.in_word = False
        self.wv = 0  # vowel and consonant sums of the word being read
        self.wc = 0
        self.x = -1  # the previous kept word's point
        self.y = -1
        self.distance = 0.0  # distanceSum
        self.count = 0  # sumCount
        self.last: float | None = None  # the last value appended to the sums
        self.md5: Any = hashlib.md5()

    def copy(self) -> _V1State:
        other = _V1State()
        for name in ("in_word", "wv", "wc", "x", "y", "distance", "count", "last"):
            setattr(other, name, getattr(self, name))
        other.md5 = self.md5.copy()
        return other

    def feed(self, data: bytes) -> None:
        """Text (tags removed) in which words may continue from before and go on after."""
        raw = np.frombuffer(data, dtype=np.uint8)
        if raw.size == 0:
            return
        space = _SPACE[raw]
        after_space = np.empty_like(space)
        after_space[0] = not self.in_word
        after_space[1:] = space[:-1]
        starts = np.flatnonzero(after_space & ~space)
        if starts.size == 0:  # only spaces, or the word being read goes on (then spaces)
            if self.in_word:
                self.wv += int(_VOWEL_WEIGHT[raw].sum(dtype=np.int64))
                self.wc += int(_CONSONANT_WEIGHT[raw].sum(dtype=np.int64))
                if space.any():
                    self._words(np.array([self.wv]), np.array([self.wc]))
                    self.in_word, self.wv, self.wc = False, 0, 0
            return
        cuts = starts if starts[0] == 0 else np.concatenate(([0], starts))
        vowels = np.add.reduceat(_VOWEL_WEIGHT[raw], cuts, dtype=np.int64)
        consonants = np.add.reduceat(_CONSONANT_WEIGHT[raw], cuts, dtype=np.int64)
        if starts[0] != 0:  # the bytes before the first start end the word being read
            if self.in_word:
                vowels[0] += self.wv
                consonants[0] += self.wc
            else:
                vowels, consonants = vowels[1:], consonants[1:]
        if space[-1]:
            self.in_word, self.wv, self.wc = False, 0, 0
        else:  # the last word goes on in the next chunk
            self.in_word, self.wv, self.wc = True, int(vowels[-1]), int(consonants[-1])
            vowels, consonants = vowels[:-1], consonants[:-1]
        if vowels.size:
            self._words(vowels, consonants)

    def _words(self, vowels: npt.NDArray[np.int64], consonants: npt.NDArray[np.int64]) -> None:
        """Words that ended, in order: the Java's loop over them, vectorised."""
        x = _java_round((vowels * 3).astype(np.float64)).astype(np.int64)
        y = _java_round(consonants.astype(np.float64)).astype(np.int64)
        kept = (x != 0) | (y != 0)
        x, y = x[kept], y[kept]
        if x.size == 0:
            return
        px = np.concatenate(([self.x], x[:-1]))
        py = np.concatenate(([self.y], y[:-1]))
        adds = (px > 0) & (py > 0)  # word i adds a distance when the previous one is positive
        dx = (x - px).astype(np.float64)
        dy = (y - py).astype(np.float64)
        distances = np.sqrt(dx * dx + dy * dy)[adds]
        before = self.count
        running = before + np.cumsum(adds)

        # Blocks of AVG_SIZE distances, each summed left to right from the carried sum.
        need = AVG_SIZE - before % AVG_SIZE  # distances that complete the block under way
        partial = self.distance
        if distances.size < need:
            for value in distances.tolist():
                partial += value
            block_value = np.zeros(0, dtype=np.float64)
        else:
            first = partial
            for value in distances[:need].tolist():
                first += value
            rest = distances[need:]
            blocks = rest.size // AVG_SIZE
            table = rest[: blocks * AVG_SIZE].reshape(blocks, AVG_SIZE)
            block_sum = table[:, 0].copy()
            for column in range(1, AVG_SIZE):
                block_sum += table[:, column]
            block_value = _java_round(np.concatenate(([first], block_sum)) / float(AVG_SIZE))
            partial = 0.0
            for value in rest[blocks * AVG_SIZE :].tolist():
                partial += value

        appends = (running > 0) & (running % AVG_SIZE == 0)
        if appends.any():
            values = np.zeros(int(appends.sum()), dtype=np.float64)
            completes = adds[appends]
            if completes.any():
                which = running[appends][completes] // AVG_SIZE - before // AVG_SIZE - 1
                values[completes] = block_value[which]
            self._append(values)
        self.x, self.y = int(x[-1]), int(y[-1])
        self.count = int(running[-1])
        self.distance = partial

    def _append(self, values: npt.NDArray[np.float64]) -> None:
        sums = values if self.last is None else np.concatenate(([self.last], values))
        if sums.size >= 2:
            pairs = np.clip(np.trunc((sums[:-1] + sums[1:]) / 2.0), _INT_MIN, _INT_MAX)
            self.md5.update("".join(map(str, pairs.astype(np.int64).tolist())).encode("ascii"))
        self.last = float(sums[-1])

    def digest(self) -> str:
        if self.in_word:
            self._words(np.array([self.wv]), np.array([self.wc]))
            self.in_word = False
        if self.distance != 0.0 and self.count % AVG_SIZE != 0:
            self._append(_java_round(np.array([self.distance / float(AVG_SIZE)])))
            self.distance = 0.0
        return str(self.md5.hexdigest())


_V1_HELD = (b"\xe2\x84", b"\xc4", b"\xe2")  # byte tails that may start İ or K


class FuzzySum:
    """The v1 digest (the Java's) of bytes given in chunks: ``update(data)``, then ``hexdigest()``.

    Equals ``checksum(decode_like_java(all bytes))``. Memory: O(chunk).
    """

    def __init__(self) -> None:
        self._held = b""
        self._state = _V1State()
        self._at_tag: _V1State | None = None  # the state at an unmatched '<', if one is open

    def update(self, data: bytes) -> None:
        data = self._held + bytes(data)
        self._held = b""
        for tail in _V1_HELD:
            if data.endswith(tail):
                data, self._held = data[: -len(tail)], tail
                break
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        # What Java lowercases to ASCII letters, then ASCII: the rest is removed by \W anyway.
        data = data.replace(b"\xc4\xb0", b"i").replace(b"\xe2\x84\xaa", b"k").lower()
        if self._at_tag is not None:
            end = data.find(b">")
            if end < 0:
                self._state.feed(data)  # no '>' yet: read on as text, in case none comes
                return
            self._state, self._at_tag = self._at_tag, None  # a tag: as if it never was
            data = data[end + 1 :]
        data = _TAG.sub(b"", data)
        # A '<' left has no '>' after it in this chunk: the tag may close in a later one.
        start = data.find(b"<")
        if start < 0:
            self._state.feed(data)
            return
        self._state.feed(data[:start])
        self._at_tag = self._state.copy()
        self._state.feed(data[start:])

    def hexdigest(self) -> str:
        """The digest of all the bytes given so far (more may be given after)."""
        state, at_tag = self._state, self._at_tag
        self._state = state.copy()
        self._at_tag = at_tag.copy() if at_tag is not None else None
        self._feed(self._held)
        final = self._state  # a tag still open never closed: its text counts
        self._state, self._at_tag = state, at_tag
        return final.digest()


# --------------------------------------------------------------------------------------------
# v2
# --------------------------------------------------------------------------------------------

_LEVELS = 64
_MAX_CHUNKS = 2 * V2_PIECES  # a level with more chunks can never be chosen


class _V2State:
    """Words so far: the word being read, level counts, and the pieces of each live level."""

    __slots__ = ("carry", "counts", "in_word", "last_level", "pieces", "prev", "wpow", "wsum")

    def __init__(self) -> None:
        self.in_word = False
        self.wsum = 0  # the word being read: its polynomial sum so far, and M ** its length
        self.wpow = 1
        self.prev: int | None = None  # the hash of the previous word
        self.counts = np.zeros(_LEVELS, dtype=np.int64)  # words of each level
        self.last_level = -1
        # For each level that may still be chosen: the pieces of its chunks, and the sum of
        # the hashes of the chunk under way.
        self.pieces = {lv: bytearray() for lv in range(V2_MIN_LEVEL, _LEVELS)}
        self.carry: dict[int, int] = dict.fromkeys(self.pieces, 0)

    def copy(self) -> _V2State:
        other = _V2State()
        other.in_word, other.wsum, other.wpow, other.prev = (
            self.in_word,
            self.wsum,
            self.wpow,
            self.prev,
        )
        other.counts = self.counts.copy()
        other.last_level = self.last_level
        other.pieces = {lv: bytearray(p) for lv, p in self.pieces.items()}
        other.carry = dict(self.carry)
        return other

    def feed(self, data: bytes) -> None:
        """Lowercased UTF-8, tags replaced, whole characters; words may cross its ends."""
        raw = np.frombuffer(data, dtype=np.uint8)
        if raw.size == 0:
            return
        word = _V2_WORD_BYTE[raw] if data.isascii() else _word_bytes(raw)
        where = np.flatnonzero(word)
        if where.size == 0:
            if self.in_word:
                self._words(np.array([self.wsum], dtype=np.uint64))
                self.in_word, self.wsum, self.wpow = False, 0, 1
            return
        first = np.ones(where.size, dtype=bool)
        first[1:] = np.diff(where) > 1
        starts = np.flatnonzero(first)
        lengths = np.diff(np.append(starts, where.size))
        offset = np.arange(where.size) - np.repeat(starts, lengths)
        powers = np.cumprod(np.full(int(lengths.max()), _V2_MULTIPLIER, dtype=np.uint64))
        sums = np.add.reduceat(_V2_BYTE_KEY[raw[where]] * powers[offset], starts)
        done: list[npt.NDArray[np.uint64]] = []
        goes_on = bool(where[0] == 0) and self.in_word  # the first run continues a word
        if self.in_word and not goes_on:
            done.append(np.array([self.wsum], dtype=np.uint64))
        if goes_on:
            sums[0] = np.uint64((self.wsum + self.wpow * int(sums[0])) & _M64)
        open_end = bool(where[-1] == raw.size - 1)
        if open_end:
            last_len = int(lengths[-1])
            scale = self.wpow if goes_on and sums.size == 1 else 1
            self.in_word = True
            self.wsum = int(sums[-1])
            self.wpow = (scale * pow(int(_V2_MULTIPLIER), last_len, 1 << 64)) & _M64
            sums = sums[:-1]
        else:
            self.in_word, self.wsum, self.wpow = False, 0, 1
        done.append(sums)
        raws = np.concatenate(done)
        if raws.size:
            self._words(raws)

    def _words(self, raws: npt.NDArray[np.uint64]) -> None:
        """Words that ended, as their raw sums: hashes, levels, chunk pieces."""
        hashes = _mix(raws)
        pairs = hashes.copy()
        before = np.concatenate(
            (np.array([] if self.prev is None else [self.prev], dtype=np.uint64), hashes[:-1])
        )
        skip = 0 if self.prev is not None else 1
        pairs[skip:] += _mix(before ^ np.uint64(_V2_PAIR_SALT))
        levels = _trailing_ones(_mix(pairs) >> np.uint64(32))
        self.counts += np.bincount(levels, minlength=_LEVELS)[:_LEVELS]
        self.last_level = int(levels[-1])
        self.prev = int(hashes[-1])
        if not self.pieces:
            return
        prefix = np.cumsum(hashes)  # wraps modulo 2**64, as the chunk sums do
        total = int(prefix[-1])
        lowest = min(self.pieces)
        high = np.flatnonzero(levels >= lowest)
        for level in sorted(self.pieces):
            ends = high[levels[high] >= level]
            pieces = self.pieces[level]
            if len(pieces) + ends.size > _MAX_CHUNKS:
                del self.pieces[level], self.carry[level]
                continue
            if ends.size == 0:
                self.carry[level] = (self.carry[level] + total) & _M64
                continue
            at = prefix[ends]
            chunk = at - np.concatenate((np.zeros(1, dtype=np.uint64), at[:-1]))
            chunk[:1] += np.uint64(self.carry[level])
            pieces += _V2_ALPHABET[(_mix(chunk) >> np.uint64(58)).astype(np.intp)].tobytes()
            self.carry[level] = (total - int(at[-1])) & _M64

    def digest(self) -> str:
        if self.in_word:
            self._words(np.array([self.wsum], dtype=np.uint64))
            self.in_word = False
        if self.last_level < 0:
            return f"{V2_PREFIX}{V2_MIN_LEVEL}::"
        at_least = np.cumsum(self.counts[::-1])[::-1]
        chunks = at_least + (np.arange(_LEVELS) > self.last_level)
        level = V2_MIN_LEVEL
        while level < 62 and chunks[level] > V2_PIECES:
            level += 1
        if (
            level > V2_MIN_LEVEL
            and chunks[level] < V2_PIECES // 4
            and chunks[level - 1] <= 2 * V2_PIECES
        ):
            level -= 1
        return f"{V2_PREFIX}{level}:{self._pieces(level)}:{self._pieces(level + 1)}"

    def _pieces(self, level: int) -> str:
        out = bytes(self.pieces[level])
        if self.last_level < level:  # the last chunk has no boundary
            last = _mix(np.array([self.carry[level]], dtype=np.uint64)) >> np.uint64(58)
            out += _V2_ALPHABET[last.astype(np.intp)].tobytes()
        return out.decode("ascii")


_V2_EDGE = re.compile(rb"[<>]")
_V2_TAG_FIRST = frozenset(b"abcdefghijklmnopqrstuvwxyz!/?")
_UNSAFE_ASCII = frozenset("'.:^`")
_IGNORABLE = frozenset(("Mn", "Me", "Cf", "Lm", "Sk"))


def _cuttable(c: str) -> bool:
    """Whether ``str.lower`` may cut the text beside ``c``: not a capital sigma, and neither
    case-ignorable nor punctuation (a superset of Unicode's case-ignorable marks)."""
    if c < "\x80":
        return c not in _UNSAFE_ASCII
    if c == "\u03a3":
        return False
    category = unicodedata.category(c)
    return category not in _IGNORABLE and category[0] != "P"


def _cut(text: str) -> int:
    """Where ``text`` may be cut for lowercasing (0: nowhere among its last characters)."""
    for k in range(len(text) - 1, max(0, len(text) - 256), -1):
        if _cuttable(text[k]) and _cuttable(text[k - 1]):
            return k
    return 0


class FuzzySumV2:
    """The v2 digest of bytes given in chunks: ``update(data)``, then ``hexdigest()``.

    Equals ``checksum_v2(decode_like_java(all bytes))`` (text with a capital sigma beside
    more than :data:`MAX_HELD` case-ignorable characters aside). Memory: O(chunk).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""
        self._state = _V2State()
        self._at_tag: _V2State | None = None  # the state at an open tag candidate
        self._tag_first = False  # the candidate is a lone '<': its next byte decides

    def update(self, data: bytes) -> None:
        self._text(self._decoder.decode(bytes(data)))

    def _text(self, text: str, final: bool = False) -> None:
        text = self._held + text
        cut = len(text) if final else _cut(text)
        if cut == 0 and len(text) > MAX_HELD:
            cut = len(text)
        self._held = text[cut:]
        if cut:
            self._feed(text[:cut].lower().encode("utf-8", "surrogatepass"))

    def _feed(self, data: bytes) -> None:
        if self._at_tag is not None and self._tag_first and data:
            self._tag_first = False
            if data[0] not in _V2_TAG_FIRST:
                self._at_tag = None  # '<' then no tag: the text reading on was right
        if self._at_tag is not None and data:
            edge = _V2_EDGE.search(data)
            if edge is None:
                self._state.feed(data)
                return
            end = edge.start()
            if data[end] == ord(">"):  # a tag: replaced by a space
                self._state, self._at_tag = self._at_tag, None
                self._state.feed(b" ")
                data = data[end + 1 :]
            else:  # another '<' first: no tag
                self._state.feed(data[:end])
                self._at_tag = None
                data = data[end:]
        elif self._at_tag is not None:
            return
        # Only the last '<' can open a tag that ends in a later chunk: none follows it here.
        start = data.rfind(b"<")
        if (
            start < 0
            or b">" in data[start:]
            or (start + 1 < len(data) and data[start + 1] not in _V2_TAG_FIRST)
        ):
            self._state.feed(_V2_TAG.sub(b" ", data))
            return
        self._state.feed(_V2_TAG.sub(b" ", data[:start]))
        self._at_tag = self._state.copy()
        self._tag_first = start + 1 == len(data)
        self._state.feed(data[start:])

    def hexdigest(self) -> str:
        """The digest of all the bytes given so far (more may be given after)."""
        saved = (
            self._held,
            self._state,
            self._at_tag,
            self._tag_first,
            self._decoder.getstate(),
        )
        self._state = self._state.copy()
        self._at_tag = self._at_tag.copy() if self._at_tag is not None else None
        self._text(self._decoder.decode(b"", final=True), final=True)
        final = self._state  # a tag candidate never closed: its text counts
        self._held, self._state, self._at_tag, self._tag_first = saved[:4]
        self._decoder.setstate(saved[4])
        return final.digest()
