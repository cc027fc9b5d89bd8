"""Archive members in sif compare's pass 1 (sif.compare.members): held in memory up to
a budget, the others copied to this run's temporary directory and scored as files on
disk; the same scores either way, nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sif
from sif.compare import large, members
from sif.core import exactsets
from textgen import edited, text
from treeutil import PRINT_PEAK_MIB, write


def _trees(tmp_path: Path, sizes: list[int]) -> tuple[Path, Path]:
    """Two versions of a tree of files of ``sizes`` (each edited in B), and a file only
    in A; returns the two directories."""
    for k, n in enumerate(sizes):
        base = text(60 + k, n)
        write(tmp_path / f"a/d{k % 3}/f{k}.txt", base)
        write(tmp_path / f"b/d{k % 3}/f{k}.txt", edited(base, 61 + k, max(1, n // 50)))
    write(tmp_path / "a/only.txt", text(59, 3000))
    return tmp_path / "a", tmp_path / "b"


def _tar(src: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(src, arcname="proj")
    return out


def _zip(src: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(src.rglob("*")):
            if p.is_file():
                z.write(p, "proj/" + str(p.relative_to(src)))
    return out


def _scores(r: sif.CompareResult) -> dict[str | None, tuple[object, ...]]:
    return {f.a: (f.status, f.score, f.a_in_b, f.b_in_a, f.exact) for f in r.files}


def _tar_of(arc: Path, contents: dict[str, bytes]) -> Path:
    """A plain tar ``arc`` of the members ``contents`` (name: bytes)."""
    with tarfile.open(arc, "w") as tar:
        for name, data in contents.items():
            write(arc.parent / "src" / name, data)
            tar.add(arc.parent / "src" / name, arcname=name)
    return arc


def _spools(where: Path) -> list[str]:
    return [n for n in os.listdir(where) if n.startswith(members.SPOOL_PREFIX)]


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR for this test alone (the copies go there)."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


@settings(
    deadline=None, max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(20, 30_000), min_size=1, max_size=6),
    budget=st.sampled_from([0, 40_000, 1 << 30]),
    large_from=st.sampled_from([0, 200_000, 256 << 20]),
)
def test_members_score_as_the_same_files_on_disk_whatever_is_copied(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    sizes: list[int],
    budget: int,
    large_from: int,
) -> None:
    """Whatever the budget (0: every member copied) and wherever pairs turn large, a tar
    against a zip scores as the directories they were made of, and the run's temporary
    directory is gone at its end."""
    tmp_path = tmp_path_factory.mktemp("m")
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    monkeypatch.setattr(members, "MEMBER_MEMORY", budget)
    monkeypatch.setattr(large, "EXACT_BYTES", large_from)
    monkeypatch.setattr(exactsets, "SAMPLE_FROM", 1024)
    monkeypatch.setattr(exactsets, "STEP_BYTES", 4096)
    a, b = _trees(tmp_path, sizes)
    on_disk = sif.compare_trees(a, b, tmp_path / "idx")
    archived = sif.compare_trees(
        _tar(a, tmp_path / "a.tar.gz"), _zip(b, tmp_path / "b.zip"), tmp_path / "idx"
    )
    assert _scores(archived) == _scores(on_disk)
    assert any(f.status == "changed" and f.score is not None for f in archived.files)
    assert _spools(spool) == []


def test_members_held_in_memory_stay_under_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    """The members are held while they total under MEMBER_MEMORY, the others copied;
    those asked to go to disk (a large pair's) are copied whatever their size; each
    holds the member's bytes; close() removes the copies."""
    monkeypatch.setattr(members, "MEMBER_MEMORY", 25_000)
    contents = {f"m{k}.bin": text(70 + k, 10_000 + k) for k in range(5)}
    arc = _tar_of(tmp_path / "x.tar", contents)
    wanted = [(str(arc), f"{arc}!/{n}", len(d), n == "m0.bin") for n, d in contents.items()]
    with members.Members() as got:
        got.read(wanted, lambda w: pytest.fail(str(w)))
        assert got.held <= 25_000
        assert set(got.data) == {f"{arc}!/m1.bin", f"{arc}!/m2.bin"}
        assert set(got.files) == {f"{arc}!/m0.bin", f"{arc}!/m3.bin", f"{arc}!/m4.bin"}
        for name, data in contents.items():
            kept = got.get(f"{arc}!/{name}")
            if isinstance(kept, tuple):
                assert Path(kept[0]).read_bytes() == data and kept[2] == len(data)
                assert Path(kept[0]).parent.parent == own_tmp
            else:
                assert kept == data
    assert _spools(own_tmp) == []


def test_a_member_not_of_its_listed_size_is_a_warning_and_not_kept(
    tmp_path: Path, own_tmp: Path
) -> None:
    arc = _tar_of(tmp_path / "x.tar", {"m.txt": text(80, 5000)})
    for to_disk in (False, True):
        warnings: list[sif.ScanWarning] = []
        with members.Members() as got:
            got.read([(str(arc), f"{arc}!/m.txt", 4000, to_disk)], warnings.append)
            assert got.get(f"{arc}!/m.txt") is None
        assert [(w.path, w.cause) for w in warnings] == [
            (f"{arc}!/m.txt", "changed during the run (over 4,000 bytes read, 4,000 listed)")
        ]
    assert _spools(own_tmp) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root; CI is root)")
