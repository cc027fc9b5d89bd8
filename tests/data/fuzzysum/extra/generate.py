"""Make the extra FuzzySum vectors with the original Java class (run by hand, not by pytest).

    javac -nowarn -d /tmp/fsj tests/data/fuzzysum/java/net/spatula/utils/FuzzySum.java \\
        tests/data/fuzzysum/java/FuzzySumDriver.java
    python tests/data/fuzzysum/extra/generate.py --classes /tmp/fsj [--count 320] [--seed 6]

Writes ``vectors.tsv`` (``<java md5>\\t<category>\\t<base64 of the input bytes>``) and
``decode.tsv`` (``<base64 of the input bytes>\\t<base64 of Java's decoded text, UTF-16BE>``) next
to this file, then reports how many digests :func:`sif.core.fuzzysum.checksum` gets right.
With ``--check-only`` nothing is written: a larger batch is compared and thrown away.
"""

from __future__ import annotations

import argparse
import base64
import pathlib
import random
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent

WORDS = [
    "the",
    "a",
    "an",
    "of",
    "and",
    "to",
    "in",
    "that",
    "it",
    "is",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "at",
    "be",
    "this",
    "from",
    "have",
    "or",
    "by",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
    "about",
    "how",
    "up",
    "out",
    "them",
    "then",
    "she",
    "many",
    "some",
    "so",
    "these",
    "would",
    "other",
    "into",
    "has",
    "more",
    "her",
    "two",
    "like",
    "him",
    "see",
    "time",
    "could",
    "no",
    "make",
    "than",
    "first",
    "been",
    "its",
    "who",
    "now",
    "people",
    "my",
    "made",
    "over",
    "did",
    "down",
    "only",
    "way",
    "find",
    "use",
    "may",
    "water",
    "long",
    "little",
    "very",
    "after",
    "words",
    "called",
    "just",
    "where",
    "most",
    "know",
    "rhythm",
    "strength",
    "crypt",
    "lynx",
    "gym",
    "myth",
    "tsktsk",
    "brrr",
    "psst",
    "shh",
    "eye",
    "aye",
    "queue",
    "iou",
    "euouae",
    "you",
    "go",
    "i",
]

PIECES = [
    " ",
    "\t",
    "\n",
    "\r\n",
    "\x0b",
    "\x0c",
    "\u00a0",
    "\u0085",
    "\u2028",
    "\u3000",
    "\x1c",
    "\x1f",
    "\u200b",
    "\ufeff",
    "<",
    ">",
    "<b>",
    "</p>",
    "<a href='x y'>",
    "<!-- c\nd -->",
    "<<>>",
    "_",
    "__init__",
    "0",
    "42",
    "2008",
    "route66",
    "mp3",
    "-",
    ".",
    ",",
    "'",
    "\u2019",
    "\u2014",
    "\u0130",
    "\u0131",
    "\u212a",
    "\u212b",
    "\u03a3",
    "\u03c3",
    "\u03c2",
    "ΟΔΟΣ",
    "ΣΑΣ",
    "Straße",
    "ǅ",
    "ﬁ",
    "ＡＢＣ",
    "é",
    "e\u0301",
    "Ω",
    "日本語",
    "😀",
    "👩\u200d👩\u200d👧",
    "🇫🇷",
    "👍🏽",
    "𝐀𝐁",
    "𐐀𐐨",
    "\U0001d7d8",
    "٣",
    "²",
    "Ⅻ",
    "\ufffd",
]

BAD_BYTES = [
    b"\x80",
    b"\xbf",
    b"\xc0\x80",
    b"\xc1\xbf",
    b"\xc2",
    b"\xe2\x82",
    b"\xe2",
    b"\xf0\x9f\x98",
    b"\xf0\x9f",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xed\xa0",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xfe",
    b"\xff",
    b"\xe0\x80\x80",
    b"\xf0\x80\x80\x80",
    b"\xef\xbb\xbf",
]


def _word(rng: random.Random) -> str:
    word = rng.choice(WORDS)
    roll = rng.random()
    if roll < 0.1:
        word = word.upper()
    elif roll < 0.2:
        word = word.capitalize()
    elif roll < 0.25:
        word = word * rng.randint(2, 6)
    elif roll < 0.3:
        word = str(rng.randint(0, 10 ** rng.randint(1, 9)))
    elif roll < 0.33:
        word = word + "_" + rng.choice(WORDS)
    return word


