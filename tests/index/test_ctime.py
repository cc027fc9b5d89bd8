"""The re-read decision compares the ctime: a file rewritten with its mtime restored
(``os.utime``, as ``cp -p``, ``rsync -t`` or ``tar`` do) is read again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from sif.index import build_index, open_reader, open_store
from sif.query import query_files
from treeutil import write


def text(seed: int, n: int = 20_000) -> bytes:
    return np.random.default_rng(seed).integers(97, 123, n, np.uint8).tobytes()


def test_a_rewrite_with_the_mtime_restored_is_read_again(tmp_path: Path) -> None:
    tree, idx = tmp_path / "t", tmp_path / "idx"
    target = tree / "a.txt"
    write(target, text(1))
    write(tree / "other.txt", text(2))
    build_index([tree], idx, jobs=1)
    before = os.stat(target)
    time.sleep(0.01)  # the ctime moves on (a coarse clock would hide it)
    write(target, text(3))  # same size, other content
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(target)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    stats = build_index([tree], idx, jobs=1)
    assert (stats.changed, stats.unchanged, stats.read_paths) == (1, 1, [str(target)])
    probe_new, probe_old = tmp_path / "new.txt", tmp_path / "old.txt"
    write(probe_new, text(3))
    write(probe_old, text(1))
    reader = open_reader(idx)
    try:
        [new] = query_files([probe_new], reader, threshold=50)
        [old] = query_files([probe_old], reader, threshold=50)
    finally:
        reader.close()
    assert [(m.path, m.exact) for m in new.matches] == [(str(target), True)]
    assert old.matches == ()  # the old content is no longer in the index
    with open_store(idx) as store:  # type: ignore[attr-defined]
        row = (
            store.catalog()
            .execute(
                "SELECT ctime_ns FROM files WHERE coalesce(origin, path) = ?", [os.fsencode(target)]
            )
            .fetchone()
        )
    assert row == (after.st_ctime_ns,)
    assert build_index([tree], idx, jobs=1).unchanged == 2  # and then it is unchanged
