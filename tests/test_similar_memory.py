"""``sif similar``'s memory bounds change no result: packed columns, tiny batches and partitions."""

from __future__ import annotations

import importlib
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sif.index.pairs as pairs_mod
import sif.similar.score as score_mod
from sif.core.packed import Labels, PackedBytes, labels, packed
from sif.index import open_store
from sif.index.build import DEFAULT_PARAMS
from sif.index.memory import MemoryIndex
from sif.index.pairs import walked_rows
from sif.index.pairstore import pair_store
from sif.similar import SimilarOptions, find_similar
from sif.similar.run import _columnar
from sif.walk import WalkOptions
from test_similar_pairstore import described, family_tree
from textgen import text

collation = importlib.import_module("sif.similar.collate")

byte_strings = st.lists(st.binary(max_size=12), max_size=40)


@settings(max_examples=60, deadline=None)
@given(items=byte_strings, data=st.data())
def test_packed_bytes_index_as_a_list_of_bytes(items: list[bytes], data: st.DataObject) -> None:
    p = PackedBytes.of(items)
    assert len(p) == len(items) and list(p) == items and p == items
    for i in range(-len(items), len(items)):
        assert p[i] == items[i] and type(p[i]) is bytes
    rows = np.array(data.draw(st.lists(st.integers(0, max(len(items) - 1, 0)))), dtype=np.int64)
    rows = rows[: len(rows) if items else 0]
    sub = p[rows]
    assert list(sub) == [items[r] for r in rows.tolist()]
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items))))
    assert list(p[mask.astype(bool)]) == [x for x, m in zip(items, mask, strict=True) if m]
    assert list(p[1::2]) == items[1::2]
    # A subset pickles as its own items only, and compacts a few items at a time.
    back = pickle.loads(pickle.dumps(sub))
    assert list(back) == list(sub) and len(back.data) <= sum(len(items[r]) for r in rows.tolist())
    assert list(sub.compact(batch=3)) == list(sub)
    assert packed(np.array(items, dtype=object)) == items and packed(p) is p


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.sampled_from(["text", "binary", "raw", "markup"]), max_size=30))
def test_labels_index_as_a_list_of_strings(items: list[str]) -> None:
    lab = labels(np.array(items, dtype=object))
    assert list(lab) == items and len(lab) == len(items)
    assert all(lab[i] == items[i] for i in range(-len(items), len(items)))
    rows = np.arange(len(items))[::-1]
    assert list(lab[rows]) == items[::-1]
    assert list(pickle.loads(pickle.dumps(lab))) == items
    assert labels(lab) is lab and isinstance(lab[rows], Labels)


names = st.binary(min_size=1, max_size=6).map(lambda b: b"/r/" + b.replace(b"\0", b"_"))


@settings(max_examples=60, deadline=None)
@given(files=st.lists(names, max_size=30, unique=True), data=st.data())
def test_walked_rows_are_the_files_of_the_walk(files: list[bytes], data: st.DataObject) -> None:
    # Walked paths are str (undecodable bytes as surrogates), in any order, with extras.
    walk = data.draw(st.lists(st.sampled_from(files), unique=True)) if files else []
    extra = data.draw(st.lists(names, max_size=5))
    walked = [os.fsdecode(b) for b in walk + extra]
    got = walked_rows(PackedBytes.of(files), walked)
    assert got.tolist() == [f in set(walk) | set(extra) for f in files]


def mixed_tree(root: Path) -> None:
    """Families of versions, tiny copies, binaries, and zip members (an origin of their own)."""
    family_tree(root)
    with zipfile.ZipFile(root / "z.zip", "w") as zf:
        zf.writestr("m.txt", text(100, 5000) + text(7, 600))
        zf.writestr("n.txt", text(101, 5000) + text(8, 600))


def test_a_packed_scope_holds_the_columns_of_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed_tree(tmp_path / "t")
    root = str(tmp_path / "t")
    find_similar([root], tmp_path / "idx", options=SimilarOptions(exact=False), jobs=1)
    memory = MemoryIndex()
    find_similar([root], store=memory, options=SimilarOptions(exact=False), jobs=1)
    monkeypatch.setattr(pairs_mod, "FETCH_ROWS", 2)  # many batches
    ps = pair_store(open_store(tmp_path / "idx"))
    try:
        for walked in (None, [p for p in _walk(root) if not p.endswith(".bin")]):
            disk = _columnar(ps.scope(ps.params_id(DEFAULT_PARAMS), [root], walked=walked))
            mem = _columnar(memory.scope(memory.params_id(DEFAULT_PARAMS), [root], walked=walked))
            assert isinstance(disk["path"], PackedBytes) and isinstance(disk["kind"], Labels)
            assert set(disk) == set(mem)
            for k in disk:
                assert list(disk[k]) == list(mem[k]), k
            members = [o for p, o in zip(disk["path"], disk["origin"], strict=True) if p != o]
            assert members and all(o.endswith(b"/z.zip") for o in members)
            assert (walked is None) == any(p.endswith(b".bin") for p in disk["path"])
    finally:
        ps.close()
        memory.close()  # its spill directory, in the system's temp dir


