"""A run stopped at one exact moment of a step (a real SIGKILL or Ctrl-C from inside the
process, where a system call of the step would be), then ``resume`` or ``undo``: no file
lost, and no file sif did not write removed (from the hostile test of the actions)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from actionutil import report_of, sif
from treeutil import write

DATA = b"the only bytes of this file\n" * 20

#: ``python -c`` that runs sif with one call of ``os.unlink``, ``os.link`` or
#: ``fsops.rename_noreplace`` stopped: argv[1] names the call, argv[2] the text its path
#: (the new name, for link and rename) holds, argv[3] ``kill`` (SIGKILL before the call)
#: or ``int`` (Ctrl-C right after it), optionally with the number of the matching call
#: (``kill:2``); then sif's own arguments.
STOPPED = """
import os, signal, sys
from sif.actions import fsops
what, mark, how = sys.argv[1:4]
how, _, nth = how.partition(":")
left = [int(nth or 1)]
sys.argv = ["sif", *sys.argv[4:]]
owner, name = {
    "unlink": (os, "unlink"), "link": (os, "link"), "rename": (fsops, "rename_noreplace"),
    "replace": (os, "replace"),
}[what]
real = getattr(owner, name)
def stopped(*args, **kw):
    target = os.fspath(args[0] if what == "unlink" else args[1])
    if mark not in target:
        return real(*args, **kw)
    left[0] -= 1
    if left[0]:
        return real(*args, **kw)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    real(*args, **kw)
    raise KeyboardInterrupt
setattr(owner, name, stopped)
from sif.cli import main
main()
"""


def stopped_run(what: str, mark: str, how: str, *args: str, env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", STOPPED, what, mark, how, *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode


def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    write(tmp_path / "a" / "f", DATA)
    write(tmp_path / "b" / "f", DATA)
    report = tmp_path / "report.json"
    report_of(tmp_path / "a", tmp_path / "b", path=report)
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_STATE_HOME": str(tmp_path / "state")}
    return report, env


def test_undo_of_a_remove_killed_with_its_file_parked_puts_the_file_back(
    tmp_path: Path,
) -> None:
    """Killed between parking the file under sif's temporary name and removing it: the
    file is whole there. ``undo`` renames it back (it finished the removal, then said a
    removed file cannot be brought back)."""
    report, env = setup(tmp_path)
    journal = tmp_path / "j.jsonl"
    rc = stopped_run(
        "unlink", ".sif-", "kill", "remove", "--journal", str(journal), str(report), env=env
    )
    assert rc == -9
    parked = [p for p in os.listdir(tmp_path / "b") if p.startswith(".sif-")]
    assert parked and not (tmp_path / "b" / "f").exists()  # the moment meant
    r = sif("undo", str(journal), env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b" / "f").read_bytes() == DATA
    assert os.listdir(tmp_path / "b") == ["f"]


def test_ctrl_c_just_after_the_rename_into_the_trash_keeps_its_info_file(
    tmp_path: Path,
) -> None:
    """Ctrl-C right after the file went into the trash: exit 130, and its ``.trashinfo``
    stays (sif removed it, leaving a trashed file no trash tool could list or restore);
    ``resume`` then counts the step done."""
    report, env = setup(tmp_path)
    journal = tmp_path / "j.jsonl"
    trash = tmp_path / "data" / "Trash"
    rc = stopped_run(
        "rename", "/Trash/files/", "int", "remove", "--trash", "--journal", str(journal),
        str(report), env=env,
    )  # fmt: skip
    assert rc == 130
    assert os.listdir(trash / "files") == ["f"] and not (tmp_path / "b" / "f").exists()
    info = (trash / "info" / "f.trashinfo").read_text()
    assert f"Path={tmp_path}/b/f\n" in info
    r = sif("resume", str(journal), env=env)
    assert r.returncode == 0, r.stderr
    assert (trash / "info" / "f.trashinfo").read_text() == info
    r = sif("undo", str(journal), env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b" / "f").read_bytes() == DATA
    assert os.listdir(trash / "files") == [] and os.listdir(trash / "info") == []


def test_resume_and_undo_leave_a_trashinfo_another_program_wrote(tmp_path: Path) -> None:
    """Killed after it reserved a trash entry, before the rename; then the user emptied
    the trash and another program trashed a file of the same name. ``resume`` and ``undo``
    leave that program's ``.trashinfo`` (they removed it as their own)."""
    for command in ("resume", "undo"):
        top = tmp_path / command
        report, env = setup(top)
        journal = top / "j.jsonl"
        trash = top / "data" / "Trash"
        rc = stopped_run(
            "rename", "/Trash/files/", "kill", "remove", "--trash", "--journal", str(journal),
            str(report), env=env,
        )  # fmt: skip
        assert rc == -9
        info = trash / "info" / "f.trashinfo"
        assert f"Path={top}/b/f\n" in info.read_text()  # sif's reservation
        info.unlink()  # the trash emptied, then another file trashed under that name
        theirs = f"[Trash Info]\nPath={top}/other/f\nDeletionDate=2026-12-05T10:00:00\n"
        info.write_text(theirs)
        write(trash / "files" / "f", b"another program's file\n")
        r = sif(command, str(journal), env=env)
        assert r.returncode == 0, r.stderr
        assert info.read_text() == theirs
        assert (trash / "files" / "f").read_bytes() == b"another program's file\n"
        if command == "undo":  # the step never happened: nothing to undo, the file stays
            assert (top / "b" / "f").read_bytes() == DATA
        else:  # run again: into the trash under a free name, with its own info file
            assert not (top / "b" / "f").exists()
            assert (trash / "files" / "f.1").read_bytes() == DATA
            assert f"Path={top}/b/f\n" in (trash / "info" / "f.1.trashinfo").read_text()


