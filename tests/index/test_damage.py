"""A damaged index is named ("index corrupt: PATH (cause); run with --rebuild", exit 3),
never a silent wrong answer, a default or a traceback; ``--rebuild`` recovers.

Real indexes on disk, damaged as a disk or a hostile user would, and the commands run
as processes (``python -m sif``): what a user sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import xxhash

from treeutil import write

Damage = Callable[[Path], Path]  # damages the index, returns the path it damaged


def sif(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sif", *map(str, args)], capture_output=True, text=True
    )


def make_corpus(root: Path) -> None:
    rng = np.random.default_rng(5)
    base = rng.integers(97, 123, 20_000, np.uint8).tobytes()
    write(root / "t" / "a.txt", base)
    write(
        root / "t" / "d" / "b.txt", base[:12_000] + rng.integers(97, 123, 8000, np.uint8).tobytes()
    )
    for i in range(10):
        write(root / "t" / "d" / f"c{i}.txt", rng.integers(97, 123, 5000, np.uint8).tobytes())
    write(root / "q.txt", base)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index made with -k 3, two segments and a dead-id list (c0 changed once)."""
    root = tmp_path_factory.mktemp("pristine")
    make_corpus(root)
    idx = root / "idx"
    assert sif("index", "-q", "-j", "1", "-k", "3", "--index", idx, root / "t").returncode == 0
    write(root / "t" / "d" / "c0.txt", b"changed " * 700)
    assert sif("index", "-q", "-j", "1", "--index", idx, root / "t").returncode == 0
    assert len(os.listdir(idx / "segments")) == 2
    assert [n for n in os.listdir(idx / "manifests") if n.endswith(".dead.npy")]
    return root


def first_segment(idx: Path) -> Path:
    return idx / "segments" / sorted(os.listdir(idx / "segments"))[0]


def seg_file(name: str) -> Damage:
    def pick(idx: Path) -> Path:
        return first_segment(idx) / name

    return pick


def dead_file(idx: Path) -> Path:
    return idx / "manifests" / next(n for n in os.listdir(idx / "manifests") if "dead" in n)


def current_manifest(idx: Path) -> Path:
    return idx / "manifests" / ((idx / "CURRENT").read_text().strip() + ".json")


def emptied(pick: Damage) -> Damage:
    def damage(idx: Path) -> Path:
        path = pick(idx)
        path.write_bytes(b"")
        return path

    return damage


def truncated(pick: Damage) -> Damage:
    def damage(idx: Path) -> Path:
        path = pick(idx)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 100])
        return path

    return damage


def header_garbage(pick: Damage, garbage: bytes) -> Damage:
    def damage(idx: Path) -> Path:
        path = pick(idx)
        data = bytearray(path.read_bytes())
        data[10 : 10 + len(garbage)] = garbage  # after the magic and the header length
        path.write_bytes(bytes(data))
        return path

    return damage


def body_garbage(pick: Damage) -> Damage:
    def damage(idx: Path) -> Path:
        path = pick(idx)
        data = bytearray(path.read_bytes())
        mid = len(data) // 2
        data[mid : mid + 64] = np.random.default_rng(1).integers(0, 256, 64, np.uint8).tobytes()
        path.write_bytes(bytes(data))
        return path

    return damage


def manifest_without_segments(redigest: bool) -> Damage:
    def damage(idx: Path) -> Path:
        path = current_manifest(idx)
        doc = json.loads(path.read_text())
        doc["segments"] = {}
        if redigest:  # a consistent forgery of the digest: the entry counts still tell
            body = {k: v for k, v in doc.items() if k != "digest"}
            doc["digest"] = xxhash.xxh3_128_hexdigest(json.dumps(body, sort_keys=True).encode())
        path.write_text(json.dumps(doc))
        return path

    return damage


def current(content: bytes | None) -> Damage:
    def damage(idx: Path) -> Path:
        path = idx / "CURRENT"
        if content is None:
            path.unlink()
        else:
            path.write_bytes(content)
        return path

    return damage


def deleted(pick: Damage) -> Damage:
    def damage(idx: Path) -> Path:
        path = pick(idx)
        path.unlink()
        return path

    return damage


