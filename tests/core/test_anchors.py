"""Learned anchors: learning rules, matching against a naive search, the file format."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sif.core.anchors import (
    AnchorSet,
    anchor_select,
    find_anchors,
    learn_anchors,
    qgram_codes,
)
from sif.core.rolling import karp_rabin_at, mix64
from sif.core.sampling import degenerate_at

WORDS = (
    b"the of and to in is that for it as was with be by on not he this are or his from at "
    b"which but have an they you were her she there been one all we their has would when "
    b"character window anchor finger print similar file system table index query sample"
).split()


def text(seed: int, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    words = rng.choice(len(WORDS), size // 4)
    raw = b" ".join(WORDS[i] for i in words)[:size]
    return np.frombuffer(raw, dtype=np.uint8)


@pytest.fixture(scope="module")
def learned() -> AnchorSet:
    return learn_anchors([text(s, 50_000) for s in range(20)], density=1 / 256)


def test_learned_anchors_follow_the_rules(learned: AnchorSet) -> None:
    assert len(learned.anchors) >= 2
    for a in learned.anchors:
        assert len(a) == 4
        assert not any(a[q:] == a[:-q] for q in (1, 2))  # not periodic
    for a in learned.anchors:
        for b in learned.anchors:
            if a != b:
                assert not any(a[s:] == b[: 4 - s] for s in range(1, 4))  # no overlaps
    # "Not too common": no anchor carries more than 1/16 of the density on the sample.
    sample = np.concatenate([text(s, 50_000) for s in range(20)])
    codes = qgram_codes(sample, 4)
    for code in learned.codes():
        assert (codes == code).sum() / len(codes) <= (1 / 256) / 16 + 1e-9


def test_learned_density_holds_on_fresh_text(learned: AnchorSet) -> None:
    assert abs(learned.density * 256 - 1) < 0.1
    fresh = text(999, 400_000)
    starts, _ = anchor_select(fresh, learned)
    assert abs(len(starts) / len(fresh) / learned.density - 1) < 0.1


@settings(deadline=None, max_examples=40)
@given(st.lists(st.sampled_from([b"acte", b"char", b"ract", b"xx", b"e", b" "]), max_size=60))
def test_find_anchors_equals_naive_search(pieces: list[bytes]) -> None:
    anchors = AnchorSet((b"acte", b"char"), 4)
    data = b"".join(pieces)
    naive = sorted(i for a in anchors.anchors for i in range(len(data)) if data.startswith(a, i))
    assert find_anchors(np.frombuffer(data, dtype=np.uint8), anchors).tolist() == naive


def test_anchor_windows_are_hashed_and_degenerate_ones_dropped() -> None:
    anchors = AnchorSet((b"acte",), 4)
    raw = b"character " * 10 + b"acte" * 20 + b"the actor acted"
    data = np.frombuffer(raw, dtype=np.uint8)
    starts, values = anchor_select(data, anchors, 20, 4)
    occurrences = find_anchors(data, anchors)
    fit = occurrences[occurrences <= len(raw) - 20]
    expected = fit[~degenerate_at(data, fit, 20, 4)]
    assert starts.tolist() == expected.tolist()
    assert len(expected) < len(fit)  # the run of "acte" is periodic
    assert np.array_equal(values, mix64(karp_rabin_at(data, starts, 20)))


def test_json_round_trip_and_digest(learned: AnchorSet) -> None:
    again = AnchorSet.from_json(learned.to_json())
    assert again == learned
    assert again.digest == learned.digest
    assert AnchorSet((b"abcd",)).digest != AnchorSet((b"abce",)).digest


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"format": "other"}',
        '{"format": "sif-anchors", "version": 99, "length": 4, "anchors": []}',
        '{"format": "sif-anchors", "version": 1, "length": 4, "anchors": ["zz"]}',
        '{"format": "sif-anchors", "version": 1, "length": 4, "anchors": ["61626364"],'
        ' "digest": "0"}',
    ],
)
def test_bad_anchor_files_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        AnchorSet.from_json(text)


def test_bad_sets_are_refused() -> None:
    with pytest.raises(ValueError):
        AnchorSet((b"abc", b"abcd"), 4)
    with pytest.raises(ValueError):
        AnchorSet((b"bcde", b"abcd"), 4)
    with pytest.raises(ValueError):
        AnchorSet((), 4)
    with pytest.raises(ValueError):
        learn_anchors([np.frombuffer(b"a" * 1000, dtype=np.uint8)] * 3)