def _walk(root: str) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]


def test_tiny_batches_partitions_and_slices_give_the_results_of_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed_tree(tmp_path / "t")
    walk = WalkOptions(exclude=("*.bin",))
    opts = SimilarOptions(threshold=10, max_df=5)
    whole = find_similar([tmp_path / "t"], tmp_path / "one", options=opts, walk=walk, jobs=1)
    monkeypatch.setattr(pairs_mod, "FETCH_ROWS", 1)
    monkeypatch.setattr(collation, "PARTITION_ROWS", 3)
    monkeypatch.setattr(score_mod, "SCORE_SLICE", 2)
    tiny = find_similar([tmp_path / "t"], tmp_path / "two", options=opts, walk=walk, jobs=1)
    assert described(tiny) == described(whole) and len(whole.pairs) > 10
    assert [(g.reference.path, len(g.members)) for g in tiny.groups] == [
        (g.reference.path, len(g.members)) for g in whole.groups
    ]
    assert not any(p.a.path.endswith(".bin") for p in whole.pairs)
    assert any("z.zip!/" in p.a.path + p.b.path for p in whole.pairs)
    # A re-threshold reuses the stored pairs with packed columns too.
    again = find_similar([tmp_path / "t"], tmp_path / "two", options=opts, walk=walk, jobs=1)
    assert again.stats.reused and described(again) == described(whole)


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(
        st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 9)), max_size=12),
        max_size=5,
    )
)
def test_the_running_sum_of_partial_pairs_is_their_merge(
    parts: list[list[tuple[int, int, int]]],
) -> None:
    def cols(rows: list[tuple[int, int, int]]) -> dict[str, np.ndarray]:
        uniq = {(a, b): s for a, b, s in rows if a < b}
        keys = sorted(uniq)
        c = {
            "a": np.array([k[0] for k in keys], dtype=np.uint32),
            "b": np.array([k[1] for k in keys], dtype=np.uint32),
            "shared": np.array([uniq[k] for k in keys], dtype=np.uint32),
        }
        c["hits_a"], c["hits_b"] = c["shared"] * 2, c["shared"] * 3
        return c

    pieces = [cols(p) for p in parts]
    want = collation.merge_pairs(pieces)
    total = collation.merge_pairs([])
    for p in pieces:
        total = collation.add_pairs(total, {k: v.copy() for k, v in p.items()})
    for k in collation.PAIR_KEYS:
        assert total[k].tolist() == want[k].tolist(), k


def test_the_workers_end_before_the_result_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exact pass's workers have exited when the pairs are decided and the result is
    built (the run's memory peak at a million files), after a full run and after one
    that reuses stored pairs; the result is that of one job."""
    import sif.executors.local as local_mod
    import sif.similar.run as run_mod

    family_tree(tmp_path / "t")
    opts = SimilarOptions(threshold=10)
    pools: list[local_mod.WorkerPool] = []
    forked = local_mod.fork_pool

    def keep(jobs: int) -> local_mod.WorkerPool | None:
        pool = forked(jobs)
        if pool is not None:
            pools.append(pool)
        return pool

    alive_at_result: list[list[int | None]] = []
    result = run_mod._result

    def at_result(*args: object, **kwargs: object) -> object:
        alive_at_result.append([p.exitcode for pool in pools for p in pool._workers])
        return result(*args, **kwargs)  # type: ignore[arg-type]

    decided: list[list[int | None]] = []
    decide = run_mod.decide

    def at_decide(*args: object, **kwargs: object) -> object:
        decided.append([p.exitcode for pool in pools for p in pool._workers])
        return decide(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_mod, "fork_pool", keep)
    monkeypatch.setattr(run_mod, "_result", at_result)
    monkeypatch.setattr(run_mod, "decide", at_decide)
    one = find_similar([tmp_path / "t"], tmp_path / "i1", options=opts, jobs=1)
    two = find_similar([tmp_path / "t"], tmp_path / "i2", options=opts, jobs=2)
    again = find_similar([tmp_path / "t"], tmp_path / "i2", options=opts, jobs=2)
    assert again.stats.reused and not one.stats.reused
    assert described(two) == described(one) == described(again) and len(one.pairs) > 5
    assert len(pools) == 2 and len(alive_at_result) == 3
    assert alive_at_result[0] == []  # one job: no worker
    # Every run decides through run.decide: the full ones and the reuse.
    assert len(decided) == 3 and decided[0] == []
    for codes in alive_at_result[1:] + decided[1:]:
        assert codes and all(c is not None for c in codes), codes  # every worker has exited
