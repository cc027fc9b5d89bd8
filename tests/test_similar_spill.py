"""The collated pairs wait on disk during the small-file pass (sif.similar.spill)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sif.similar import SimilarOptions, find_similar
from sif.similar import spill as spill_mod
from sif.similar.spill import SpilledColumns, spill
from test_similar_pairstore import described, family_tree
from textgen import text
from treeutil import write

DTYPES = (np.uint32, np.float64, np.uint8, np.int64)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 300).flatmap(lambda n: st.tuples(*(hnp.arrays(d, n) for d in DTYPES))))
def test_spilled_columns_read_back_as_written(tmp_path_factory: Any, arrays: Any) -> None:
    parent = tmp_path_factory.mktemp("spill")
    (parent / "theirs").write_bytes(b"not sif's")  # a file beside: never touched
    cols = {f"c{i}": a for i, a in enumerate(arrays)}
    s = SpilledColumns(cols, str(parent))
    assert os.path.isdir(s.directory) and os.path.dirname(s.directory) == str(parent)
    assert list(s) == list(cols) and len(s) == len(cols)
    for k, a in cols.items():
        assert s[k].dtype == a.dtype and np.array_equal(s[k], a, equal_nan=True)
    back = s.load()
    for k, a in cols.items():
        assert back[k].dtype == a.dtype and np.array_equal(back[k], a, equal_nan=True)
        assert back[k].flags.writeable
    s.remove()
    assert not os.path.exists(s.directory)
    assert sorted(p.name for p in parent.iterdir()) == ["theirs"]


def test_spill_keeps_few_pairs_in_memory_and_moves_many(tmp_path: Path, monkeypatch: Any) -> None:
    cols = {"a": np.arange(10, dtype=np.uint32), "x": np.full(10, np.nan)}
    assert spill(cols, str(tmp_path)) is None
    assert len(cols) == 2 and not list(tmp_path.iterdir())
    monkeypatch.setattr(spill_mod, "SPILL_FROM_PAIRS", 10)
    spilled = spill(cols, str(tmp_path))
    assert spilled is not None and cols == {}  # the caller's dict emptied
    assert np.array_equal(spilled["a"], np.arange(10))
    spilled.remove()


def test_a_spill_that_cannot_be_written_keeps_the_pairs_in_memory(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(spill_mod, "SPILL_FROM_PAIRS", 1)
    cols = {"a": np.arange(5, dtype=np.uint32)}
    (tmp_path / "file").write_bytes(b"")
    assert spill(cols, str(tmp_path / "file")) is None  # not a directory
    assert np.array_equal(cols["a"], np.arange(5))
    from actionutil import tmpfs

    with tmpfs("1m") as where:  # full: the first columns written, then no room
        big = {"a": np.zeros(100_000, dtype=np.uint32), "b": np.zeros(300_000, dtype=np.uint64)}
        assert spill(big, str(where)) is None
        assert len(big["b"]) == 300_000
        assert not list(where.iterdir())  # the partial directory removed


def _tree(root: Path) -> None:
    family_tree(root)
    big = text(9, 40_000)  # small files inside a larger one, sharing no fingerprint
    write(root / "big" / "big.txt", big)
    for i in range(5):
        write(root / "small" / f"s{i}.txt", big[7_000 * i + 100 : 7_000 * i + 250])


def test_find_similar_gives_the_same_pairs_with_the_pairs_spilled(
    tmp_path: Path, monkeypatch: Any
) -> None:
    _tree(tmp_path / "t")
    whole = find_similar([tmp_path / "t"], tmp_path / "i1", options=SimilarOptions(), jobs=1)
    assert whole.stats.small_candidates > 0  # the pass added pairs to the spilled ones
    made: list[str] = []
    real = spill_mod.SpilledColumns.__init__

    def spy(self: SpilledColumns, cols: Any, parent: str) -> None:
        real(self, cols, parent)
        made.append(self.directory)

    monkeypatch.setattr(spill_mod, "SPILL_FROM_PAIRS", 1)
    monkeypatch.setattr(spill_mod.SpilledColumns, "__init__", spy)
    again = find_similar([tmp_path / "t"], tmp_path / "i2", options=SimilarOptions(), jobs=2)
    assert made and not any(os.path.exists(d) for d in made)
    assert described(again) == described(whole)
    assert not [p for p in (tmp_path / "i2" / "tmp").iterdir() if p.name.startswith("sif-pairs")]


def test_an_interrupted_small_pass_leaves_no_spilled_pairs(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from sif.similar import run as run_mod

    _tree(tmp_path / "t")
    monkeypatch.setattr(spill_mod, "SPILL_FROM_PAIRS", 1)

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        assert [p for p in (tmp_path / "i" / "tmp").iterdir() if p.name.startswith("sif-pairs")]
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "small_pass", interrupted)
    with pytest.raises(KeyboardInterrupt):
        find_similar([tmp_path / "t"], tmp_path / "i", options=SimilarOptions(), jobs=1)
    assert not [p for p in (tmp_path / "i" / "tmp").iterdir() if p.name.startswith("sif-pairs")]


def test_a_ctrl_c_inside_spill_leaves_no_directory(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(spill_mod, "SPILL_FROM_PAIRS", 1)

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(spill_mod, "release_memory", interrupted)
    with pytest.raises(KeyboardInterrupt):
        spill({"a": np.arange(5, dtype=np.uint32)}, str(tmp_path))
    assert not list(tmp_path.iterdir())