def _prose(rng: random.Random, words: int, mix: float) -> str:
    out = []
    for _ in range(words):
        out.append(_word(rng))
        out.append(rng.choice(PIECES) if rng.random() < mix else " ")
    return "".join(out)


def _chars(rng: random.Random, words: int) -> str:
    """Words with random characters (printable ASCII, the tricky pieces, any code point)."""
    pool = [chr(c) for c in range(32, 127)] + PIECES
    out = []
    for _ in range(words):
        out.append(_word(rng))
        out.extend(rng.choice(pool) for _ in range(rng.randint(0, 3)))
        if rng.random() < 0.05:  # any code point but a lone surrogate (UTF-8 cannot carry it)
            out.append(chr(rng.choice([rng.randrange(0xD800), rng.randrange(0xE000, 0x110000)])))
        out.append(rng.choice(" \n\t"))
    return "".join(out)


def _bytes_with_errors(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(5, 150)):
        roll = rng.random()
        if roll < 0.2:
            parts.append(rng.choice(BAD_BYTES))
        elif roll < 0.5:
            parts.append(rng.choice(PIECES).encode())
        else:
            parts.append((_word(rng) + rng.choice(" \n")).encode())
    return b"".join(parts)


def make_inputs(rng: random.Random, count: int) -> list[tuple[str, bytes]]:
    """``count`` (category, input bytes) pairs, mostly short, covering the tricky semantics."""
    kinds = ["prose", "prose_mixed", "chars", "bad_utf8", "blocks"]
    inputs = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        if kind == "prose":
            data = _prose(rng, rng.randint(0, 140), 0.02).encode()
        elif kind == "prose_mixed":
            data = _prose(rng, rng.randint(10, 120), 0.3).encode()
        elif kind == "chars":
            data = _chars(rng, rng.randint(0, 120)).encode()
        elif kind == "bad_utf8":
            data = _bytes_with_errors(rng)
        else:
            # Runs of words whose coordinates are not both positive (digits, vowels or
            # consonants only) between ordinary words: the sumCount % 11 quirk and the zeros.
            pool = ["1", "22", "333", "ee", "aaa", "yyy", "rhythm", "brrr", "_", "9_9", "x"]
            words = [
                rng.choice(pool) if rng.random() < rng.random() else rng.choice(WORDS)
                for _ in range(rng.randint(20, 130))
            ]
            data = " ".join(words).encode()
        inputs.append((kind, data))
    return inputs


def _java(classes: str, mode: str, lines: list[bytes]) -> list[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".b64", delete=False) as handle:
        handle.write("".join(base64.b64encode(data).decode() + "\n" for data in lines))
    command = ["java", "-Duser.language=en", "-Duser.country=US", "-cp", classes]
    result = subprocess.run(
        [*command, "FuzzySumDriver", mode, handle.name], capture_output=True, text=True, check=True
    )
    pathlib.Path(handle.name).unlink()
    return result.stdout.splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", required=True, help="directory of the compiled Java")
    parser.add_argument("--count", type=int, default=320)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--check-only", action="store_true")
    args = parser.parse_args()

    from sif.core.fuzzysum import checksum, decode_like_java

    inputs = make_inputs(random.Random(args.seed), args.count)
    digests = _java(args.classes, "batch", [data for _, data in inputs])
    decoded = _java(args.classes, "decode", [data for _, data in inputs])
    wrong = 0
    for (kind, data), want, java_text in zip(inputs, digests, decoded, strict=True):
        text = decode_like_java(data)
        if text.encode("utf-16-be") != base64.b64decode(java_text):
            print("DECODE DIFFERS", kind, data[:60])
        if checksum(text) != want:
            wrong += 1
            print("MISMATCH", kind, data[:60])
    print(f"{len(inputs)} inputs, {wrong} digest mismatches")
    if args.check_only:
        return
    with open(HERE / "vectors.tsv", "w") as out:
        for (kind, data), want in zip(inputs, digests, strict=True):
            out.write(f"{want}\t{kind}\t{base64.b64encode(data).decode()}\n")
    with open(HERE / "decode.tsv", "w") as out:
        for (kind, data), java_text in zip(inputs, decoded, strict=True):
            if kind == "bad_utf8":
                out.write(f"{base64.b64encode(data).decode()}\t{java_text}\n")


if __name__ == "__main__":
    main()
