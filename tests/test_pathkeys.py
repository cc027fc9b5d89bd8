"""Path keys (sif.pathkeys): keyed BLAKE2b-128 of a path's bytes under an index's secret.

The C hash (sif._treec.path_keys, and the walk's) is held to Python's hashlib byte for
byte; an index's secret is its own, kept in its ``pathkey`` file, checked against the
catalog, and a missing, damaged or foreign one is named in one line and cured by
``--rebuild``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sif import pathkeys
from sif.cli import main
from sif.index.duck import DuckStore
from sif.index.indexdir import PATHKEY, PATHKEY_BYTES
from treeutil import write


def _hashlib_keys(paths: list[bytes], secret: bytes) -> np.ndarray:
    digests = [hashlib.blake2b(p, key=secret, digest_size=16).digest() for p in paths]
    return np.frombuffer(b"".join(digests), dtype="<u8").reshape(-1, 2)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(min_size=0, max_size=400), min_size=1, max_size=20),
    st.binary(min_size=1, max_size=64),
)
def test_the_compiled_keys_are_hashlibs(paths: list[bytes], secret: bytes) -> None:
    assert pathkeys._treec is not None, "sif._treec is not built (pip install -e . builds it)"
    got = pathkeys.path_keys(paths, len(paths), secret)
    assert np.array_equal(got, _hashlib_keys(paths, secret))
    assert [tuple(map(int, k)) for k in got] == [pathkeys.path_key(p, secret) for p in paths]


def test_without_the_extension_the_keys_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [os.urandom(n) for n in range(0, 300, 7)]
    secret = pathkeys.new_secret()
    compiled = pathkeys.path_keys(paths, len(paths), secret)
    monkeypatch.setattr(pathkeys, "_treec", None)
    assert np.array_equal(pathkeys.path_keys(paths, len(paths), secret), compiled)


def test_keys_depend_on_the_secret() -> None:
    paths = [b"/a/b", b"/a/c"]
    one = pathkeys.path_keys(paths, 2, pathkeys.new_secret())
    other = pathkeys.path_keys(paths, 2, pathkeys.new_secret())
    assert not np.array_equal(one, other)


def test_fewer_paths_than_counted_is_an_error() -> None:
    with pytest.raises(ValueError, match="fewer paths"):
        pathkeys.path_keys([b"/a"], 2, pathkeys.new_secret())


def _tree(root: Path) -> None:
    rng = np.random.default_rng(3)
    for i in range(4):
        write(root / f"d{i}" / "f.txt", rng.integers(97, 123, 2000, dtype=np.uint8).tobytes())


def _index(idx: Path, tree: Path, *extra: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["index", "-q", "--index", str(idx), *extra, str(tree)])
    return r.exit_code, r.output


def test_each_index_has_its_own_secret_readable_by_its_owner(tmp_path: Path) -> None:
    _tree(tmp_path / "t")
    for name in ("i1", "i2"):
        code, out = _index(tmp_path / name, tmp_path / "t")
        assert code == 0, out
    one, two = ((tmp_path / n / PATHKEY).read_bytes() for n in ("i1", "i2"))
    assert len(one) == len(two) == PATHKEY_BYTES and one != two
    assert (tmp_path / "i1" / PATHKEY).stat().st_mode & 0o007 == 0  # not for others


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        (lambda p: p.unlink(), "missing"),
        (lambda p: p.write_bytes(b"short"), "5 bytes"),
        (lambda p: p.write_bytes(os.urandom(PATHKEY_BYTES)), "not the secret"),
    ],
)
def test_a_damaged_secret_is_named_and_a_rebuild_cures_it(
    tmp_path: Path, damage: object, cause: str
) -> None:
    _tree(tmp_path / "t")
    idx = tmp_path / "idx"
    assert _index(idx, tmp_path / "t")[0] == 0
    damage(idx / PATHKEY)  # type: ignore[operator]
    write(tmp_path / "t" / "new.txt", b"a new file " * 300)
    code, out = _index(idx, tmp_path / "t")
    lines = out.strip().splitlines()
    assert code != 0 and len(lines) == 1, out
    assert str(idx / PATHKEY) in lines[0] and cause in lines[0] and "--rebuild" in lines[0]
    assert "Traceback" not in out
    code, out = _index(idx, tmp_path / "t", "--rebuild")
    assert code == 0, out
    assert len((idx / PATHKEY).read_bytes()) == PATHKEY_BYTES
    code, out = _index(idx, tmp_path / "t")  # and the index goes on from there
    assert code == 0, out
    assert _paths(idx) == {str(p) for p in (tmp_path / "t").rglob("*.txt")}


def _paths(idx: Path) -> set[str]:
    s = DuckStore(str(idx))
    try:
        rows = s.catalog().execute("SELECT path FROM files").fetchall()
    finally:
        s.close()
    return {os.fsdecode(bytes(p)) for (p,) in rows}
