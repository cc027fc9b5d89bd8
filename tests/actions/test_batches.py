"""Runs made of many small batches (a low descriptor limit), end to end.

Every file linked, nothing skipped, the journal complete; resume and undo
work from a journal that lost the ``done`` records a kill can take with it
(they wait for the next batch's write); no descriptor is left open.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest

from actionutil import contents, sif
from sif.actions.journal import read_journal
from treeutil import write

GROUPS = 40


def many_groups(root: Path) -> None:
    """Groups of three files (a kept copy used by two steps, which batches of two split)
    and, every fifth group, a dropped file with two names (which ends a batch)."""
    for i in range(GROUPS):
        data = f"group {i}\n".encode() * (i + 1)
        for side in ("a", "b", "c"):
            write(root / side / f"f{i}", data)
        if i % 5 == 0:
            os.link(root / "c" / f"f{i}", root / "c" / f"g{i}")


def low_fd_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (80, hard))  # batches of two steps


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def test_small_batches_link_everything_and_undo_restores_it(tmp_path: Path) -> None:
    root = tmp_path / "t"
    many_groups(root)
    before = contents(root)
    r = sif("dupes", "--format", "json", "-q", str(root / "a"), str(root / "b"), str(root / "c"))
    report = tmp_path / "report.json"
    report.write_text(r.stdout)
    journal = tmp_path / "j.jsonl"
    r = sif("link", "--journal", str(journal), str(report), preexec_fn=low_fd_limit)
    steps = GROUPS * 2 + GROUPS // 5
    assert r.returncode == 0, r.stderr
    assert f"{steps:,} done, 0 no-ops, 0 skipped, 0 failed" in r.stderr
    for i in range(GROUPS):
        inodes = {os.lstat(root / side / f"f{i}").st_ino for side in ("a", "b", "c")}
        assert inodes == {os.lstat(root / "a" / f"f{i}").st_ino}
    assert contents(root) == before
    data = read_journal(str(journal))
    assert data.ended and len(data.steps) == steps
    assert all(data.state(s.index) == "done" and data.find(s.index, "begin") for s in data.steps)
    r = sif("undo", str(journal))
    assert r.returncode == 0, r.stderr
    assert contents(root) == before
    assert len({os.lstat(p).st_ino for p in before}) == len(before) - GROUPS // 5


def test_resume_and_undo_settle_steps_whose_done_records_a_kill_took(tmp_path: Path) -> None:
    """``done`` records wait for the next batch's fsync: a kill may take a batch of them.
    The files say which steps happened; resume finishes the rest, undo reverses all."""
    from sif.actions import plan_actions, read_report
    from sif.actions.journal import Journal
    from sif.actions.run import Runner, _header

    root = tmp_path / "t"
    many_groups(root)
    before = contents(root)
    r = sif("dupes", "--format", "json", "-q", str(root / "a"), str(root / "b"), str(root / "c"))
    report = tmp_path / "report.json"
    report.write_text(r.stdout)
    plan = plan_actions(read_report(str(report)), "link")
    journal = tmp_path / "j.jsonl"
    j = Journal.create(_header(plan), plan.steps, str(journal))
    runner = Runner(j, lambda w: None)
    runner.batch = 2
    runner.run_all(plan.steps[:31])  # then killed: no end record
    j.close()
    assert runner.result.done == 31
    # ...and the done records of steps 11 to 30 never reached the file.
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(
        b"".join(
            line
            for line in lines
            if not (json.loads(line)["j"] == "done" and json.loads(line)["step"] > 10)
        )
    )
    r = sif("resume", str(journal))
    assert r.returncode == 0, r.stderr
    assert f"{len(plan.steps) - 31} done, 0 no-ops, 0 skipped, 0 failed" in r.stderr
    for i in range(GROUPS):
        inodes = {os.lstat(root / side / f"f{i}").st_ino for side in ("a", "b", "c")}
        assert len(inodes) == 1
    assert contents(root) == before
    r = sif("undo", str(journal))
    assert r.returncode == 0, r.stderr
    assert f"{len(plan.steps)} undone, 0 refused" in r.stderr
    assert contents(root) == before
    assert len({os.lstat(p).st_ino for p in before}) == len(before) - GROUPS // 5


def test_a_run_in_process_leaves_no_descriptor_open(tmp_path: Path) -> None:
    from sif.actions import plan_actions, read_report, run_plan

    root = tmp_path / "t"
    many_groups(root)
    r = sif("dupes", "--format", "json", "-q", str(root / "a"), str(root / "b"), str(root / "c"))
    report = tmp_path / "report.json"
    report.write_text(r.stdout)
    plan = plan_actions(read_report(str(report)), "link")
    open_before = set(os.listdir("/proc/self/fd"))
    result = run_plan(plan, journal=str(tmp_path / "j.jsonl"))
    assert result.done == len(plan.active) and not result.problems
    assert set(os.listdir("/proc/self/fd")) <= open_before
