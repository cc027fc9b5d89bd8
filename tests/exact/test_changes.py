"""Files that change, or are swapped, between the walk and the reads of ``sif dupes``.

The pipeline is run in steps (the walk, a real change on disk, then the
comparison), or with a read that changes the file on disk right after sif
read its first block: real files, real changes, nothing mocked but the moment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sif.errors import ConfigError
from sif.events import ScanWarning
from sif.exact import find_duplicates, rounds
from sif.exact.pipeline import FIRST_BLOCK, ReplicaFinder, _Table
from sif.walk import RecordColumns, WalkOptions, parallel_walk
from treeutil import deadline, write

# Each test runs with the compiled loop of the first blocks and with the Python one.
pytestmark = pytest.mark.usefixtures("first_loop")


def walked(*roots: Path, **opts: object) -> RecordColumns:
    cols, _ = parallel_walk([str(r) for r in roots], WalkOptions(**opts))  # type: ignore[arg-type]
    return cols


def compare(cols: RecordColumns) -> tuple[list[list[str]], list[ScanWarning]]:
    """The comparison stages after the walk: groups (all names) and warnings."""
    warnings: list[ScanWarning] = []
    with deadline(30):
        groups = list(ReplicaFinder(jobs=1, on_warning=warnings.append).run(cols))
    return [sorted(g.all_paths) for g in groups], warnings


def tick() -> None:
    """Let the clock move past the walk's ctime (the kernel's timestamps are coarse)."""
    time.sleep(0.05)


def test_file_rewritten_with_mtime_restored_is_dropped(tmp_path: Path) -> None:
    write(tmp_path / "a", b"A" * 5000)
    write(tmp_path / "b", b"B" * 5000)
    write(tmp_path / "c", b"B" * 5000)
    cols = walked(tmp_path)
    st = os.stat(tmp_path / "a")
    tick()
    write(tmp_path / "a", b"B" * 5000)  # now a replica of b: but not the file the walk saw
    os.utime(tmp_path / "a", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(tmp_path / "a").st_mtime_ns == st.st_mtime_ns
    groups, warnings = compare(cols)
    assert groups == [[str(tmp_path / "b"), str(tmp_path / "c")]]
    assert warnings == [ScanWarning(str(tmp_path / "a"), "changed while it was read; skipped")]


def change_after_first_read(
    monkeypatch: pytest.MonkeyPatch,
    row_by_row: Callable[[Callable[[str], None]], object],
    victim: Path,
    change: Callable[[], None],
) -> None:
    """Make ``change`` happen on disk right after sif's first read of ``victim``.

    Every way sif reads: :meth:`_Table.read`; the lean loop of the first
    blocks in Python, which calls ``os.pread`` itself (the file read is known
    by its descriptor, through ``/proc/self/fd``); and the compiled one, given
    one row at a time (``row_by_row``).
    """
    read, pread = _Table.read, os.pread
    done = False

    def then_change() -> None:
        nonlocal done
        done = True
        tick()
        change()

    def read_then_change(self: _Table, i: int, *args: object, **kw: object) -> object:
        got = read(self, i, *args, **kw)  # type: ignore[arg-type]
        if not done and self.path(i) == str(victim):
            then_change()
        return got

    def pread_then_change(fd: int, n: int, offset: int) -> bytes:
        got = pread(fd, n, offset)
        if not done and os.readlink(f"/proc/self/fd/{fd}") == str(victim):
            then_change()
        return got

    def row_then_change(path: str) -> None:
        if not done and path == str(victim):
            then_change()

    monkeypatch.setattr(_Table, "read", read_then_change)
    monkeypatch.setattr(os, "pread", pread_then_change)
    row_by_row(row_then_change)


X1, X2 = b"x" * FIRST_BLOCK, b"X" * FIRST_BLOCK
Y1, Y2 = b"y" * 3 * FIRST_BLOCK, b"Y" * 3 * FIRST_BLOCK


def rewrite_keeping_mtime(path: Path, data: bytes) -> Callable[[], None]:
    def change() -> None:
        st = os.stat(path)
        write(path, data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    return change


def append(path: Path) -> Callable[[], None]:
    def change() -> None:
        with open(path, "ab") as f:
            f.write(b"more")

    return change


def truncate(path: Path) -> Callable[[], None]:
    return lambda: os.truncate(path, FIRST_BLOCK)


def rename_over(source: Path, path: Path) -> Callable[[], None]:
    return lambda: os.rename(source, path)


@pytest.mark.parametrize("keep_open", [8, 0])
@pytest.mark.parametrize("how", ["rewritten, mtime kept", "appended", "truncated", "renamed over"])
def test_file_changed_between_its_blocks_is_dropped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    row_by_row: Callable[[Callable[[str], None]], object],
    how: str,
    keep_open: int,
) -> None:
    # a and b agree in their first block, differ after it. Once sif has read
    # a's first block, a becomes X2+Y2, whose rest equals b's: without the
    # check, sif would group a (old head, new tail) with b, which neither a's
    # old nor its new content equals.
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write(a, X1 + Y1)
    write(b, X1 + Y2)
    write(c, X1 + Y2)
    write(tmp_path / "new", X2 + Y2)
    change = {
        "rewritten, mtime kept": rewrite_keeping_mtime(a, X2 + Y2),
        "appended": append(a),
        "truncated": truncate(a),
        "renamed over": rename_over(tmp_path / "new", a),
    }[how]
    cols = walked(a, b, c)
    # Kept open from the first block (8), or opened again for the later ones (0).
    monkeypatch.setattr(rounds, "KEEP_OPEN_SHARE", keep_open)
    change_after_first_read(monkeypatch, row_by_row, a, change)
    groups, warnings = compare(cols)
    assert groups == [[str(b), str(c)]]
    assert [w.path for w in warnings] == [str(a)]
    assert "changed while it was read" in warnings[0].cause or "replaced" in warnings[0].cause


@pytest.mark.parametrize("keep_open", [8, 0])
@pytest.mark.parametrize("how", ["rewritten, mtime kept", "renamed over", "removed"])
def test_small_file_changed_right_after_its_only_read_is_dropped(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    row_by_row: Callable[[Callable[[str], None]], object],
    how: str,
    keep_open: int,
) -> None:
    # One block each: the first read is the last. a's bytes were read as those of
    # b and c; then a changes. The read itself skips its fstat (a file whose block
    # has no equal needs no proof), so the check comes after the group is known.
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for p in (a, b, c):
        write(p, b"s" * 3000)
    write(tmp_path / "new", b"n" * 3000)
    change = {
        "rewritten, mtime kept": rewrite_keeping_mtime(a, b"n" * 3000),
        "renamed over": rename_over(tmp_path / "new", a),
        "removed": lambda: os.unlink(a),
    }[how]
    cols = walked(a, b, c)
    # Checked through the descriptor kept open (8), or by name (0).
    monkeypatch.setattr(rounds, "KEEP_OPEN_SHARE", keep_open)
    change_after_first_read(monkeypatch, row_by_row, a, change)
    groups, warnings = compare(cols)
    assert groups == [[str(b), str(c)]]
    cause = {
        "rewritten, mtime kept": "changed while it was read; skipped",
        "renamed over": "replaced by another file since the walk; skipped",
        "removed": "vanished during the scan",
    }[how]
    assert warnings == [ScanWarning(str(a), cause)]


def test_other_name_changed_after_the_walk_is_not_listed(tmp_path: Path) -> None:
    write(tmp_path / "a", b"same")
    os.symlink(tmp_path / "a", tmp_path / "s")
    write(tmp_path / "b", b"same")
    write(tmp_path / "other", b"diff")
    cols = walked(tmp_path, follow_symlinks=True)
    os.unlink(tmp_path / "s")
    os.symlink(tmp_path / "other", tmp_path / "s")  # s no longer names a
    groups, warnings = compare(cols)
    assert groups == [[str(tmp_path / "a"), str(tmp_path / "b")]]
    assert warnings == [
        ScanWarning(str(tmp_path / "s"), "replaced by another file since the walk; skipped")
    ]


def test_hardlink_renamed_over_after_the_walk_drops_the_file(tmp_path: Path) -> None:
    write(tmp_path / "a", b"same")
    os.link(tmp_path / "a", tmp_path / "a2")
    write(tmp_path / "b", b"same")
    write(tmp_path / "c", b"same")
    write(tmp_path / "other", b"diff")
    cols = walked(tmp_path / "a", tmp_path / "a2", tmp_path / "b", tmp_path / "c")
    tick()
    os.rename(tmp_path / "other", tmp_path / "a2")  # a loses a name: its ctime moves
    groups, warnings = compare(cols)
    assert groups == [[str(tmp_path / "b"), str(tmp_path / "c")]]
    assert warnings == [ScanWarning(str(tmp_path / "a"), "changed while it was read; skipped")]


def test_fifo_swapped_in_after_the_walk_is_a_warning_not_a_hang(tmp_path: Path) -> None:
    for n in ("a", "b", "c"):
        write(tmp_path / n, b"same content")
    cols = walked(tmp_path)
    os.unlink(tmp_path / "b")
    os.mkfifo(tmp_path / "b")  # opening it for reading would wait for a writer forever
    groups, warnings = compare(cols)
    assert groups == [[str(tmp_path / "a"), str(tmp_path / "c")]]
    assert warnings == [ScanWarning(str(tmp_path / "b"), "not a regular file (FIFO)")]


def test_symlink_swapped_in_after_the_walk_is_not_followed(tmp_path: Path) -> None:
    for n in ("a", "b", "c"):
        write(tmp_path / n, b"same content")
    cols = walked(tmp_path)
    os.rename(tmp_path / "b", tmp_path / "b.moved")  # the same inode, under another name
    os.symlink(tmp_path / "b.moved", tmp_path / "b")
    groups, warnings = compare(cols)
    assert groups == [[str(tmp_path / "a"), str(tmp_path / "c")]]
    assert warnings == [ScanWarning(str(tmp_path / "b"), "is a symbolic link now")]


def test_symlinks_are_labelled_as_symlinks_not_hardlinks(tmp_path: Path) -> None:
    write(tmp_path / "d/a", b"same")
    write(tmp_path / "d/b", b"same")
    os.link(tmp_path / "d/a", tmp_path / "d/a-hard")
    os.symlink(tmp_path / "d/a", tmp_path / "d/a-sym")
    os.symlink("a", tmp_path / "d/0-sym")  # sorts first: still not the file's own name
    [group] = find_duplicates(str(tmp_path / "d"), follow_symlinks=True, jobs=1)
    a, b = group.replicas
    assert a.path == str(tmp_path / "d/a")
    assert a.hardlinks == (str(tmp_path / "d/a-hard"),)
    assert a.symlinks == (str(tmp_path / "d/0-sym"), str(tmp_path / "d/a-sym"))
    assert set(a.paths) == {a.path, *a.hardlinks, *a.symlinks}
    assert (b.path, b.hardlinks, b.symlinks) == (str(tmp_path / "d/b"), (), ())


def test_find_duplicates_takes_one_path_or_many(tmp_path: Path) -> None:
    write(tmp_path / "x/a.txt", b"same")
    write(tmp_path / "x/b.txt", b"same")
    write(tmp_path / "x/c.log", b"same")
    every = {str(tmp_path / "x" / n) for n in ("a.txt", "b.txt", "c.log")}
    for paths in (str(tmp_path / "x"), tmp_path / "x", os.fsencode(tmp_path / "x")):
        [g] = find_duplicates(paths, jobs=1)  # one path, not its characters
        assert set(g.paths) == every
    [g] = find_duplicates([os.fsencode(tmp_path / "x")], jobs=1, include="*.txt")
    assert set(g.paths) == {str(tmp_path / "x/a.txt"), str(tmp_path / "x/b.txt")}
    [g] = find_duplicates((tmp_path / "x",), jobs=1, exclude="b*", include=["*.log", "a*"])
    assert set(g.paths) == {str(tmp_path / "x/a.txt"), str(tmp_path / "x/c.log")}
    for bad in (42, None, [tmp_path, 3]):
        with pytest.raises(TypeError):
            find_duplicates(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        find_duplicates(tmp_path, include=b"*.txt")  # type: ignore[arg-type]
    for jobs in (0, -1):
        with pytest.raises(ConfigError, match="jobs"):
            find_duplicates(tmp_path, jobs=jobs)
