"""The fingerprint glue: parameters, schemes, small files, streaming equals whole."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sif
from sif.core.anchors import AnchorSet
from sif.core.sampling import degenerate_mask
from sif.errors import ConfigError, InputError
from sif.fingerprint import (
    FingerprintParams,
    fingerprint,
    fingerprint_detail,
    fingerprint_file,
    learn_anchors_from_files,
    load_anchors,
    make_params,
    save_anchors,
)

ANCHORS = AnchorSet((b" the", b"and ", b"ing ", b"tion"), 4, 1 / 256)
SCHEMES = [
    ("winnow", {}),
    ("winnow", {"min_fingerprints": 12, "k": 6}),
    ("sif94", {"k": 4}),
    ("sif94", {"min_fingerprints": 12, "modulus_bits": 32}),
    ("anchors", {"anchors": ANCHORS}),
]


SYLLABLES = b"the and na tion ma king of a ring to sta thing un der pro gram file sys tem".split()
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in (b"", b"s", b"ed", b"ing ")]


def prose(seed: int, size: int) -> bytes:
    """Word salad over a few thousand words: text-like, reproducible."""
    rng = np.random.default_rng(seed)
    return b" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size // 4 + 1))[:size]


def test_sif_fingerprint_is_the_module_and_fingerprint_file_is_exported() -> None:
    # ``sif.fingerprint`` names the module (as ``sif.walk`` does): the function is
    # ``sif.fingerprint.fingerprint``, not re-exported from ``sif``.
    import types

    assert isinstance(sif.fingerprint, types.ModuleType) and not callable(sif.fingerprint)
    assert "fingerprint" not in sif.__all__
    data = prose(0, 5000)
    assert np.array_equal(sif.fingerprint.fingerprint(data), fingerprint(data))
    assert sif.fingerprint_file is fingerprint_file


def test_default_params_are_the_papers_numbers() -> None:
    p = make_params()
    assert (p.scheme, p.window, p.winnow_window, p.max_period) == ("winnow", 50, 511, 8)
    assert p.density == 1 / 256
    assert p.guaranteed_run == 560
    s = make_params("sif94")
    assert (s.window, s.k, s.modulus_bits) == (50, 8, 30)
    assert s.density == 1 / 305


def test_params_are_canonical_hashable_and_serialisable() -> None:
    p = make_params("winnow", k=8)
    assert p == make_params("winnow", winnow_window=511) == FingerprintParams()
    assert len({p, FingerprintParams(), make_params("sif94")}) == 2
    assert p.key() == (
        '{"max_period":8,"min_fingerprints":0,"scheme":"winnow","version":1,'
        '"window":50,"winnow_window":511}'
    )
    for q in (p, make_params("sif94", modulus_bits=32), make_params("anchors", anchors=ANCHORS)):
        assert FingerprintParams.from_dict(q.to_dict()) == q


@pytest.mark.parametrize(
    "scheme, params",
    [
        ("nope", {}),
        ("winnow", {"window": 1}),
        ("winnow", {"max_period": 26}),
        ("winnow", {"modulus_bits": 31}),
        ("winnow", {"k": 8, "winnow_window": 511}),
        ("sif94", {"k": 30}),
        ("sif94", {"winnow_window": 5}),
        ("sif94", {"colour": "red"}),
        ("anchors", {}),
        ("winnow", {"min_fingerprints": -1}),
    ],
)
def test_bad_params_are_refused_before_work(scheme: str, params: dict) -> None:
    with pytest.raises(ConfigError):
        fingerprint(b"x" * 100, scheme, **params)


def test_anchors_need_the_matching_set() -> None:
    p = make_params("anchors", anchors=ANCHORS)
    with pytest.raises(ConfigError):
        fingerprint(b"x" * 100, p)
    with pytest.raises(ConfigError):
        fingerprint(b"x" * 100, p, anchors=AnchorSet((b"abcd",)))
    with pytest.raises(ConfigError):
        fingerprint(b"x" * 100, "anchors", anchors=ANCHORS, min_fingerprints=5)


@pytest.mark.parametrize("scheme, params", SCHEMES)
def test_identical_content_identical_fingerprints(scheme: str, params: dict) -> None:
    data = prose(1, 20_000)
    a = fingerprint(data, scheme, **params)
    b = fingerprint(bytearray(data), scheme, **params)
    c = fingerprint(np.frombuffer(data, dtype=np.uint8).copy(), scheme, **params)
    assert a.dtype == np.uint64
    assert len(a) > 0
    assert np.array_equal(a, b) and np.array_equal(a, c)


@settings(deadline=None, max_examples=25)
@given(
    st.integers(0, 10_000),
    st.integers(0, 6000),
    st.integers(1, 3000),
    st.sampled_from(range(len(SCHEMES))),
)
def test_streaming_equals_whole_file(seed: int, size: int, block: int, which: int) -> None:
    scheme, params = SCHEMES[which]
    data = prose(seed, size)
    whole = fingerprint_detail(data, scheme, **params)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f"
        path.write_bytes(data)
        streamed = fingerprint_file(path, scheme, block_size=block, **params)
    assert np.array_equal(streamed, whole.values)


def test_streaming_a_large_file_in_small_blocks(tmp_path: Path) -> None:
    data = prose(5, 300_000) + bytes(
        np.random.default_rng(5).integers(0, 256, 200_000, dtype=np.uint8)
    )
    path = tmp_path / "big"
    path.write_bytes(data)
    for scheme, params in SCHEMES:
        whole = fingerprint(data, scheme, **params)
        for block in (777, 65_536):
            assert np.array_equal(fingerprint_file(path, scheme, block_size=block, **params), whole)


@settings(deadline=None, max_examples=40)
@given(st.binary(min_size=0, max_size=3000), st.integers(1, 40))
def test_small_file_floor_holds_for_winnow(data: bytes, n: int) -> None:
    arr = np.frombuffer(data, dtype=np.uint8)
    m = len(data) - 50 + 1
    got = fingerprint(data, min_fingerprints=n)
    if m > 0 and not degenerate_mask(arr, 50, 8).any():
        assert len(got) >= min(n, m)


def test_small_file_mode_adds_fingerprints_only_to_small_files() -> None:
    small, large = prose(2, 2000), prose(3, 200_000)
    assert len(fingerprint(small, min_fingerprints=20)) >= 20
    assert len(fingerprint(small)) < 20
    assert np.array_equal(fingerprint(large, min_fingerprints=20), fingerprint(large))
    assert len(fingerprint(small, "sif94", min_fingerprints=20)) > len(fingerprint(small, "sif94"))


def test_offsets_point_at_the_windows() -> None:
    data = prose(4, 50_000)
    detail = fingerprint_detail(data)
    assert np.array_equal(detail.values, fingerprint(data))
    assert (np.diff(detail.offsets) > 0).all()
    assert detail.offsets[-1] <= len(data) - 50
    again = fingerprint_detail(data[detail.offsets[3] :])  # a suffix keeps later windows
    assert set(detail.values[10:-10].tolist()) <= set(again.values.tolist())


def test_density_on_random_data() -> None:
    data = np.random.default_rng(3).integers(0, 256, 2 << 20, dtype=np.uint8)
    for scheme in ("winnow", "sif94"):
        p = make_params(scheme)
        assert p.density is not None
        assert abs(len(fingerprint(data, p)) / len(data) / p.density - 1) < 0.1


def test_anchor_files_round_trip_and_errors(tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"t{i}.txt").write_bytes(prose(10 + i, 60_000))
    (tmp_path / "bin").write_bytes(b"\0" * 1000)
    paths = sorted(str(p) for p in tmp_path.iterdir())
    warnings: list[object] = []
    learned = learn_anchors_from_files(
        [*paths, str(tmp_path / "missing")], on_warning=warnings.append
    )
    assert len(warnings) == 1
    out = tmp_path / "anchors.json"
    save_anchors(learned, out)
    again = load_anchors(out)
    assert again == learned
    fp = fingerprint(prose(99, 100_000), "anchors", anchors=again)
    assert len(fp) > 100
    out.write_text("garbage")
    with pytest.raises(InputError):
        load_anchors(out)
    with pytest.raises(InputError):
        load_anchors(tmp_path / "missing")


def test_blocks_of_a_large_input_join_up_to_the_core_result() -> None:
    from sif.core.anchors import anchor_select
    from sif.core.sampling import sif94_select, winnow_select

    data = prose(8, 2_600_000)  # more than two internal blocks
    arr = np.frombuffer(data, dtype=np.uint8)
    got = fingerprint_detail(data)
    starts, values = winnow_select(arr, 50, 511, 8)
    assert np.array_equal(got.offsets, starts) and np.array_equal(got.values, values)
    got = fingerprint_detail(data, "sif94")
    starts, values = sif94_select(arr, 50, 8, 30)
    assert np.array_equal(got.offsets, starts) and np.array_equal(got.values, values)
    got = fingerprint_detail(data, "anchors", anchors=ANCHORS)
    starts, values = anchor_select(arr, ANCHORS)
    assert np.array_equal(got.offsets, starts) and np.array_equal(got.values, values)


def test_bulk_work_buys_numba_from_the_first_input() -> None:
    """After buy_jit (a large index run), a small input goes to numba; its values agree."""
    import subprocess
    import sys

    code = (
        "import numpy as np, sif.fingerprint as f\n"
        "data = bytes(range(256)) * 40\n"
        "before = f._use_jit(len(data)); a = f.fingerprint(data)\n"
        "f.buy_jit()\n"
        "after = f._use_jit(len(data)); b = f.fingerprint(data)\n"
        "print(before, after, bool(np.array_equal(a, b)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True"]
