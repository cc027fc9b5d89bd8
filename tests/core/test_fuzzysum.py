"""FuzzySum: the bit-exact port of the Java, and the v2 variant."""

from __future__ import annotations

import base64
import hashlib
import math
import pathlib
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core.fuzzysum import (
    AVG_SIZE,
    ROUND_TO,
    V2_MATCH_THRESHOLD,
    V2_PIECES,
    _lcs_length,
    checksum,
    checksum_v2,
    compare_v2,
    decode_like_java,
    parse_v2,
)

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "fuzzysum"
CONFORMANCE = DATA / "conformance"
MD5_OF_NOTHING = "d41d8cd98f00b204e9800998ecf8427e"


def _public_vectors() -> list[tuple[str, str]]:
    lines = (CONFORMANCE / "expected.tsv").read_text().splitlines()
    return [(name, digest) for digest, name in (line.split("\t") for line in lines)]


def _extra_vectors() -> list[tuple[str, str, bytes]]:
    rows = []
    for line in (DATA / "extra" / "vectors.tsv").read_text().splitlines():
        digest, kind, data = line.split("\t")
        rows.append((digest, kind, base64.b64decode(data)))
    return rows


def java_literal(text: str) -> str:
    """A line-by-line transcription of the Java, slow and plain: the oracle for the fast port."""
    text = text.lower()  # agrees with Java's en-US toLowerCase on every character that matters
    text = re.sub(r"<[^>]*>", "", text)
    words = re.split(r"[ \t\n\x0b\f\r]+", text)

    def java_round(value: float) -> int:
        return ROUND_TO * int(value / float(ROUND_TO))

    x = y = -1
    distance_sum = 0.0
    sum_count = 0
    sums: list[float] = []
    for raw in words:
        word = re.sub(r"[^a-zA-Z_0-9]", "", raw)
        vowels = re.sub(r"[^aeiouy]", "", word)
        consonants = re.sub(r"[aeiouy]", "", word)
        this_x = java_round(sum(ord(c) - ord("a") for c in vowels) * 3)
        this_y = java_round(sum(ord(c) - ord("a") for c in consonants))
        if this_x == 0 and this_y == 0:
            continue
        if x > 0 and y > 0:
            distance_sum += math.sqrt(math.pow(this_x - x, 2) + math.pow(this_y - y, 2))
            sum_count += 1
        if sum_count > 0 and sum_count % AVG_SIZE == 0:
            sums.append(float(java_round(distance_sum / AVG_SIZE)))
            distance_sum = 0.0
        x, y = this_x, this_y
    if distance_sum != 0 and sum_count % AVG_SIZE != 0:
        sums.append(float(java_round(distance_sum / AVG_SIZE)))
    digest = hashlib.md5()
    for i in range(len(sums) - 1):
        digest.update(str(int((sums[i] + sums[i + 1]) / 2.0)).encode())
    return digest.hexdigest()


@pytest.mark.parametrize(("name", "expected"), _public_vectors())
def test_public_conformance_vector(name: str, expected: str) -> None:
    data = (CONFORMANCE / "inputs" / name).read_bytes()
    assert checksum(decode_like_java(data)) == expected


def test_public_vectors_are_all_there() -> None:
    assert len(_public_vectors()) == 62


def test_extra_java_vectors() -> None:
    rows = _extra_vectors()
    assert len(rows) == 320
    wrong = [
        (kind, data[:40])
        for digest, kind, data in rows
        if checksum(decode_like_java(data)) != digest
    ]
    assert wrong == []


def test_literal_oracle_agrees_with_the_java_on_the_public_vectors() -> None:
    for name, expected in _public_vectors():
        text = (CONFORMANCE / "inputs" / name).read_bytes().decode("utf-8", errors="replace")
        assert java_literal(text) == expected, name


def test_decoding_matches_java_on_malformed_utf8() -> None:
    lines = (DATA / "extra" / "decode.tsv").read_text().splitlines()
    assert lines
    for line in lines:
        raw, java_utf16 = (base64.b64decode(field) for field in line.split("\t"))
        assert decode_like_java(raw).encode("utf-16-be") == java_utf16


@pytest.mark.parametrize(
    ("data", "java"),
    [
        (b"\xed\xa0\x80a", "\ufffda"),  # an encoded surrogate is one malformed sequence in Java
        (b"\xed\xa0a", "\ufffda"),
        (b"\xe2\x82a", "\ufffda"),  # a truncated sequence: one replacement, the ASCII kept
        (b"\xf0\x80\x80\x80a", "\ufffd" * 4 + "a"),  # overlong: one per byte, as in Python
        (b"\xef\xbb\xbfa", "\ufeffa"),  # the BOM is kept
    ],
)
def test_decoding_literals(data: bytes, java: str) -> None:
    assert decode_like_java(data) == java


