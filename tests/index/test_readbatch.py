"""A run of ``sif index`` takes its workers' batches (``sif.index.scanjobs.ReadBatch``: the
files and their entries as columns) as it took a file's objects: each warning in the order
the files were read, files and bytes counted a file (not an entry), the progress by those
bytes, and a changed file that cannot be read now loses its old entries."""

from __future__ import annotations

import gzip
import io
import os
import zipfile
from pathlib import Path

import duckdb
import pytest

from sif.events import NullProgress, ScanWarning
from sif.index import scanjobs
from sif.index.build import build_index

CORRUPT_GZ = b"\x1f\x8b\x08\x00" + b"not a gzip stream " * 20


def words(seed: int, n: int) -> bytes:
    return b" ".join(b"w%d" % ((seed * 7919 + i * 104729) % 5003) for i in range(n))


def tree(root: Path) -> list[Path]:
    """300 files in one directory (three batches), five corrupt gzip files and a zip of two
    members among them, and a directory of 20 files, 5 of them corrupt (one batch)."""
    made = []
    for i in range(300):
        p = root / "many" / f"f{i:03d}.txt"
        made.append(p)
    for i in (0, 1, 127, 128, 299):
        made[i] = made[i].with_suffix(".gz")
    made[150] = made[150].with_suffix(".zip")
    for i in range(20):
        made.append(root / "one" / (f"g{i:02d}.gz" if i % 4 == 1 else f"g{i:02d}.txt"))
    for k, p in enumerate(made):
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.suffix == ".gz":
            p.write_bytes(CORRUPT_GZ)
        elif p.suffix == ".zip":
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as z:
                z.writestr("in/a.txt", words(1, 900))
                z.writestr("in/b.txt", words(2, 700))
            p.write_bytes(buf.getvalue())
        else:
            p.write_bytes(words(k, 100 + 13 * k))
    return made


class Counting(NullProgress):
    def __init__(self) -> None:
        self.stages: dict[str, int] = {}
        self.current = ""

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        self.current = name
        self.stages.setdefault(name, 0)

    def advance(self, amount: int = 1) -> None:
        self.stages[self.current] = self.stages.get(self.current, 0) + amount


@pytest.mark.parametrize("jobs", [1, 2])
def test_warnings_counts_and_progress_go_a_file_in_the_order_read(
    tmp_path: Path, jobs: int
) -> None:
    made = tree(tmp_path / "t")
    warned: list[ScanWarning] = []
    progress = Counting()
    stats = build_index(
        [tmp_path / "t"], tmp_path / "idx", jobs=jobs, on_warning=warned.append, progress=progress
    )
    corrupt = {str(p) for p in made if p.suffix == ".gz"}
    assert {w.path for w in warned} == corrupt and len(warned) == len(corrupt) == 10
    # Each warning in the order its file was read (within a batch, and with one job, all).
    read = stats.read_paths
    at = [read.index(w.path) for w in warned]
    if jobs == 1:
        assert at == sorted(at)
    one = [i for w, i in zip(warned, at, strict=True) if "/one/" in w.path]
    assert one == sorted(one) and len(one) == 5
    assert stats.failed == 0 and stats.files_read == len(made) == 320
    assert sorted(read) == sorted(map(str, made))
    size = sum(p.stat().st_size for p in made)
    assert stats.bytes_read == size == progress.stages["fingerprinting"]


def _entries_of(index: Path, path: Path) -> int:
    con = duckdb.connect(str(index / "catalog.duckdb"), read_only=True)
    try:
        row = con.execute(
            "SELECT count(*) FROM files WHERE coalesce(origin, path) = ?", [os.fsencode(path)]
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0])


def test_a_changed_file_that_cannot_be_read_loses_its_old_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    made = tree(root)
    pack = next(p for p in made if p.suffix == ".zip")
    plain = made[10]
    build_index([root], tmp_path / "idx", jobs=1)
    assert _entries_of(tmp_path / "idx", pack) == 2 and _entries_of(tmp_path / "idx", plain) == 1
    # Both change; this time the zip (read alone) and the text (read in bulk) fail.
    pack.write_bytes(gzip.compress(words(5, 300), mtime=0))
    plain.write_bytes(words(6, 500))
    real_scan, real_plain = scanjobs.scan_entries, scanjobs.read_plain

    def scan_entries(path: str, *args: object, **kw: object) -> object:
        if path in (str(pack), str(plain)):
            raise PermissionError(13, "Permission denied", path)
        return real_scan(path, *args, **kw)  # type: ignore[arg-type]

    def read_plain(files: list[tuple[str, int, int]], *args: object) -> object:
        kept = [f if f[0] != str(plain) else (f[0] + "/gone", f[1], f[2]) for f in files]
        return real_plain(kept, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(scanjobs, "scan_entries", scan_entries)
    monkeypatch.setattr(scanjobs, "read_plain", read_plain)
    warned: list[ScanWarning] = []
    stats = build_index([root], tmp_path / "idx", jobs=1, on_warning=warned.append)
    assert stats.changed == 2 and stats.failed == 2 and stats.files_read == 0
    assert sorted(w.path for w in warned) == sorted([str(pack), str(plain)])
    assert _entries_of(tmp_path / "idx", pack) == 0 and _entries_of(tmp_path / "idx", plain) == 0
    monkeypatch.undo()  # readable again: read again, as new
    stats = build_index([root], tmp_path / "idx", jobs=1)
    assert stats.files_read == 2 and _entries_of(tmp_path / "idx", pack) == 1