NPY = ["fp.npy", "fid.npy", "files.npy", "paths_off.npy", "paths_lcp.npy"]
LENGTH_DAMAGE: dict[str, Damage] = {
    "paths.bin emptied": emptied(seg_file("paths.bin")),
    "paths.bin truncated": truncated(seg_file("paths.bin")),
    "fid.npy deleted": deleted(seg_file("fid.npy")),
    "fp.npy truncated": truncated(seg_file("fp.npy")),
    **{f"0-byte {n}": emptied(seg_file(n)) for n in NPY},
    "0-byte gen-N.dead.npy": emptied(dead_file),
    "fp.npy header random": header_garbage(seg_file("fp.npy"), bytes(range(200, 250))),
    "fp.npy header unclosed": header_garbage(seg_file("fp.npy"), b"{'descr': ((((((("),
    "files.npy header other dtype": header_garbage(seg_file("files.npy"), b"{'descr': '<f8'"),
    "fid.npy header bad shape": header_garbage(
        seg_file("fid.npy"), b"{'descr': '|u1', 'fortran_order': False, 'shape': (9999999,), }"
    ),
    "manifest lists no segments": manifest_without_segments(redigest=False),
    "manifest lists no segments, digest forged": manifest_without_segments(redigest=True),
    "CURRENT missing": current(None),
    "CURRENT emptied": current(b""),
    "CURRENT garbage": current(b"\xff\xfe garbage\n"),
}
"""Damage every command must name: it changes a length, a header or the manifest."""

CONTENT_DAMAGE: dict[str, Damage] = {
    "fp.npy body garbage": body_garbage(seg_file("fp.npy")),
    "fid.npy body garbage": body_garbage(seg_file("fid.npy")),
    "files.npy body garbage": body_garbage(seg_file("files.npy")),
}
"""Damage of the same length: found by the checksums (sif index, sif similar, --verify)."""


def assert_corrupt(proc: subprocess.CompletedProcess[str], damaged: Path | None = None) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("sif: error: index corrupt: "), lines[0]
    assert lines[0].endswith("run with --rebuild"), lines[0]
    if damaged is not None:
        assert str(damaged) in lines[0] or str(damaged.parent) in lines[0], lines[0]


def assert_recovered(root: Path, idx: Path, answers: bool = True) -> None:
    """``--rebuild`` makes a sound index of the same parameters; with ``answers``, it also
    gives the pristine index's answers (the rebuild is the same whatever the damage: the
    parametrized tests check those for one kind each, to keep the suite's time)."""
    proc = sif("index", "-q", "-j", "1", "-k", "3", "--rebuild", "--index", idx, root / "t")
    assert proc.returncode == 0, proc.stderr
    if not answers:
        assert sif("index", "--verify", "--index", idx).returncode == 0
        return
    proc = sif("similar", "-j", "1", "-t", "50", "--index", idx, root / "t")
    assert proc.returncode == 0 and "0 files read" in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[2:4] == [
        f"R100 {root}/t/a.txt 20000",
        f"  60 {root}/t/d/b.txt 20000",
    ]
    out = sif("query", "-t", "50", "--index", idx, root / "q.txt").stdout.splitlines()
    assert out[1] == f" 100 {root}/t/a.txt 20000  (exact copy)"
    assert out[2].endswith(f" {root}/t/d/b.txt 20000") and len(out) == 3
    info = sif("index", "--info", "--index", idx).stdout
    assert "winnow w=50 k=3 min-fingerprints=20 normalize=auto" in info  # never k=8


def damaged_copy(pristine: Path, tmp_path: Path, damage: Damage) -> tuple[Path, Path, Path]:
    """A copy of the pristine index (of the pristine tree, never changed), damaged."""
    idx = tmp_path / "idx"
    shutil.copytree(pristine / "idx", idx)
    return pristine, idx, damage(idx)


@pytest.mark.parametrize("kind", sorted(LENGTH_DAMAGE))
def test_damage_is_named_by_every_command_and_rebuild_recovers(
    pristine: Path, tmp_path: Path, kind: str
) -> None:
    root, idx, damaged = damaged_copy(pristine, tmp_path, LENGTH_DAMAGE[kind])
    assert_corrupt(sif("query", "--index", idx, root / "q.txt"), damaged)
    assert_corrupt(sif("similar", "-q", "-j", "1", "--index", idx, root / "t"), damaged)
    assert_corrupt(sif("index", "-q", "-j", "1", "--index", idx, root / "t"), damaged)
    assert_corrupt(sif("index", "--verify", "--index", idx), damaged)
    assert_recovered(root, idx, answers=kind == sorted(LENGTH_DAMAGE)[0])