def test_no_room_for_a_copy_is_a_warning_naming_the_member_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionutil import tmpfs

    monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
    base = text(81, 3 << 20)
    write(tmp_path / "a/big.txt", base)
    write(tmp_path / "b/big.txt", edited(base, 82, 300))
    write(tmp_path / "a/small.txt", text(83, 2000))
    write(tmp_path / "b/small.txt", text(83, 2000)[:1500] + text(84, 600))
    at, bt = _tar(tmp_path / "a", tmp_path / "a.tar"), _tar(tmp_path / "b", tmp_path / "b.tar")
    with tmpfs("1m") as where:
        monkeypatch.setattr(tempfile, "tempdir", str(where))
        warnings: list[sif.ScanWarning] = []
        r = sif.compare_trees(at, bt, tmp_path / "idx", on_warning=warnings.append)
        assert os.listdir(where) == []
    got = {f.a: f for f in r.files}
    assert got["big.txt"].status == "changed" and got["big.txt"].score is None
    assert got["small.txt"].score is not None  # copied before the disk filled
    # Each member that found no room is named, with the place and the cause.
    assert sorted(w.path for w in warnings) == [f"{at}!/proj/big.txt", f"{bt}!/proj/big.txt"]
    for w in warnings:
        assert w.cause.startswith(f"cannot be copied for comparison into {where}/sif-compare-")
        assert w.cause.endswith(": No space left on device")


def test_ctrl_c_while_comparing_leaves_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    from sif.compare import passes

    monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
    a, b = _trees(tmp_path, [5000, 6000])
    at, bz = _tar(a, tmp_path / "a.tar.gz"), _zip(b, tmp_path / "b.zip")

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        assert len(_spools(own_tmp)) == 1  # the copies are there while pass 1 runs
        raise KeyboardInterrupt

    monkeypatch.setattr(passes, "_changed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sif.compare_trees(at, bz, tmp_path / "idx")
    assert _spools(own_tmp) == []


def test_two_large_members_take_memory_of_a_sample_not_of_their_sets(tmp_path: Path) -> None:
    """Two 24 MB versions in two tarballs: read whole, with their whole sets, they took
    about 9 bytes a byte (430 MB); copied and scored a step at a time, the run stays
    under 200 MB whatever the members' size (measured in a child, by its peak RSS)."""
    base = text(85, 24 << 20)
    write(tmp_path / "a/big.txt", base)
    write(tmp_path / "b/big.txt", edited(base, 86, 2000))
    at, bt = _tar(tmp_path / "a", tmp_path / "a.tar"), _tar(tmp_path / "b", tmp_path / "b.tar")
    code = (
        "import sys, sif\n"
        "r = sif.compare_trees(sys.argv[1], sys.argv[2], sys.argv[3])\n"
        "[f] = [f for f in r.files if f.a == 'big.txt']\n"
        "print(f.status, f.score is not None, f.exact)\n" + PRINT_PEAK_MIB
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(at), str(bt), str(tmp_path / "idx")],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    line, peak = done.stdout.splitlines()
    assert line == "changed True False"  # scored, on a sample
    assert int(peak) < 200, peak


@pytest.mark.parametrize("budget", [0, 7_000, 1 << 30])
def test_a_name_a_tar_holds_twice_is_its_last_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path, budget: int
) -> None:
    """`tar -r` appends a second x.txt: the listing takes the last copy, and so does pass 1
    (the first copy, of another size, was called 'changed during the run'; of the same
    size, held in memory while the last was copied, it was scored instead)."""
    monkeypatch.setattr(members, "MEMBER_MEMORY", budget)
    first, last = text(90, 4000), text(91, 5000)
    for size_first in (len(first), len(last)):
        old = first[:size_first] if size_first <= len(first) else first
        old = (old * 2)[:size_first]
        write(tmp_path / "src/p/x.txt", old)
        arc = tmp_path / "a.tar"
        with tarfile.open(arc, "w") as tar:
            tar.add(tmp_path / "src/p/x.txt", arcname="p/x.txt")
        write(tmp_path / "src/p/x.txt", last)
        with tarfile.open(arc, "a") as tar:
            tar.add(tmp_path / "src/p/x.txt", arcname="p/x.txt")
        write(tmp_path / "b/x.txt", edited(last, 92, 40))
        warnings: list[sif.ScanWarning] = []
        r = sif.compare_trees(arc, tmp_path / "b", tmp_path / "idx", on_warning=warnings.append)
        want = sif.compare_trees(tmp_path / "src/p", tmp_path / "b", tmp_path / "idx")
        assert warnings == []
        assert _scores(r) == _scores(want), size_first
        assert _spools(own_tmp) == []


