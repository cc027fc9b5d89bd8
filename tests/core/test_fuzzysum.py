"""FuzzySum: the bit-exact port of the Java, and the v2 variant."""

from __future__ import annotations

import base64
import hashlib
import math
import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core.fuzzysum import AVG_SIZE, ROUND_TO, checksum, decode_like_java

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