WORDS = ["the", "strength", "queue", "rhythm", "about", "2008", "_", "a", "eye", "lynx", "x1_2"]
PIECES = [" ", "\n", "\t", "\x0b", "\x0c", "\r", "\u00a0", "\u2028", "<", ">", "<b>", "İ", "K"]
PIECES += ["é", "😀", "Σ", "ΣΑΣ", "Å", "ﬁ", "٣", "Ａ", "\ufffd", ".", "-", "QUEUE", "Strength"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS + PIECES), max_size=200).map(" ".join))
def test_fast_port_equals_literal_transcription_on_word_soup(text: str) -> None:
    assert checksum(text) == java_literal(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_fast_port_equals_literal_transcription_on_any_text(text: str) -> None:
    assert checksum(text) == java_literal(text)


def test_short_texts_digest_nothing() -> None:
    # Fewer than two sums: the MD5 is of no bytes at all.
    assert checksum("") == MD5_OF_NOTHING
    assert checksum(" \t\n") == MD5_OF_NOTHING
    assert checksum("strength queue rhythm") == MD5_OF_NOTHING


def test_case_and_kelvin_sign_do_not_matter() -> None:
    text = " ".join(["kick strength keeps the kingdom quiet"] * 10)
    assert checksum(text.upper()) == checksum(text)
    assert checksum(text.replace("k", "\u212a")) == checksum(text)


def test_tags_are_removed_and_join_words() -> None:
    text = " ".join(["strength queue rhythm about lynx"] * 10)
    assert checksum(text.replace("queue", "q<b class='x'>ue</b>ue")) == checksum(text)
    assert checksum(text.replace("queue rhythm", "queue<br>rhythm")) != checksum(text)


def test_only_ascii_whitespace_splits_words() -> None:
    text = " ".join(["strength queue rhythm about lynx"] * 10)
    assert checksum(text.replace(" ", "\u00a0")) == MD5_OF_NOTHING  # one long word
    assert checksum(text.replace(" ", "\x0b")) == checksum(text)


def test_words_that_add_no_distance_append_zeros() -> None:
    # Eleven words positive on both coordinates; "333" (x 0, y -136) adds the 11th distance,
    # then each kept word after a non-positive one appends a 0 while the count stays at 11.
    base = "rhythm about lynx people little words first there which their would"
    one = base + " 333 333 open"
    two = base + " 333 333 333 open"
    assert checksum(one) == java_literal(one)
    assert checksum(two) == java_literal(two)
    assert checksum(one) != checksum(two)


# --- v2 ------------------------------------------------------------------------------------

VOCABULARY = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "been",
    "one",
    "all",
    "we",
    "their",
    "has",
    "would",
    "when",
    "who",
    "harbor",
    "sailor",
    "quietly",
    "mended",
    "patient",
    "violin",
    "northern",
    "winter",
    "ancient",
    "painter",
    "crossed",
    "rusty",
    "bridge",
    "beside",
    "lonely",
    "orchard",
    "bold",
    "teacher",
    "shouted",
    "velvet",
    "kitchen",
    "shadow",
    "distant",
    "mountain",
    "copper",
    "lantern",
    "whisper",
    "meadow",
    "thunder",
    "garden",
    "silver",
    "river",
    "forest",
    "candle",
    "morning",
    "evening",
]


def random_text(seed: int, words: int) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(words):
        out.append(rng.choice(VOCABULARY))
        out.append(rng.choice([" "] * 12 + [", ", ". ", "\n"]))
    return "".join(out)


def single_edit(text: str, kind: str, where: float) -> str:
    words = text.split(" ")
    i = min(int(where * len(words)), len(words) - 2)
    if kind == "spelling":
        word = words[i]
        words[i] = word[:1] + "q" + word[2:] if len(word) > 1 else word + "q"
    elif kind == "add":
        words.insert(i, "lighthouse")
    elif kind == "remove":
        del words[i]
    else:
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def v2_match(a: str, b: str) -> bool:
    return a == b or compare_v2(a, b) >= V2_MATCH_THRESHOLD


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**32),
    st.integers(100, 3000),
    st.sampled_from(["spelling", "add", "remove", "swap"]),
    st.floats(0, 1),
)
def test_v2_single_edit_keeps_a_match(seed: int, words: int, kind: str, where: float) -> None:
    text = random_text(seed, words)
    assert v2_match(checksum_v2(text), checksum_v2(single_edit(text, kind, where)))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32), st.integers(100, 3000), st.integers(100, 3000))
