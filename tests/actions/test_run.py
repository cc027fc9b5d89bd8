"""Running plans on real files: re-checks, atomic steps, journal, undo, permissions, devices."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from actionutil import contents, loopfs, report_of, sif, snapshot, tmpfs
from sif.actions import plan_actions, read_report, run_plan, undo_journal
from sif.actions.fsops import extents_shared
from treeutil import fill, write

A = b"alpha content\n" * 100
B = b"bravo content, longer\n" * 3000


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Journals and the trash under tmp_path, for this process and its children."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "state"


def tree(root: Path) -> Path:
    for name in ("one/a", "two/a", "two/a-again"):
        write(root / name, A)
    for name in ("one/b", "two/b"):
        write(root / name, B)
    write(root / "one/unique", b"only here\n")
    return root


def saved_report(root: Path, *roots: Path, out: Path | None = None) -> Path:
    """``sif dupes`` of ``roots`` (default ``root``) saved beside ``root``, or at ``out``
    (a mount point's parent is /tmp, which the test must not litter)."""
    path = out or root.parent / f"{root.name}-report.json"
    r = sif("dupes", "--format", "json", "-q", *(str(x) for x in roots or (root,)))
    assert r.returncode == 0, r.stderr
    path.write_text(r.stdout)
    return path


def linked(tmp_path: Path, copies: str) -> Path:
    """The journal of a finished ``sif link`` of the copies ``t/X/f`` (X in ``copies``)."""
    for c in copies:
        write(tmp_path / "t" / c / "f", A)
    report = saved_report(tmp_path / "t", out=tmp_path / "report.json")
    journal = tmp_path / "j.jsonl"
    assert sif("link", "--journal", str(journal), str(report)).returncode == 0
    return journal


def ino(p: Path) -> int:
    return os.lstat(p).st_ino


def test_link_makes_hard_links_and_undo_makes_independent_copies(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    os.chmod(root / "two/a", 0o600)
    os.utime(root / "two/a", ns=(1_000_000_000, 1_500_000_000))
    before = contents(root)
    report = saved_report(root, root / "one", root / "two")
    r = sif("link", str(report))
    assert r.returncode == 0, r.stderr
    assert "3 done" in r.stderr and "reclaimed" in r.stderr
    journal = r.stderr.rsplit("journal: ", 1)[1].strip()
    assert journal.startswith(str(tmp_path / "state/sif/journals/"))
    assert ino(root / "two/a") == ino(root / "one/a") == ino(root / "two/a-again")
    assert ino(root / "two/b") == ino(root / "one/b")
    assert contents(root) == before
    assert not [p for p in snapshot(root) if ".sif-" in p]
    r = sif("undo", journal)
    assert r.returncode == 0, r.stderr
    assert "3 undone" in r.stderr
    assert contents(root) == before
    inodes = {ino(root / n) for n in ("one/a", "two/a", "two/a-again")}
    assert len(inodes) == 3  # independent again
    st = os.stat(root / "two/a")
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_mtime_ns == 1_500_000_000
    (root / "two/a").write_bytes(b"changed")
    assert (root / "one/a").read_bytes() == A


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    before = snapshot(root)
    r = sif("link", "--dry-run", str(report))
    assert r.returncode == 0
    assert f"ln -f -- {root}/one/a {root}/two/a\n" in r.stdout
    assert len(r.stdout.splitlines()) == 3
    r = sif("remove", "-n", "--format", "json", str(report))
    steps = [json.loads(x) for x in r.stdout.splitlines()]
    assert {s["drop"]["path"] for s in steps} == {
        f"{root}/two/a",
        f"{root}/two/a-again",
        f"{root}/two/b",
    }
    assert snapshot(root) == before
    assert not (tmp_path / "state").exists()


def test_a_file_changed_after_the_report_with_size_and_mtime_restored_is_skipped(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    victim = root / "two/b"
    st = os.stat(victim)
    changed = B[:-3] + b"XY\n"
    victim.write_bytes(changed)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as before
    r = sif("link", str(report))
    assert r.returncode == 1
    assert f"{victim}: changed since the report (ctime differs" in r.stderr
    assert victim.read_bytes() == changed and ino(victim) == st.st_ino
    assert ino(root / "two/a") == ino(root / "one/a")  # the rest went on


def test_bytes_are_compared_even_when_every_stat_field_matches(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = read_report(str(saved_report(root, root / "one", root / "two")))
    victim = root / "two/b"
    st = os.stat(victim)
    changed = B[:-3] + b"XY\n"
    victim.write_bytes(changed)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    # The report's figures made to match the changed file (as on a file system whose
    # ctime is unreliable): only the byte comparison can tell.
    groups = []
    for g in report.groups:
        reps = tuple(
            dataclasses.replace(r, ctime_ns=os.stat(r.path).st_ctime_ns) for r in g.replicas
        )
        groups.append(g.__class__(g.size, g.digest, reps))
    report.groups = groups
    result = run_plan(plan_actions(report, "remove"))
    assert result.skipped == 1 and result.done == 2
    assert [str(w) for w in result.problems] == [
        f"{victim}: its bytes differ from the kept copy {root}/one/b: skipped, left as it was"
    ]
    assert victim.read_bytes() == changed


def test_a_file_replaced_by_another_is_skipped(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    victim = root / "two/a"
    old = ino(victim)
    tmp = root / "two/new"
    tmp.write_bytes(A)
    os.replace(tmp, victim)  # same bytes, another inode
    assert ino(victim) != old
    r = sif("remove", str(report))
    assert r.returncode == 1
    assert f"{victim}: replaced by another file since the report" in r.stderr
    assert victim.read_bytes() == A
    assert not (root / "two/a-again").exists() and not (root / "two/b").exists()


def test_a_group_already_hardlinked_is_a_noop(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    assert sif("link", "-q", str(report)).returncode == 0
    again = saved_report(root, root / "one", root / "two")
    before = snapshot(root)
    r = sif("link", str(again))
    assert r.returncode == 0
    assert "0 done" in r.stderr
    assert snapshot(root) == before
    # The old report: each name already is the kept inode -> replaced since, skipped.
    r = sif("link", "-n", str(again))
    assert r.stdout == ""  # a report of hardlinks only: no group at all


def test_noop_hardlink_member_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "t/a", A)
    os.link(tmp_path / "t/a", tmp_path / "t/a-link")
    write(tmp_path / "t/z", A)
    report = saved_report(tmp_path / "t")
    r = sif("link", "-n", str(report))
    assert f"# no-op: {tmp_path}/t/a-link: already a hard link of {tmp_path}/t/a" in r.stdout
    r = sif("link", str(report))
    assert r.returncode == 0 and "1 done, 1 no-ops" in r.stderr


def test_a_read_only_directory_leaves_its_file_alone(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="sif-ro-", dir="/tmp"))
    try:
        os.chmod(base, 0o777)
        root = tree(base / "t")
        state = base / "state"
        state.mkdir()
        for p in [base / "t", *root.rglob("*"), state]:
            os.chown(p, 65534, 65534)  # nobody
        os.chmod(root / "two", 0o555)
        report = saved_report(root, root / "one", root / "two")
        os.chmod(report, 0o644)
        before = snapshot(root)
        r = sif(
            "link",
            str(report),
            nobody=True,
            cwd=base,
            env={"XDG_STATE_HOME": str(state), "HOME": str(base)},
        )
        assert r.returncode == 1, r.stderr
        for name in ("two/a", "two/a-again", "two/b"):
            assert f"{root}/{name}: link failed (Permission denied): left as it was" in r.stderr
        assert "0 done" in r.stderr and "3 failed" in r.stderr
        assert snapshot(root) == before
    finally:
        os.chmod(base / "t/two", 0o755)
        shutil.rmtree(base)


def test_cross_device_links_are_refused_unless_symlink(tmp_path: Path) -> None:
    with tmpfs() as d1, tmpfs() as d2:
        write(d1 / "a", A)
        write(d2 / "a", A)
        write(d2 / "b", A)
        report = saved_report(d1, d1, d2, out=tmp_path / "report.json")
        before = snapshot(d2)
        r = sif("link", str(report))
        assert r.returncode == 1
        assert "group 1 (xxh3-128:" in r.stderr
        assert f"{d2}/a is on another file system: a hard link cannot cross" in r.stderr
        assert snapshot(d2) == before
        r = sif("dedupe", str(report))
        assert r.returncode == 1 and "shared extents cannot cross file systems" in r.stderr
        r = sif("remove", "--to", str(d1 / "not/yet"), str(report))
        assert r.returncode == 1 and "(a move would be a copy): not moved" in r.stderr
        assert snapshot(d2) == before and not (d1 / "not").exists()
        r = sif("link", "--symlink", str(report))
        assert r.returncode == 0, r.stderr
        for name in ("a", "b"):
            assert os.path.islink(d2 / name)
            assert os.readlink(d2 / name) == os.path.relpath(d1 / "a", d2)
            assert (d2 / name).read_bytes() == A
        journal = r.stderr.rsplit("journal: ", 1)[1].strip()
        r = sif("undo", journal)
        assert r.returncode == 0, r.stderr
        assert not os.path.islink(d2 / "a") and (d2 / "a").read_bytes() == A
        r = sif(
            "link",
            "--symlink",
            "--absolute",
            str(saved_report(d1, d1, d2, out=tmp_path / "report-again.json")),
        )
        assert os.readlink(d2 / "a") == str(d1 / "a")


@pytest.mark.parametrize("kind", ["btrfs", "xfs"])
def test_dedupe_shares_extents_and_undo_unshares(kind: str, tmp_path: Path) -> None:
    with loopfs(kind) as fs:
        big = os.urandom(3 * 1024 * 1024 + 17)
        for name in ("a", "b", "c"):
            write(fs / name, big)
        os.chmod(fs / "c", 0o640)
        subprocess.run(["sync"], check=True)
        report = saved_report(fs, out=tmp_path / "report.json")
        r = sif("dedupe", str(report))
        assert r.returncode == 0, r.stderr
        assert "2 done" in r.stderr
        journal = r.stderr.rsplit("journal: ", 1)[1].strip()

        def shared(x: str, y: str) -> bool:
            fa, fb = os.open(fs / x, os.O_RDONLY), os.open(fs / y, os.O_RDONLY)
            try:
                return extents_shared(fa, fb)
            finally:
                os.close(fa)
                os.close(fb)

        assert shared("a", "b") and shared("a", "c")
        assert stat.S_IMODE(os.stat(fs / "c").st_mode) == 0o640  # its own metadata
        assert len({ino(fs / n) for n in "abc"}) == 3
        r = sif("dedupe", "-n", str(saved_report(fs, out=tmp_path / "report.json")))
        assert r.stdout.count("# no-op") == 2 and "extents already shared" in r.stdout
        r = sif("undo", journal)
        assert r.returncode == 0, r.stderr
        assert not shared("a", "b") and not shared("a", "c")
        assert all((fs / n).read_bytes() == big for n in "abc")
        assert stat.S_IMODE(os.stat(fs / "c").st_mode) == 0o640


def test_dedupe_says_plainly_when_the_file_system_cannot(tmp_path: Path) -> None:
    with tmpfs() as d:
        write(d / "a", A)
        write(d / "b", A)
        before = snapshot(d)
        r = sif("dedupe", str(saved_report(d, out=tmp_path / "report.json")))
        assert r.returncode == 1
        assert f"{d}: this file system cannot share extents (FIDEDUPERANGE: " in r.stderr
        assert snapshot(d) == before


def test_remove_trash_and_undo(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    before = contents(root)
    report = saved_report(root, root / "one", root / "two")
    r = sif("remove", "--trash", str(report))
    assert r.returncode == 0, r.stderr
    trash = tmp_path / "data/Trash"
    assert sorted(os.listdir(trash / "files")) == ["a", "a-again", "b"]
    info = (trash / "info/a-again.trashinfo").read_text()
    assert f"Path={root}/two/a-again\n" in info and info.startswith("[Trash Info]\n")
    assert sorted(contents(root)) == sorted(str(root / n) for n in ("one/a", "one/b", "one/unique"))
    journal = r.stderr.rsplit("journal: ", 1)[1].strip()
    assert sif("undo", journal).returncode == 0
    assert contents(root) == before
    assert os.listdir(trash / "files") == [] and os.listdir(trash / "info") == []


def test_trash_on_another_device_stays_on_that_device(tmp_path: Path) -> None:
    with tmpfs() as d:
        write(d / "x/a", A)
        write(d / "x/b", A)
        r = sif("remove", "--trash", str(saved_report(d, out=tmp_path / "report.json")))
        assert r.returncode == 0, r.stderr
        assert os.listdir(d / f".Trash-{os.getuid()}/files") == ["b"]
        assert "Path=x/b\n" in (d / f".Trash-{os.getuid()}/info/b.trashinfo").read_text()


def test_remove_to_keeps_relative_paths_and_undo_brings_back(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    before = contents(root)
    report = saved_report(root, root / "one", root / "two")
    r = sif("remove", "--to", str(tmp_path / "moved"), str(report))
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "moved")) == ["a", "a-again", "b"]  # relative to two/
    assert (tmp_path / "moved/b").read_bytes() == B
    journal = r.stderr.rsplit("journal: ", 1)[1].strip()
    assert sif("undo", journal).returncode == 0
    assert contents(root) == before


def test_remove_deletes_and_cannot_be_undone(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    r = sif("remove", str(report))
    assert r.returncode == 0
    assert sorted(contents(root)) == sorted(str(root / n) for n in ("one/a", "one/b", "one/unique"))
    journal = r.stderr.rsplit("journal: ", 1)[1].strip()
    r = sif("undo", journal)
    assert r.returncode == 3 and "cannot be undone" in r.stderr


def test_undo_refuses_a_file_changed_since_and_undoes_the_rest(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    r = sif("link", str(report))
    journal = r.stderr.rsplit("journal: ", 1)[1].strip()
    (root / "two/b").unlink()
    (root / "two/b").write_bytes(b"something new")
    r = sif("undo", journal)
    assert r.returncode == 1
    assert f"{root}/two/b: no longer a hard link of the kept copy: not undone" in r.stderr
    assert (root / "two/b").read_bytes() == b"something new"
    assert ino(root / "two/a") != ino(root / "one/a")


def test_api_plan_and_run(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = report_of(root / "one", root / "two")
    plan = plan_actions(report, action="link", keep="first-root")
    assert len(plan.active) == 3
    result = run_plan(plan)
    assert (result.done, result.skipped, result.failed) == (3, 0, 0)
    assert result.bytes_reclaimed == len(A) * 2 + len(B)
    assert result.journal is not None
    undone = undo_journal(result.journal)
    assert undone.undone == 3


def test_undo_gives_back_hard_links_between_names_of_one_dropped_file(tmp_path: Path) -> None:
    write(tmp_path / "t/a", A)
    write(tmp_path / "t/b", A)
    os.link(tmp_path / "t/b", tmp_path / "t/b2")
    report = report_of(tmp_path / "t")
    result = run_plan(plan_actions(report, "link"))
    assert result.done == 2 and result.bytes_reclaimed == len(A)
    assert ino(tmp_path / "t/b") == ino(tmp_path / "t/a")
    assert result.journal is not None
    assert undo_journal(result.journal).undone == 2
    assert ino(tmp_path / "t/b") == ino(tmp_path / "t/b2") != ino(tmp_path / "t/a")
    assert (tmp_path / "t/b2").read_bytes() == A


def test_resume_of_a_finished_run_and_an_existing_journal_are_clear_errors(tmp_path: Path) -> None:
    root = tree(tmp_path / "t")
    report = saved_report(root, root / "one", root / "two")
    journal = tmp_path / "j.jsonl"
    assert sif("link", "-q", "--journal", str(journal), str(report)).returncode == 0
    r = sif("resume", str(journal))
    assert r.returncode == 3 and "that run finished: nothing to resume" in r.stderr
    r = sif("link", "--journal", str(journal), str(report))
    assert r.returncode == 3 and "a journal of that name exists already" in r.stderr
    r = sif("undo", str(report))
    assert r.returncode == 3 and "not a sif journal" in r.stderr


def test_a_full_disk_fails_the_step_and_leaves_the_file(tmp_path: Path) -> None:
    with tmpfs("1m") as d:
        write(d / "a", A)
        write(d / "b", A)
        report = saved_report(d, out=tmp_path / "report.json")
        fill(d)
        before = snapshot(d)
        r = sif("remove", "--trash", str(report))
        assert r.returncode == 1, r.stderr
        assert f"{d}/b: trash failed (No space left on device): left as it was" in r.stderr
        assert "1 failed" in r.stderr
        after = snapshot(d)
        assert {p: v for p, v in after.items() if "/.Trash" not in p} == before
        assert [p for p in after if p.endswith(".trashinfo")] == []


def test_a_journal_cut_short_by_a_full_disk_is_resumed_then_undone(tmp_path: Path) -> None:
    """A full disk stops the run with one line naming the journal; its last record may be
    cut short. ``resume`` (after room was made) cuts that half line off before it appends:
    appended right after it, its records made a line that was no JSON, and ``undo`` then
    refused the journal as damaged for good. Then ``undo`` gives back every file."""
    tree = tmp_path / "t"
    for g in range(60):
        for c in range(5):
            write(tree / f"c{c}" / f"f{g}", f"group {g}\n".encode() * (g + 1))
    before = contents(tree)
    inodes = len({os.stat(p).st_ino for p in before})
    report = saved_report(tree, out=tmp_path / "report.json")
    with tmpfs("1m") as d:
        filler = fill(d, leave=160 * 1024)  # room for the plan and a few of its records
        journal = d / "j.jsonl"
        r = sif("link", "--journal", str(journal), str(report))
        assert r.returncode == 3, r.stderr
        assert f"sif: error: {journal}: cannot write the journal: no space left on device" in (
            r.stderr
        )
        if journal.read_bytes().endswith(b"\n"):  # cut at a line's end: cut one short
            with open(journal, "ab") as f:
                f.write(b'{"j":"begin","step":9')
        os.truncate(filler, 0)
        r = sif("resume", str(journal))
        assert r.returncode == 0, r.stderr
        lines = journal.read_bytes().splitlines()
        assert all(json.loads(line) for line in lines)  # every line whole
        r = sif("undo", str(journal))
        assert r.returncode == 0, r.stderr
        assert "0 refused, 0 failed" in r.stderr
    assert contents(tree) == before
    assert len({os.stat(p).st_ino for p in before}) == inodes


@pytest.mark.parametrize("command", ["resume", "undo"])
def test_a_journal_held_by_another_sif_is_refused_and_left_alone(
    tmp_path: Path, command: str
) -> None:
    """One journal, one sif at a time: two ``resume`` runs of one journal both acted, and
    the loser's records hid steps from a later ``undo``. The second is refused (exit 3),
    the journal untouched; once the first has ended, the journal serves again."""
    import fcntl

    journal = linked(tmp_path, "abc")
    if command == "resume":  # a run killed after its last step, before its end record
        lines = journal.read_bytes().splitlines(keepends=True)
        journal.write_bytes(b"".join(x for x in lines if not x.startswith(b'{"j":"end"')))
    held = journal.read_bytes()
    fd = os.open(journal, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running sif holds it
        r = sif(command, str(journal))
        assert r.returncode == 3, r.stderr
        assert f"sif: error: {journal}: in use by another sif" in r.stderr
        assert journal.read_bytes() == held
    finally:
        os.close(fd)
    r = sif(command, str(journal))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["link", "dedupe", "remove", "resume", "undo"])
def test_a_report_or_journal_that_does_not_exist_is_a_usage_error(
    tmp_path: Path, command: str
) -> None:
    """Exit 2, as the README's table has it for a FILE that does not exist (link, dedupe and
    remove exited 3, resume and undo 2); nothing made."""
    r = sif(command, str(tmp_path / "missing.json"), env={"XDG_STATE_HOME": str(tmp_path / "s")})
    assert r.returncode == 2, r.stderr
    assert "missing.json' does not exist" in r.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.pop("j"),
        lambda d: d.update(keep=[1, 2]) if d["j"] == "step" else None,
        lambda d: d["drop"].update(path=7) if d["j"] == "step" else None,
        lambda d: d["keep"].pop("ino") if d["j"] == "step" else None,
        lambda d: d.update(index="0") if d["j"] == "step" else None,
        lambda d: d.update(action="shred") if d["j"] == "step" else None,
        lambda d: d.update(step=[0]) if d["j"] == "begin" else None,
        lambda d: d.update(index=5) if d["j"] == "step" else None,
    ],
)
@pytest.mark.parametrize("command", ["resume", "undo"])
def test_a_journal_edited_by_hand_is_one_line_naming_it(
    tmp_path: Path, command: str, edit: object
) -> None:
    """A record of the wrong shape is one line naming the journal and the line (exit 3),
    not a KeyError or TypeError; the files and the journal are left as they were."""
    journal = linked(tmp_path, "ab")
    docs = [json.loads(x) for x in journal.read_text().splitlines() if '"j":"end"' not in x]
    for d in docs[1:]:
        edit(d)  # type: ignore[operator]
    journal.write_text("".join(json.dumps(d) + "\n" for d in docs))
    before, held = snapshot(tmp_path / "t"), journal.read_bytes()
    r = sif(command, str(journal))
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith(f"sif: error: {journal}: ") and "a damaged journal" in r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert snapshot(tmp_path / "t") == before and journal.read_bytes() == held


@pytest.mark.parametrize("command", ["resume", "undo"])
def test_a_journal_of_another_machine_is_refused_by_resume_as_by_undo(
    tmp_path: Path, command: str
) -> None:
    """Its devices and inodes mean nothing here: resume acted on it (undo refused it)."""
    journal = linked(tmp_path, "ab")
    docs = [json.loads(x) for x in journal.read_text().splitlines() if '"j":"end"' not in x]
    docs[0]["host"] = "another-machine"
    journal.write_text("".join(json.dumps(d) + "\n" for d in docs))
    held = journal.read_bytes()
    r = sif(command, str(journal))
    assert r.returncode == 3, r.stderr
    assert "a journal of another machine ('another-machine')" in r.stderr
    assert journal.read_bytes() == held


def test_a_file_whose_name_is_near_the_limit_goes_to_the_trash_and_back(tmp_path: Path) -> None:
    """A name of 246-255 bytes made its info file's name too long: every such file failed.
    It goes to the trash under a shorter name (its info file holds the whole path), and
    undo brings it back under its own."""
    name = "é" * 120 + "x.txt"  # 245 bytes
    for n in (name, "y" + name, "a" * 250 + ".dat", "b" * 255):
        write(tmp_path / "a" / n, A + os.fsencode(n))  # four groups, kept under a/
        write(tmp_path / "b" / n, A + os.fsencode(n))
    report = saved_report(tmp_path, tmp_path / "a", tmp_path / "b", out=tmp_path / "r.json")
    before = contents(tmp_path / "b")
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "s")}
    journal = tmp_path / "j.jsonl"
    r = sif("remove", "--trash", "--journal", str(journal), str(report), env=env)
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path / "b") == []
    trashed = os.listdir(tmp_path / "data" / "Trash" / "files")
    assert len(trashed) == 4 and all(len(os.fsencode(t)) <= 241 for t in trashed)
    r = sif("undo", str(journal), env=env)
    assert r.returncode == 0, r.stderr
    assert contents(tmp_path / "b") == before


def test_a_journals_last_line_is_kept_when_whole_and_cut_when_damaged(tmp_path: Path) -> None:
    """Before resume or undo appends: a whole last record without its newline gets one (it
    was cut off, and a finished run was run again); a last line that is no JSON, even
    ending in a newline, is cut (it was buried under the new records: a damaged journal
    for good)."""
    journal = linked(tmp_path, "ab")
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-1])  # the end record without its newline
    r = sif("resume", str(journal))
    assert r.returncode == 3 and "that run finished: nothing to resume" in r.stderr
    assert journal.read_bytes() == whole
    journal.write_bytes(whole + b"{damaged\n")
    r = sif("undo", str(journal))
    assert r.returncode == 0, r.stderr
    lines = journal.read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)
    assert os.stat(tmp_path / "t" / "a" / "f").st_ino != os.stat(tmp_path / "t" / "b" / "f").st_ino


def test_undo_reads_a_journal_whose_header_is_longer_than_a_block(tmp_path: Path) -> None:
    """A report of many roots gives the journal a header line of hundreds of KB: undo and
    resume read it whole before they append (a first check read 64 KiB of it, and took
    the journal for none)."""
    roots = []
    for i in range(400):
        d = tmp_path / "t" / (f"{i:04d}" + "x" * 200)
        write(d / "f", A)
        roots.append(d)
    report = saved_report(tmp_path, *roots, out=tmp_path / "report.json")
    journal = tmp_path / "j.jsonl"
    env = {"XDG_STATE_HOME": str(tmp_path / "s")}
    assert sif("link", "-q", "--journal", str(journal), str(report), env=env).returncode == 0
    assert len(journal.read_bytes().split(b"\n", 1)[0]) > 1 << 16
    r = sif("undo", str(journal), env=env)
    assert r.returncode == 0, r.stderr
    assert "399 undone" in r.stderr
