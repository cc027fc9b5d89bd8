"""Runs whose re-checks and steps are shared by two lanes (threads), end to end.

Many groups in small batches, two lanes: a file changed after the report
(size and mtime restored) is still skipped, every other step is journaled
(``begin`` then ``done``) and done; both lanes did re-checks and steps. A
Ctrl-C in the middle of a batch (during its re-checks or its steps) stops
both lanes, leaves no descriptor open and no temporary name, every file
with its bytes, and a journal that ``sif resume`` finishes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from actionutil import (
    assert_resume_finishes,
    assert_stopped_cleanly,
    contents,
    open_fds,
    report_of,
    sif,
)
from sif.actions import plan_actions
from sif.actions.journal import Journal, now, read_journal
from sif.actions.lanes import Lanes
from sif.actions.run import Runner, _header, _Ready
from sif.actions.verify import Comparer
from treeutil import write

GROUPS = 30


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def many_groups(root: Path) -> None:
    """Groups of three files; every fourth group's dropped file in c has a second name."""
    for i in range(GROUPS):
        data = f"group {i}\n".encode() * (50 * i + 1)
        for side in ("a", "b", "c"):
            write(root / side / f"f{i}", data)
        if i % 4 == 0:
            os.link(root / "c" / f"f{i}", root / "c" / f"g{i}")


class Recording(Comparer):
    """A comparer that notes the threads it compared in (and can be interrupted): the
    Python re-check, whose comparison is a method it can wrap."""

    def __init__(
        self, interrupt_at: int | None = None, helped: threading.Event | None = None
    ) -> None:
        super().__init__(compiled=False)
        self.threads: set[int] = set()
        self.calls = 0
        self.interrupt_at = interrupt_at
        self.helped = helped

    def same(self, fd_a: int, fd_b: int, size: int) -> bool:
        self.threads.add(threading.get_ident())
        if self.helped is not None:  # the main lane's first compare waits for the other's
            if threading.current_thread() is not threading.main_thread():
                self.helped.set()
            elif self.calls == 0:
                self.helped.wait(10)
        if threading.current_thread() is threading.main_thread():
            self.calls += 1
            if self.calls == self.interrupt_at:
                raise KeyboardInterrupt
        return super().same(fd_a, fd_b, size)


class Recorder(Runner):
    """A runner that notes the threads its steps ran in (and can be interrupted)."""

    def __init__(self, *args: Any, interrupt_at: int | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.act_threads: set[int] = set()
        self.acts = 0
        self.interrupt_at = interrupt_at

    def _act(self, r: _Ready) -> str:
        self.act_threads.add(threading.get_ident())
        if threading.current_thread() is threading.main_thread():
            self.acts += 1
            if self.acts == self.interrupt_at:
                raise KeyboardInterrupt
        return super()._act(r)


def start(tmp_path: Path, **kw: Any) -> tuple[Path, Path, Any, Journal, Recorder]:
    root = tmp_path / "t"
    many_groups(root)
    plan = plan_actions(report_of(root / "a", root / "b", root / "c"), "link")
    journal = tmp_path / "j.jsonl"
    j = Journal.create(_header(plan), plan.steps, str(journal))
    runner = Recorder(j, lambda w: None, threads=2, **kw)
    runner.batch = 7  # several batches, each shared by both lanes
    return root, journal, plan, j, runner


def test_two_lanes_skip_a_file_changed_after_the_report_and_journal_every_step(
    tmp_path: Path,
) -> None:
    root, journal, plan, j, runner = start(tmp_path)
    # Under load the main lane could take every step before the other starts: it
    # waits (10 s at most) for the other lane's first compare.
    helped = threading.Event()
    runner.comparers = [Recording(helped=helped), Recording(helped=helped)]
    victim = root / "c" / "f13"
    st = os.stat(victim)
    changed = victim.read_bytes()[:-2] + b"X\n"
    victim.write_bytes(changed)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))  # size and mtime as before
    before = contents(root)
    runner.run_all(plan.steps)
    j.record("end", at=now(), sync=True)
    j.close()
    result = runner.result
    assert result.skipped == 1 and result.failed == 0
    assert result.done == len(plan.active) - 1
    assert [w.path for w in result.problems] == [str(victim)]
    assert "changed since the report" in result.problems[0].cause
    assert len(set().union(*(c.threads for c in runner.comparers))) == 2  # type: ignore[attr-defined]
    assert len(runner.act_threads) == 2
    assert contents(root) == before and victim.read_bytes() == changed
    assert os.stat(victim).st_ino == st.st_ino
    for i in range(GROUPS):
        names = [root / side / f"f{i}" for side in ("a", "b", "c")]
        inodes = {os.lstat(p).st_ino for p in names}
        if i == 13:
            assert inodes == {os.lstat(names[0]).st_ino, st.st_ino}
        else:
            assert len(inodes) == 1
    data = read_journal(str(journal))
    assert data.ended
    for s in data.steps:
        if s.drop.path == str(victim):
            assert data.state(s.index) == "skipped" and data.find(s.index, "begin") is None
        else:
            assert data.state(s.index) == "done" and data.find(s.index, "begin"), s
    r = sif("undo", str(journal))
    assert r.returncode == 0, r.stderr
    assert contents(root) == before


