"""Fingerprint values are stored in indexes: these pins, computed before the numpy and
numba paths were split (commit d1717bb), must never change unless PARAMS_VERSION does."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from sif.fingerprint import PARAMS_VERSION, fingerprint_detail

RNG = np.random.default_rng(20240601)
RANDOM = RNG.integers(0, 256, 300_000, dtype=np.uint8).tobytes()
_WORDS = [b"the", b"file", b"similar", b"_" * 60, b"\n", b"ab" * 40, b"x = 1\n", b"fingerprint"]
_WORDS.append(b"\0" * 90)
LOW = b" ".join(_WORDS[i] for i in RNG.integers(0, len(_WORDS), 40_000))

PINS = [
    ("random", {}, 1200, "cafae5664ec1155a"),
    ("random", {"scheme": "sif94"}, 969, "9eaf00f1b18dfac9"),
    ("random", {"k": 5, "max_period": 0}, 9285, "e5c6a8484ff2010c"),
    ("low", {}, 4836, "ad1c5d1ed2c58cbc"),
    ("low", {"scheme": "sif94"}, 7146, "6357b3664610802e"),
    ("low", {"min_fingerprints": 20}, 4836, "ad1c5d1ed2c58cbc"),
    ("low", {"k": 5, "max_period": 0}, 211058, "7f239063671c2036"),
    ("small", {}, 3, "995de45b47cee6ea"),
    ("small", {"min_fingerprints": 20}, 37, "6a5516be5af59fc8"),
    ("small", {"scheme": "sif94", "min_fingerprints": 20}, 20, "8eb80abd9a385dc8"),
]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize(("name", "params", "count", "digest"), PINS)
def test_fingerprints_keep_their_pinned_values(
    name: str, params: dict, count: int, digest: str, jit: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert PARAMS_VERSION == 1
    monkeypatch.setattr("sif.fingerprint._use_jit", lambda total: jit)
    data = {"random": RANDOM, "low": LOW, "small": RANDOM[:1000]}[name]
    fp = fingerprint_detail(data, **params)
    got = hashlib.sha256(fp.values.tobytes() + fp.offsets.tobytes()).hexdigest()[:16]
    assert (len(fp.values), got) == (count, digest)


def test_first_values_are_pinned() -> None:
    fp = fingerprint_detail(RANDOM)
    assert fp.values[:2].tolist() == [0x1C235212B722D07, 0x130ED35E6C0EC86]