def test_v2_unrelated_texts_do_not_match(seed: int, words_a: int, words_b: int) -> None:
    a = checksum_v2(random_text(seed, words_a))
    b = checksum_v2(random_text(seed + 1, words_b))
    assert not v2_match(a, b)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2000))
def test_v2_digest_format(text: str) -> None:
    digest = checksum_v2(text)
    level, first, second = parse_v2(digest)
    assert digest.startswith(f"v2:{level}:")
    assert level >= 2
    assert len(first) <= 2 * V2_PIECES
    assert len(second) <= len(first)
    assert compare_v2(digest, digest) in (0, 100)  # 0 only for parts too short to grade


def test_v2_normalises_case_tags_and_punctuation() -> None:
    text = random_text(1, 400)
    assert checksum_v2(text.upper()) == checksum_v2(text)
    assert checksum_v2(text.replace(" ", " <i>", 7)) == checksum_v2(text)
    assert checksum_v2(text.replace(",", "—")) == checksum_v2(text)
    # a comparison sign is not a tag
    assert checksum_v2(text.replace(" the ", " a < b and c > d ", 1)) != checksum_v2(text)


def test_v2_identical_text_identical_digest_and_full_score() -> None:
    text = random_text(2, 1000)
    assert checksum_v2(text) == checksum_v2(str(text))
    assert compare_v2(checksum_v2(text), checksum_v2(text)) == 100


def test_v2_compares_neighbouring_levels_on_the_level_they_share() -> None:
    assert compare_v2("v2:3:ABCDEFGH:IJKLMNOP", "v2:4:IJKLMNOP:QRST") == 100
    assert compare_v2("v2:4:IJKLMNOP:QRST", "v2:3:ABCDEFGH:IJKLMNOP") == 100
    assert compare_v2("v2:3:ABCDEFGH:IJKLMNOP", "v2:5:IJKLMNOP:QRST") == 0


def test_v2_score_is_dice_on_the_longest_common_subsequence() -> None:
    # 10 pieces against 10 with one changed: LCS 9, score 200 * 9 / 20 = 90.
    assert compare_v2("v2:2:ABCDEFGHIJ:AB", "v2:2:ABCDEZGHIJ:AB") == 90
    # No common run of 4 pieces: 0, however long the common subsequence.
    assert compare_v2("v2:2:AxBCyDEzFG:", "v2:2:ABCDEFGtuv:") == 0


@pytest.mark.parametrize("bad", ["", "v1:2:AB:A", "v2:x:AB:A", "v2:2:A-B:A", "v2:2:AB"])
def test_v2_rejects_what_is_not_a_v2_digest(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_v2(bad)


@given(st.text("abcd", max_size=70), st.text("abcd", max_size=70))
def test_lcs_bit_parallel_equals_dynamic_programming(a: str, b: str) -> None:
    row = [0] * (len(b) + 1)
    for char in a:
        previous = 0
        for j, other in enumerate(b, 1):
            previous, row[j] = row[j], (previous + 1 if char == other else max(row[j], row[j - 1]))
    assert _lcs_length(a, b) == row[-1]


_CHARS = st.characters(
    codec="utf-8",
    exclude_categories=("Cs",),
)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_CHARS, max_size=200))
def test_v2_word_bytes_match_the_unicode_definition(text: str) -> None:
    """The vectorised classification equals: letters and digits of any script, not '_'."""
    import numpy as np

    from sif.core.fuzzysum import _word_bytes

    text = text.lower()
    data = text.encode("utf-8")
    want = np.concatenate(
        [np.full(len(c.encode("utf-8")), c.isalnum() and c != "_", dtype=bool) for c in text]
        or [np.zeros(0, dtype=bool)]
    )
    got = _word_bytes(np.frombuffer(data, dtype=np.uint8))
    assert (got == want).all()


# --------------------------------------------------------------------------------------------
# Streaming (issue 10): any chunking of the bytes gives the whole text's digest.
# --------------------------------------------------------------------------------------------

from sif.core.fuzzystream import FuzzySum, FuzzySumV2  # noqa: E402

# Byte pieces that cross chunk borders badly: tags that open and close, the letters Java
# lowercases to ASCII (İ, K), a capital sigma and what its final form depends on, malformed
# and cut UTF-8, encoded surrogates, whitespace of every kind, word characters.
BYTE_PIECES = [
    b" ", b"\n", b"\t", b"\r\n", b"\x0b", b"<", b">", b"<b>", b"</p>", b"<1", b"<!--", b"-->",
    b"\xc4\xb0", b"\xc4", b"\xb0", b"\xe2\x84\xaa", b"\xe2\x84", b"\xaa", b"\xce\xa3",
    b"\xce\xb1", b"\xcc\x81", b"'", b".", b":", b"\xed\xa0\x80", b"\xed\xa0", b"\xff",
    b"\xf0\x9f\x98\x80", b"\xf0\x9f", b"\xef\xbb\xbf", b"\xe3\x81\x82", b"_", b"2008",
    b"the", b"strength", b"queue", b"rhythm", b"Lynx", b"EYE", b"x1_2", b"\xc3\xa9",
]  # fmt: skip