def test_undo_of_a_killed_link_keeps_hard_links_of_a_dropped_file_together(
    tmp_path: Path,
) -> None:
    """``b/f`` and ``b/h`` are one file; the run is killed after linking ``b/f``, before
    ``b/h``. ``undo`` makes ``b/f`` a hard link of ``b/h`` again, the dropped file itself
    (a copy split them: the README says names that were hard links of one dropped file
    are hard links of one restored file again)."""
    report, env = setup(tmp_path)
    os.link(tmp_path / "b" / "f", tmp_path / "b" / "h")
    report_of(tmp_path / "a", tmp_path / "b", path=report)
    journal = tmp_path / "j.jsonl"
    rc = stopped_run(
        "link", "/b/.sif-", "kill:2", "link", "--journal", str(journal), str(report), env=env
    )
    assert rc == -9
    a, f, h = (os.stat(tmp_path / p) for p in ("a/f", "b/f", "b/h"))
    assert f.st_ino == a.st_ino != h.st_ino  # the moment meant: one name linked, one not
    r = sif("undo", str(journal), env=env)
    assert r.returncode == 0, r.stderr
    f2, h2 = os.stat(tmp_path / "b" / "f"), os.stat(tmp_path / "b" / "h")
    assert f2.st_ino == h2.st_ino == h.st_ino and h2.st_nlink == 2
    assert (tmp_path / "b" / "f").read_bytes() == DATA


def test_ctrl_c_just_after_a_link_step_made_its_name_leaves_no_temporary_name(
    tmp_path: Path,
) -> None:
    """Ctrl-C right after the hard link of the kept copy was made under sif's temporary
    name: exit 130, and that name is gone (it stayed, a second name of the kept copy)."""
    report, env = setup(tmp_path)
    journal = str(tmp_path / "j")
    rc = stopped_run("link", "/b/.sif-", "int", "link", "--journal", journal, str(report), env=env)
    assert rc == 130
    assert os.listdir(tmp_path / "b") == ["f"]
    assert os.stat(tmp_path / "a" / "f").st_nlink == 1