def _run_signalled(tmp_path: Path, spool: Path, prelude: str) -> subprocess.CompletedProcess[str]:
    """A child compares two archives (every member copied) and, once pass 1 holds its
    copies, runs ``prelude``'s ``hit()`` (a signal to itself), then finishes."""
    a, b = _trees(tmp_path, [5000, 6000])
    at, bz = _tar(a, tmp_path / "a.tar.gz"), _zip(b, tmp_path / "b.zip")
    code = (
        "import os, signal, sys, sif\n"
        "from sif.compare import members, passes\n"
        "members.MEMBER_MEMORY = 0\n"
        f"{prelude}\n"
        "real = passes._changed\n"
        "def changed(*args):\n"
        "    hit()\n"
        "    return real(*args)\n"
        "passes._changed = changed\n"
        "r = sif.compare_trees(sys.argv[1], sys.argv[2], sys.argv[3])\n"
        "print('finished', len(r.files))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(at), str(bz), str(tmp_path / "idx")],
        capture_output=True, text=True, env={**os.environ, "TMPDIR": str(spool)}, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_removes_the_copies_then_ends_the_process_by_that_signal(
    tmp_path: Path, sig: str
) -> None:
    """They ended the process at once, and the copies stayed in TMPDIR (Ctrl-C removed
    them); now they are removed, and the process still ends by the signal."""
    import signal

    spool = tmp_path / "tmp"
    spool.mkdir()
    done = _run_signalled(
        tmp_path,
        spool,
        # At its default action whatever the parent left (nohup ignores SIGHUP).
        f"signal.signal(signal.{sig}, signal.SIG_DFL)\n"
        "def hit():\n"
        "    assert len(os.listdir(os.environ['TMPDIR'])) == 1, 'no copies'\n"
        f"    os.kill(os.getpid(), signal.{sig})\n",
    )
    assert done.returncode == -getattr(signal, sig), (done.returncode, done.stderr)
    assert "finished" not in done.stdout and done.stderr == ""
    assert _spools(spool) == []


def test_a_signal_the_caller_ignores_stays_ignored(tmp_path: Path) -> None:
    """Under nohup (SIGHUP ignored), a SIGHUP during pass 1 changes nothing."""
    spool = tmp_path / "tmp"
    spool.mkdir()
    done = _run_signalled(
        tmp_path,
        spool,
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "def hit():\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n",
    )
    assert done.returncode == 0 and done.stdout.startswith("finished"), done.stderr
    assert _spools(spool) == []


def test_no_usable_temporary_directory_is_a_warning_a_member_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    a, b = _trees(tmp_path, [5000])
    at = _tar(a, tmp_path / "a.tar.gz")
    warnings: list[sif.ScanWarning] = []
    r = sif.compare_trees(at, b, tmp_path / "idx", on_warning=warnings.append)
    [f] = [f for f in r.files if f.a == "d0/f0.txt"]
    assert (f.status, f.score) == ("changed", None)
    [w] = warnings
    assert w.path == f"{at}!/proj/d0/f0.txt"
    assert w.cause.startswith(f"cannot be copied for comparison into {tmp_path / 'gone'}")
    assert w.cause.endswith(": No such file or directory")


def test_signals_while_the_copies_are_removed_wait_until_they_are_gone(tmp_path: Path) -> None:
    """A SIGTERM then a SIGHUP as pass 1 removes its copies (a child sends them from
    inside the removal): they cut it short, with a traceback, exit 1 and the copies
    left; now they are noted, the removal ends, then the first ends the process."""
    import signal

    spool = tmp_path / "tmp"
    spool.mkdir()
    done = _run_signalled(
        tmp_path,
        spool,
        "import shutil\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
        "real_rmtree = shutil.rmtree\n"
        "def rmtree(path, *args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    return real_rmtree(path, *args, **kwargs)\n"
        "shutil.rmtree = rmtree\n"
        "def hit():\n"
        "    pass\n",
    )
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
    assert done.stderr == "" and "finished" not in done.stdout
    assert _spools(spool) == []


def test_a_member_gone_from_its_archive_since_it_was_listed_is_named(
    tmp_path: Path, own_tmp: Path
) -> None:
    arc = _tar_of(tmp_path / "x.tar", {"m.txt": text(93, 3000)})
    warnings: list[sif.ScanWarning] = []
    with members.Members() as got:
        got.read(
            [(str(arc), f"{arc}!/m.txt", 3000, False), (str(arc), f"{arc}!/gone.txt", 10, True)],
            warnings.append,
        )
        assert got.get(f"{arc}!/m.txt") == text(93, 3000)
        assert got.get(f"{arc}!/gone.txt") is None
    assert [(w.path, w.cause) for w in warnings] == [
        (f"{arc}!/gone.txt", "gone from its archive since it was listed")
    ]


def _two_archives(tmp_path: Path) -> tuple[Path, Path]:
    a, b = _trees(tmp_path, [5000, 6000])
    return _tar(a, tmp_path / "a.tar.gz"), _zip(b, tmp_path / "b.zip")


def _handlers() -> tuple[object, ...]:
    import signal

    return tuple(signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


def _ctrl_c_then(real: Any) -> Any:
    """``real`` preceded by a Ctrl-C sent to this process (handled at its next bytecode)."""
    import signal

    def call(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    return call


def _compare_interrupted(at: Path, bz: Path, idx: Path) -> None:
    """``compare_trees`` ends by the caller's Ctrl-C, with every handler as it was."""
    before = _handlers()
    with pytest.raises(KeyboardInterrupt):
        sif.compare_trees(at, bz, idx)
    assert _handlers() == before


def test_a_ctrl_c_while_the_directory_is_made_is_a_keyboard_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    """Noted while mkdtemp ran, it came out as sif's private _Ended(2), a traceback and
    exit 1 in the CLI; now the caller's Ctrl-C handler has it, after the directory is
    named (and so removed)."""

    monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
    at, bz = _two_archives(tmp_path)
    monkeypatch.setattr(tempfile, "mkdtemp", _ctrl_c_then(tempfile.mkdtemp))
    _compare_interrupted(at, bz, tmp_path / "idx")
    assert _spools(own_tmp) == []


def test_a_ctrl_c_during_the_removal_after_an_error_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    """Pass 1 failed (a bug, a disk error) and a Ctrl-C came while the copies went: it was
    dropped ('one on its way suffices') and the CLI said 'error', exit 3; now the Ctrl-C
    is the caller's, after the removal."""
    import shutil

    from sif.compare import passes

    monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
    at, bz = _two_archives(tmp_path)

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom in pass 1")

    monkeypatch.setattr(passes, "_changed", failing)
    monkeypatch.setattr(members.shutil, "rmtree", _ctrl_c_then(shutil.rmtree))
    _compare_interrupted(at, bz, tmp_path / "idx")
    assert _spools(own_tmp) == []


def test_a_ctrl_c_during_the_removal_waits_when_sigterm_and_sighup_are_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    """With SIGTERM and SIGHUP ignored (trap '' TERM HUP), Ctrl-C was not taken over, and
    one during the removal cut it short: the copies stayed."""
    import shutil
    import signal

    monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
    at, bz = _two_archives(tmp_path)
    real_rmtree = _ctrl_c_then(shutil.rmtree)
    removed: list[bool] = []

    def rmtree(*args, **kwargs):  # type: ignore[no-untyped-def]
        real_rmtree(*args, **kwargs)
        removed.append(True)

    monkeypatch.setattr(members.shutil, "rmtree", rmtree)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        _compare_interrupted(at, bz, tmp_path / "idx")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    assert removed == [True] and _spools(own_tmp) == []


def test_a_ctrl_c_while_the_handlers_are_put_in_place_leaves_them_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_tmp: Path
) -> None:
    """signal.signal runs pending handlers first: a Ctrl-C pending then raised out of
    __enter__, which left SIGTERM bound to a dead Members (every later SIGTERM of the
    host swallowed)."""
    import signal

    at, bz = _two_archives(tmp_path)
    real = signal.signal
    sent: list[int] = []

    def installing(sig, handler):  # type: ignore[no-untyped-def]
        if not sent and callable(handler) and sig == signal.SIGHUP:
            sent.append(sig)  # SIGTERM's is in place: a Ctrl-C pending before SIGHUP's
            os.kill(os.getpid(), signal.SIGINT)  # runs first, as signal.signal would
        return real(sig, handler)

    # Both at their default action, whatever this process inherited (nohup ignores
    # SIGHUP): SIGTERM's handler is put in place first, then SIGHUP's and SIGINT's.
    defaults = {s: real(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        monkeypatch.setattr(signal, "signal", installing)
        monkeypatch.setattr(members, "MEMBER_MEMORY", 0)
        before = _handlers()
        with pytest.raises(KeyboardInterrupt):
            sif.compare_trees(at, bz, tmp_path / "idx")
        assert sent and _handlers() == before
    finally:
        monkeypatch.undo()
        for s, h in defaults.items():
            real(s, h)
    assert _spools(own_tmp) == []