def _streamed(cls: type[FuzzySum] | type[FuzzySumV2], data: bytes, cuts: list[int]) -> str:
    h = cls()
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        h.update(data[start:cut])
        start = max(start, cut)
    return h.hexdigest()


SOUP = st.lists(
    st.tuples(st.sampled_from(BYTE_PIECES), st.sampled_from([b" ", b"\n", b"", b""])).map(b"".join),
    min_size=50,
    max_size=600,
).map(b"".join)


@settings(max_examples=150, deadline=None)
@given(SOUP, st.lists(st.integers(0, 3000), min_size=1, max_size=60))
def test_streamed_digests_equal_whole_text_digests(data: bytes, cuts: list[int]) -> None:
    text = decode_like_java(data)
    assert _streamed(FuzzySum, data, cuts) == checksum(text)
    assert _streamed(FuzzySumV2, data, cuts) == checksum_v2(text)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=20))
def test_streamed_digests_of_any_bytes(data: bytes, cuts: list[int]) -> None:
    text = decode_like_java(data)
    assert _streamed(FuzzySum, data, cuts) == checksum(text)
    assert _streamed(FuzzySumV2, data, cuts) == checksum_v2(text)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32), st.integers(64, 40_000))
def test_streamed_digests_of_long_texts(seed: int, chunk: int) -> None:
    # Thousands of words: many v1 blocks, v2 levels that die on the way, tags across chunks.
    # Chunks from 64 bytes (a chunk of a byte or two, 50k calls a text, is the other
    # tests' job: their cuts fall anywhere).
    rng = random.Random(seed)
    parts = [rng.choice(BYTE_PIECES) + rng.choice((b" ", b"\n", b"")) for _ in range(8_000)]
    data = b"".join(parts)
    cuts = list(range(chunk, len(data), chunk))
    text = decode_like_java(data)
    assert _streamed(FuzzySum, data, cuts) == checksum(text)
    assert _streamed(FuzzySumV2, data, cuts) == checksum_v2(text)


def test_streamed_conformance_vectors_in_small_chunks() -> None:
    rng = random.Random(7)
    for name, expected in _public_vectors():
        data = (CONFORMANCE / "inputs" / name).read_bytes()
        cuts = [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 200))]
        assert _streamed(FuzzySum, data, cuts) == expected, name
    for expected, kind, data in _extra_vectors():  # made with the Java itself
        cuts = [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 20))]
        assert _streamed(FuzzySum, data, cuts) == expected, kind


def test_an_unclosed_tag_far_longer_than_a_chunk() -> None:
    words = b" ".join(b"word%d" % i for i in range(30_000))
    for data in (words + b" <" + words, words + b" <" + words + b"> " + words):
        cuts = list(range(1000, len(data), 1000))
        text = decode_like_java(data)
        assert _streamed(FuzzySum, data, cuts) == checksum(text)
        assert _streamed(FuzzySumV2, data, cuts) == checksum_v2(text)


def test_final_sigma_sees_across_chunk_borders() -> None:
    # str.lower gives a capital sigma its final form from its neighbours, skipping
    # case-ignorable characters (apostrophes, combining marks): whatever the chunks.
    words = ["ΑΣΑ", "ΑΣ", "ΣΑ", "Σ", "ΑΣ'Α", "ΑΣ\u0301Α", "ΑΣ.", "Α'Σ", "ΑΣΣ", "ΟΔΟΣ"]
    rng = random.Random(3)
    text = " ".join(rng.choice(words) + rng.choice(["", "Α", "Σ"]) for _ in range(300))
    data = text.encode()
    for step in (1, 2, 3, 5):
        assert _streamed(FuzzySumV2, data, list(range(step, len(data), step))) == checksum_v2(text)


def test_hexdigest_may_be_read_on_the_way() -> None:
    data = b"the harbour sailor <b>mended</b> every violin " * 400
    v1, v2 = FuzzySum(), FuzzySumV2()
    for i in range(0, len(data), 777):
        v1.update(data[i : i + 777])
        v2.update(data[i : i + 777])
        assert v1.hexdigest() == checksum(decode_like_java(data[: i + 777]))
    assert v2.hexdigest() == checksum_v2(data.decode())
