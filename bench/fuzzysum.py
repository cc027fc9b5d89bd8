"""FuzzySum v1 (the Java's) against v2: stability under single edits, false matches, speed.

    python bench/fuzzysum.py [--texts 200] [--unrelated 300] [--seed 1]

Measures, in one run:

- single-edit pairs (a spelling change, a word added, a word removed, two neighbouring words
  swapped) on generated texts (50 to 5,000 words drawn from the word frequencies of the real
  documents below) and on real documents of at least 50 words: how often v1 digests stay
  equal, and how often v2 matches (equal digests or a score >= V2_MATCH_THRESHOLD);
- the public pairs of the conformance set (v1 as the Java: equal or not);
- false matches of v2 among pairs of unrelated texts: all pairs of distinct generated texts,
  and all pairs of distinct real documents (/usr/share/common-licenses/* and
  /usr/share/doc/*/copyright, identical files counted once). A real pair that matches is
  counted false only if the two documents share less than half of their word 5-grams
  (Jaccard); pairs above that are near-duplicates (a copyright file that is a licence plus a
  header), and are reported apart;
- throughput of checksum and checksum_v2 on about 20 MB of generated prose (best of 3).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import itertools
import math
import pathlib
import random
import re
import time
from collections import Counter

from sif.core.fuzzysum import (
    V2_MATCH_THRESHOLD,
    checksum,
    checksum_v2,
    compare_v2,
    decode_like_java,
)

KINDS = ("spelling", "add", "remove", "swap")
CONFORMANCE = pathlib.Path(__file__).resolve().parent.parent / "tests/data/fuzzysum/conformance"
_TOKEN = re.compile(r"\S+|\s+")


def real_documents() -> list[tuple[str, str]]:
    """(path, text) of the licence texts and copyright files, identical contents once."""
    seen = set()
    docs = []
    paths = sorted(glob.glob("/usr/share/common-licenses/*"))
    paths += sorted(glob.glob("/usr/share/doc/*/copyright"))
    for path in paths:
        p = pathlib.Path(path)
        if not p.is_file():
            continue
        data = p.read_bytes()
        key = hashlib.sha256(data).digest()
        if key in seen:
            continue
        seen.add(key)
        docs.append((path, decode_like_java(data)))
    return docs


def generated_text(rng: random.Random, vocabulary: list[str], weights: list[int], n: int) -> str:
    """``n`` words drawn from the word frequencies, with punctuation and paragraphs."""
    words = rng.choices(vocabulary, weights, k=n)
    out = []
    for i, word in enumerate(words):
        if i and rng.random() < 0.06:
            out.append(rng.choice([".", ",", ";", ":", "?"]))
        out.append("\n\n" if rng.random() < 0.01 else "\n" if rng.random() < 0.1 else " ")
        out.append(word.capitalize() if rng.random() < 0.05 else word)
    return "".join(out).strip()


def edit(rng: random.Random, text: str, kind: str, vocabulary: list[str]) -> str:
    """``text`` with one edit of ``kind``, at a random word (whitespace kept as it is)."""
    tokens = _TOKEN.findall(text)
    words = [i for i, t in enumerate(tokens) if not t.isspace() and re.search("[A-Za-z]", t)]
    i = rng.choice(words)
    word = tokens[i]
    if kind == "spelling":
        letters = [j for j, c in enumerate(word) if c.isalpha()]
        j = rng.choice(letters)
        how = rng.choice(["sub", "drop", "double", "insert"])
        new = rng.choice("abcdefghijklmnopqrstuvwxyz")
        if how == "sub":
            while new == word[j].lower():
                new = rng.choice("abcdefghijklmnopqrstuvwxyz")
            tokens[i] = word[:j] + new + word[j + 1 :]
        elif how == "drop" and len(letters) > 1:
            tokens[i] = word[:j] + word[j + 1 :]
        elif how == "double":
            tokens[i] = word[: j + 1] + word[j:]
        else:
            tokens[i] = word[:j] + new + word[j:]
    elif kind == "add":
        tokens[i:i] = [rng.choice(vocabulary), " "]
    elif kind == "remove":
        # The word and the whitespace after it (or before it, at the end).
        if i + 1 < len(tokens):
            del tokens[i : i + 2]
        else:
            del tokens[i - 1 : i + 1]
    else:
        after = [j for j in words if j > i]
        if not after:
            return edit(rng, text, kind, vocabulary)
        j = after[0]
        tokens[i], tokens[j] = tokens[j], tokens[i]
    changed = "".join(tokens)
    return changed if changed != text else edit(rng, text, kind, vocabulary)


def v2_match(a: str, b: str) -> bool:
    return a == b or compare_v2(a, b) >= V2_MATCH_THRESHOLD


def shingles(text: str, k: int = 5) -> set[int]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {hash(tuple(words[i : i + k])) for i in range(max(len(words) - k + 1, 1))}


def jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def edit_rates(rng: random.Random, texts: list[str], vocabulary: list[str]) -> dict[str, tuple]:
    """Per edit kind: (pairs, v1 equal, v2 equal, v2 match, lowest v2 score)."""
    rows = {}
    for kind in KINDS:
        n = v1 = v2_equal = v2_matched = 0
        low = 100
        for text in texts:
            other = edit(rng, text, kind, vocabulary)
            n += 1
            v1 += checksum(text) == checksum(other)
            a, b = checksum_v2(text), checksum_v2(other)
            v2_equal += a == b
            v2_matched += v2_match(a, b)
            low = min(low, 100 if a == b else compare_v2(a, b))
        rows[kind] = (n, v1, v2_equal, v2_matched, low)
    return rows


def print_rates(title: str, rows: dict[str, tuple]) -> None:
    print(f"\n{title}")
    print(f"  {'edit':9} {'pairs':>6} {'v1 equal':>10} {'v2 equal':>10} {'v2 match':>10}  lowest")
    total = [0, 0, 0, 0]
    for kind, (n, v1, eq, matched, low) in rows.items():
        total = [total[0] + n, total[1] + v1, total[2] + eq, total[3] + matched]
        print(
            f"  {kind:9} {n:6} {100 * v1 / n:9.1f}% {100 * eq / n:9.1f}% "
            f"{100 * matched / n:9.1f}%  {low:5}"
        )
    n, v1, eq, matched = total
    print(f"  {'all':9} {n:6} {100 * v1 / n:9.1f}% {100 * eq / n:9.1f}% {100 * matched / n:9.1f}%")


def public_pairs() -> None:
    lines = (CONFORMANCE / "pairs.tsv").read_text().splitlines()[1:]
    counts: Counter[tuple[str, str]] = Counter()
    for line in lines:
        base, variant, kind, java_equal, _ = line.split("\t")
        a, b = ((CONFORMANCE / "inputs" / n).read_bytes() for n in (base, variant))
        ta, tb = decode_like_java(a), decode_like_java(b)
        v1 = checksum(ta) == checksum(tb)
        assert v1 == (java_equal == "yes"), (base, variant)
        counts[kind, "pairs"] += 1
        counts[kind, "v1"] += v1
        counts[kind, "v2"] += v2_match(checksum_v2(ta), checksum_v2(tb))
    print("\npublic pairs (conformance/pairs.tsv; v1 as the Java)")
    for kind in ("spelling", "add", "remove"):
        n = counts[kind, "pairs"]
        print(
            f"  {kind:9} {n:3} pairs: v1 equal {counts[kind, 'v1']}/{n}, v2 match "
            f"{counts[kind, 'v2']}/{n}"
        )


def false_matches(docs: list[str], real: bool) -> tuple[int, int, int, int]:
    """(pairs, v2 matches, of which near-duplicates, highest score of a false match)."""
    digests = [checksum_v2(d) for d in docs]
    pieces = [set() for _ in docs]
    pairs = matches = near = 0
    worst = 0
    for i, j in itertools.combinations(range(len(docs)), 2):
        pairs += 1
        value = compare_v2(digests[i], digests[j])
        if digests[i] != digests[j] and value < V2_MATCH_THRESHOLD:
            continue
        matches += 1
        if real:
            if not pieces[i]:
                pieces[i] = shingles(docs[i])
            if not pieces[j]:
                pieces[j] = shingles(docs[j])
            if jaccard(pieces[i], pieces[j]) >= 0.5:
                near += 1
                continue
        worst = max(worst, value)
    return pairs, matches, near, worst


def throughput(text: str) -> tuple[float, float]:
    size = len(text.encode())
    rates = []
    for function in (checksum, checksum_v2):
        best = math.inf
        for _ in range(3):
            start = time.perf_counter()
            function(text)
            best = min(best, time.perf_counter() - start)
        rates.append(size / best / 1e6)
    return rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=200, help="generated texts per edit kind")
    parser.add_argument("--unrelated", type=int, default=300, help="generated unrelated texts")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    docs = real_documents()
    counts = Counter(w for _, d in docs for w in re.findall(r"[A-Za-z]+", d))
    vocabulary = [w for w, _ in counts.most_common(20000)]
    weights = [c for _, c in counts.most_common(20000)]
    print(f"v2 match threshold: {V2_MATCH_THRESHOLD}; {len(docs)} distinct real documents")

    def length() -> int:
        return int(math.exp(rng.uniform(math.log(50), math.log(5000))))

    texts = [generated_text(rng, vocabulary, weights, length()) for _ in range(args.texts)]
    print_rates("generated texts, 50-5000 words", edit_rates(rng, texts, vocabulary))
    real = [d for _, d in docs if len(re.findall(r"[A-Za-z]{2,}", d)) >= 50]
    print_rates(
        f"real documents of 50 words or more ({len(real)})", edit_rates(rng, real, vocabulary)
    )
    public_pairs()

    unrelated = [generated_text(rng, vocabulary, weights, length()) for _ in range(args.unrelated)]
    pairs, matches, _, worst = false_matches(unrelated, real=False)
    print(
        f"\nunrelated generated texts: {matches} v2 matches in {pairs} pairs "
        f"({100 * matches / pairs:.4f}%)"
    )
    texts_only = [d for _, d in docs]
    pairs, matches, near, worst = false_matches(texts_only, real=True)
    false = matches - near
    print(
        f"distinct real documents: {matches} v2 matches in {pairs} pairs, {near} of them "
        f"near-duplicates (5-gram Jaccard >= 0.5); false matches {false} "
        f"({100 * false / pairs:.4f}%), highest false score {worst}"
    )

    prose = []
    total = 0
    while total < 20_000_000:
        piece = generated_text(rng, vocabulary, weights, 5000)
        prose.append(piece)
        total += len(piece)
    v1_rate, v2_rate = throughput("\n".join(prose))
    print(
        f"\nthroughput on {total / 1e6:.1f} MB of generated prose: checksum {v1_rate:.1f} MB/s, "
        f"checksum_v2 {v2_rate:.1f} MB/s"
    )


if __name__ == "__main__":
    main()