@pytest.mark.parametrize("kind", sorted(CONTENT_DAMAGE))
def test_same_length_damage_is_found_by_the_checksums(
    pristine: Path, tmp_path: Path, kind: str
) -> None:
    root, idx, damaged = damaged_copy(pristine, tmp_path, CONTENT_DAMAGE[kind])
    query = sif("query", "--index", idx, root / "q.txt")  # lengths only: may not see it
    assert query.returncode in (0, 3) and "Traceback" not in query.stderr, query.stderr
    if query.returncode == 3:
        assert_corrupt(query, damaged)
    assert_corrupt(sif("index", "--verify", "--index", idx), damaged)
    assert_corrupt(sif("index", "-q", "-j", "1", "--index", idx, root / "t"), damaged)
    assert_corrupt(sif("similar", "-q", "-j", "1", "--index", idx, root / "t"), damaged)
    assert_recovered(root, idx, answers=kind == sorted(CONTENT_DAMAGE)[0])


def test_a_sound_index_verifies(pristine: Path, tmp_path: Path) -> None:
    _, idx, _ = damaged_copy(pristine, tmp_path, lambda idx: idx)
    proc = sif("index", "--verify", "--index", idx)
    assert proc.returncode == 0 and "2 segments checked" in proc.stderr, proc.stderr
    assert "12 entries" in proc.stderr


def test_flipped_bytes_of_the_catalog_are_named_never_a_traceback(
    pristine: Path, tmp_path: Path
) -> None:
    root, idx, catalog = damaged_copy(pristine, tmp_path, lambda idx: idx / "catalog.duckdb")
    clean = catalog.read_bytes()
    named = 0
    for i in range(16):
        offset = len(clean) * i // 16 + 7 * i
        data = bytearray(clean)
        data[offset] ^= 0x40
        catalog.write_bytes(bytes(data))
        for cmd in (
            ["index", "-q", "-j", "1", "--index", idx, root / "t"],
            ["similar", "-q", "-j", "1", "--index", idx, root / "t"],
        ):
            proc = sif(*cmd)
            assert proc.returncode in (0, 3), (offset, proc.stderr)
            assert "Traceback" not in proc.stderr, (offset, proc.stderr)
            if proc.returncode == 3:
                assert_corrupt(proc, catalog)
                named += 1
        catalog.write_bytes(clean)
        for name in os.listdir(idx):  # what a run on the damaged catalog may have left
            if name.startswith("catalog.duckdb."):
                os.unlink(idx / name)
    assert named >= 8  # most flips land in blocks that are read
    assert_recovered(root, idx)


def test_a_damaged_dead_list_is_found_and_published_again_by_the_writer(
    pristine: Path, tmp_path: Path
) -> None:
    def ids_garbage(idx: Path) -> Path:  # the ids, not the header: the lengths still agree
        path = dead_file(idx)
        data = path.read_bytes()
        path.write_bytes(data[:-4] + b"\xff\xff\xff\x7f")
        return path

    root, idx, damaged = damaged_copy(pristine, tmp_path, ids_garbage)
    assert_corrupt(sif("index", "--verify", "--index", idx), damaged)
    # The catalog is the record: the writer publishes the dead ids again from it.
    proc = sif("index", "-j", "1", "--index", idx, root / "t")
    assert proc.returncode == 0 and "0 changed, 12 unchanged" in proc.stderr, proc.stderr
    assert sif("index", "--verify", "--index", idx).returncode == 0


@pytest.mark.parametrize("command", ["index", "similar"])
def test_a_damaged_current_never_falls_back_to_the_default_parameters(
    pristine: Path, tmp_path: Path, command: str
) -> None:
    # An index made with -k 3 was re-read with k = 8 beside it: the error was swallowed.
    root, idx, damaged = damaged_copy(pristine, tmp_path, current(b"gen-x\n"))
    assert_corrupt(sif(command, "-q", "-j", "1", "--index", idx, root / "t"), damaged)
    (idx / "CURRENT").write_text(sorted(n for n in os.listdir(idx / "manifests"))[0][:12] + "\n")
    info = sif("index", "--info", "--index", idx).stdout
    assert "1 parameter set" in info and "k=3" in info and "k=8" not in info