def test_undo_again_after_an_undo_stopped_just_after_a_step_says_it_is_undone(
    tmp_path: Path,
) -> None:
    """An undo stopped right after it put a file back, before it recorded so: the next
    undo counts that step undone (it refused it: 'no longer a hard link of the kept copy',
    exit 1), for a link and for a move to the trash."""
    for action in (["link"], ["remove", "--trash"]):
        top = tmp_path / action[-1].strip("-")
        report, env = setup(top)
        journal = str(top / "j.jsonl")
        assert sif(*action, "--journal", journal, str(report), env=env).returncode == 0
        what, mark = ("replace", "/b/f") if action == ["link"] else ("rename", "/b/f")
        assert stopped_run(what, mark, "int", "undo", journal, env=env) == 130
        r = sif("undo", journal, env=env)
        assert r.returncode == 0, r.stderr
        assert "1 undone, 0 refused" in r.stderr
        assert (top / "b" / "f").read_bytes() == DATA
        assert os.stat(top / "b" / "f").st_ino != os.stat(top / "a" / "f").st_ino


def test_ctrl_c_just_after_a_link_step_renamed_exits_130_and_undo_reverses_it(
    tmp_path: Path,
) -> None:
    """Ctrl-C right after the rename that made ``b/f`` a hard link of the kept copy: the
    cleanup of the temporary name (gone with the rename) failed, hid the Ctrl-C (exit 1,
    the run went on) and recorded the step, done, as failed: undo never reversed it."""
    report, env = setup(tmp_path)
    journal = str(tmp_path / "j.jsonl")
    rc = stopped_run("replace", "/b/f", "int", "link", "--journal", journal, str(report), env=env)
    assert rc == 130
    assert os.stat(tmp_path / "b" / "f").st_ino == os.stat(tmp_path / "a" / "f").st_ino
    r = sif("undo", journal, env=env)
    assert r.returncode == 0, r.stderr
    assert "1 undone" in r.stderr
    assert os.stat(tmp_path / "b" / "f").st_ino != os.stat(tmp_path / "a" / "f").st_ino


def test_undo_again_after_an_undo_killed_before_it_removed_a_trashinfo_removes_it(
    tmp_path: Path,
) -> None:
    report, env = setup(tmp_path)
    journal = str(tmp_path / "j.jsonl")
    assert sif("remove", "--trash", "--journal", journal, str(report), env=env).returncode == 0
    assert stopped_run("unlink", "/Trash/info/", "kill", "undo", journal, env=env) == -9
    info = tmp_path / "data" / "Trash" / "info"
    assert os.listdir(info) == ["f.trashinfo"] and (tmp_path / "b" / "f").exists()
    r = sif("undo", journal, env=env)
    assert r.returncode == 0, r.stderr
    assert os.listdir(info) == []


def test_undo_of_a_remove_with_files_gone_still_puts_the_parked_one_back(
    tmp_path: Path,
) -> None:
    """A remove killed after its first batch of steps was recorded done, with a file parked:
    undo cannot bring the removed files back (exit 3, as before), but it puts the parked
    one back first (it refused before looking, and resume would have deleted it)."""
    for g in range(150):
        write(tmp_path / "a" / f"f{g}", DATA + b"%d" % g)
        write(tmp_path / "b" / f"f{g}", DATA + b"%d" % g)
    report = tmp_path / "report.json"
    report_of(tmp_path / "a", tmp_path / "b", path=report)
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    journal = str(tmp_path / "j.jsonl")
    args = ["remove", "--journal", journal, str(report)]
    rc = stopped_run("unlink", ".sif-", "kill:140", *args, env=env)
    assert rc == -9
    parked = [p for p in os.listdir(tmp_path / "b") if p.startswith(".sif-")]
    assert len(parked) == 1 and b'"j":"done"' in Path(journal).read_bytes()
    r = sif("undo", journal, env=env)
    assert r.returncode == 3, r.stderr
    assert "that cannot be undone; 1 a kill left parked put back" in r.stderr
    assert not [p for p in os.listdir(tmp_path / "b") if p.startswith(".sif-")]
    assert len(os.listdir(tmp_path / "b")) == 150 - 139
