"""Generated test data: text that reads like prose or code, the same on every host.

Two texts made from different seeds share no 50-byte window (the words come
from a vocabulary of 4,096 made-up words, drawn anew for each position), so
they stand for unrelated real files; a text with a fixed seed is the same
bytes on every run.
"""

from __future__ import annotations

import random

_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "ch", "qu", "st"]


def _vocabulary() -> list[str]:
    rng = random.Random(1994)
    words: set[str] = set()
    while len(words) < 4096:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


VOCABULARY = _vocabulary()
_PUNCT = [" ", " ", " ", " ", " ", " ", ", ", ". ", "; ", " = ", "(", ") "]


def text(seed: int, size: int) -> bytes:
    """``size`` bytes of generated text (lines under 80 columns), fixed by ``seed``."""
    rng = random.Random(seed)
    out: list[str] = []
    n = 0
    line = 0
    while n < size:
        w = rng.choice(VOCABULARY) + rng.choice(_PUNCT)
        if line + len(w) > 78:
            w = "\n" + w
            line = 0
        out.append(w)
        n += len(w)
        line += len(w)
    return "".join(out).encode()[:size]


def licence(size: int = 3000) -> bytes:
    """A boilerplate header shared by many files (a licence text stands for it)."""
    return text(77_777, size)


def edited(base: bytes, seed: int, every: int) -> bytes:
    """``base`` with a byte changed to ``#`` every ``every`` bytes or so (scattered edits;
    the same edits for the same seed)."""
    rng = random.Random(seed)
    b = bytearray(base)
    for i in range(rng.randrange(every), len(b), every):
        b[i] = ord("#")
    return bytes(b)
