"""Generated corpora for tests: source-like text, unrelated from one seed to the next.

Tests must not read the host's files (the running Python's standard library
differs between hosts and may not be there as source). :func:`source` makes a
Python-like module of about ``size`` bytes from a seed: functions, classes,
comments and string literals over identifiers drawn at random, so that two
seeds share no 50-byte window beyond chance, while one module is as
repetitive as code is (keywords, indentation, ``self.``).
"""

from __future__ import annotations

import random
from pathlib import Path

_KEYWORDS = ("if", "elif", "while", "for", "return", "yield", "assert", "raise")
_OPS = ("+", "-", "*", "//", "%", "|", "&", "^", "<<", ">>")
_SYLLABLES = tuple(
    c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")
)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))


def _expr(rng: random.Random, names: list[str], depth: int = 0) -> str:
    roll = rng.random()
    if depth > 2 or roll < 0.3:
        return rng.choice(names) if rng.random() < 0.7 else str(rng.randint(0, 99999))
    if roll < 0.55:
        return f"{_expr(rng, names, depth + 1)} {rng.choice(_OPS)} {_expr(rng, names, depth + 1)}"
    if roll < 0.8:
        args = ", ".join(_expr(rng, names, depth + 1) for _ in range(rng.randint(0, 3)))
        return f"{rng.choice(names)}({args})"
    return f"self.{rng.choice(names)}[{_expr(rng, names, depth + 1)}]"


def _function(rng: random.Random, indent: str) -> list[str]:
    names = [_word(rng) for _ in range(rng.randint(4, 9))]
    params = ", ".join(names[: rng.randint(0, 3)])
    lines = [f"{indent}def {_word(rng)}_{_word(rng)}({params}):"]
    lines.append(f'{indent}    """{" ".join(_word(rng) for _ in range(rng.randint(3, 12)))}."""')
    for _ in range(rng.randint(2, 12)):
        roll = rng.random()
        body = indent + "    "
        if roll < 0.45:
            lines.append(f"{body}{rng.choice(names)} = {_expr(rng, names)}")
        elif roll < 0.7:
            kw = rng.choice(_KEYWORDS[:4])
            lines.append(f"{body}{kw} {_expr(rng, names)}:")
            lines.append(f"{body}    {rng.choice(names)} = {_expr(rng, names)}")
        elif roll < 0.85:
            lines.append(f"{body}# {' '.join(_word(rng) for _ in range(rng.randint(2, 10)))}")
        else:
            lines.append(f'{body}{rng.choice(names)} = "{_word(rng)} {_word(rng)}"')
    lines.append(f"{indent}    return {_expr(rng, names)}")
    lines.append("")
    return lines


def source(seed: int, size: int = 40_000) -> bytes:
    """A Python-like module of at least ``size`` bytes (cut there), the same for one seed."""
    rng = random.Random(f"sif-corpus-{seed}")
    lines = [f'"""{" ".join(_word(rng) for _ in range(12))}."""', "", "import os", ""]
    total = sum(len(line) + 1 for line in lines)
    while total < size:
        if rng.random() < 0.2:
            block = [f"class {_word(rng).capitalize()}{_word(rng).capitalize()}:", ""]
            for _ in range(rng.randint(1, 4)):
                block += _function(rng, "    ")
        else:
            block = _function(rng, "")
        block.append("")
        lines += block
        total += sum(len(line) + 1 for line in block)
    return "\n".join(lines).encode()[:size]


def source_tree(root: Path, files: int, seed: int = 0) -> list[Path]:
    """``files`` modules of 2 to 40 KB under ``root`` (a few directories); their paths."""
    rng = random.Random(seed)
    paths = []
    for i in range(files):
        path = root / f"pkg{i % 16}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source(seed * 100_003 + i, rng.randint(2_000, 40_000)))
        paths.append(path)
    return paths