@pytest.mark.parametrize("where", ["recheck", "act"])
def test_a_ctrl_c_in_a_batch_stops_both_lanes_and_resume_finishes(
    tmp_path: Path, where: str
) -> None:
    open_before = open_fds()
    if where == "act":
        root, journal, plan, j, runner = start(tmp_path, interrupt_at=9)
    else:
        root, journal, plan, j, runner = start(tmp_path)
        runner.comparers = [Recording(interrupt_at=9), Recording()]
    before = contents(root)
    with pytest.raises(KeyboardInterrupt):
        runner.run_all(plan.steps)
    j.close()
    assert 0 < runner.result.done < len(plan.active)
    assert_stopped_cleanly(root, before, open_before)
    assert_resume_finishes(journal, root, before)
    for i in range(GROUPS):
        assert len({os.lstat(root / side / f"f{i}").st_ino for side in ("a", "b", "c")}) == 1


def test_lanes_wait_for_every_lane_and_raise_a_lane_error_after() -> None:
    lanes = Lanes(2)
    done: list[str] = []

    def fails() -> None:
        raise ValueError("a bug in a lane")

    def slow() -> None:
        threading.Event().wait(0.05)
        done.append("slow")

    with pytest.raises(ValueError, match="a bug in a lane"):
        lanes.run([slow, fails])
    assert done == ["slow"]
    lanes.run([lambda: done.append("here"), lambda: done.append("there")])
    assert sorted(done) == ["here", "slow", "there"]
    lanes.shutdown()


def test_link_jobs_option_runs_two_lanes_and_refuses_zero(tmp_path: Path) -> None:
    """``sif link -j 2`` shares the work between two lanes (the default is one) with the
    same outcome; ``-j 0`` is a usage error that changes nothing."""
    root = tmp_path / "t"
    many_groups(root)
    saved = tmp_path / "r.json"
    r = sif("dupes", "--format", "json", "-q", str(root / "a"), str(root / "b"), str(root / "c"))
    saved.write_text(r.stdout)
    before = contents(root)
    bad = sif("link", "-j", "0", str(saved))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert contents(root) == before
    run = sif("link", "-j", "2", "--journal", str(tmp_path / "j.jsonl"), str(saved))
    assert run.returncode == 0, run.stderr
    assert contents(root) == before  # same bytes under every name
    assert len({os.stat(root / side / "f3").st_ino for side in "abc"}) == 1
    data = read_journal(str(tmp_path / "j.jsonl"))
    assert data.ended and data.steps
    assert all(data.state(s.index) == "done" for s in data.steps if s.noop is None)
