"""The next batch re-checked in a thread of its own while one batch runs.

Pairs of replicas in batches of four (the first of two): every batch after
the first is re-checked in the ``sif-ahead`` thread, none before its
``begin`` records. A file written to after that early re-check, before its
step, is still left alone (the step's own ``fstat`` just before the rename).
Two batches that share an inode are never overlapped. A Ctrl-C while a
batch runs and the next is re-checked stops both, leaves no descriptor open
and no temporary name, and ``sif resume`` finishes the run.
"""

from __future__ import annotations

import itertools
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
)
from sif.actions import batches, plan_actions
from sif.actions.journal import Journal, now, read_journal
from sif.actions.plan import Step
from sif.actions.run import Runner, _header, _Ready
from sif.actions.verify import Comparer
from treeutil import write

PAIRS = 20


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(batches, "FIRST_BATCH", 2)


def pairs(root: Path, triples: bool = False) -> None:
    for i in range(PAIRS):
        data = f"pair {i}\n".encode() * (40 * i + 1)
        for side in ("a", "b", "c") if triples else ("a", "b"):
            write(root / side / f"f{i:02}", data)


class Watcher(Runner):
    """Notes the thread each step was re-checked in, and the steps journaled so far."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.batch = 4
        self.where: dict[int, str] = {}
        self.begun_before: dict[int, int] = {}
        self.journaled = 0
        self.after_recheck: Any = None
        self.before_act: Any = None

    def _recheck(self, step: Step, comparer: Comparer) -> Any:
        self.where[step.index] = threading.current_thread().name
        self.begun_before[step.index] = self.journaled
        out = super()._recheck(step, comparer)
        if self.after_recheck is not None:
            self.after_recheck(step)
        return out

    def _journal_batch(self, batch: list[_Ready], sync: bool = True) -> None:
        super()._journal_batch(batch, sync)
        self.journaled += len(batch)

    def _act(self, r: _Ready) -> str:
        if self.before_act is not None:
            self.before_act(r)
        return super()._act(r)


def start(tmp_path: Path, triples: bool = False) -> tuple[Path, Path, Any, Journal, Watcher]:
    root = tmp_path / "t"
    pairs(root, triples)
    sides = ("a", "b", "c") if triples else ("a", "b")
    plan = plan_actions(report_of(*(root / s for s in sides)), "link")
    journal = tmp_path / "j.jsonl"
    j = Journal.create(_header(plan), plan.steps, str(journal))
    return root, journal, plan, j, Watcher(j, lambda w: None, threads=1)


def test_later_batches_are_rechecked_ahead_and_a_file_changed_after_it_is_left_alone(
    tmp_path: Path,
) -> None:
    root, journal, plan, j, runner = start(tmp_path)
    victim = root / "b" / "f11"
    before = contents(root)

    def change(step: Step) -> None:
        if step.drop.path == str(victim):  # after its re-check, before its step
            with open(victim, "ab") as f:
                f.write(b"late\n")

    runner.after_recheck = change
    runner.run_all(plan.steps)
    j.record("end", at=now(), sync=True)
    j.close()
    order = [s.index for s in plan.active]
    assert [runner.where[i] for i in order[:2]] == ["MainThread"] * 2
    assert {runner.where[i] for i in order[2:]} == {"sif-ahead"}

    def steps_before(b: int) -> int:  # batches of 2, then 4
        return 0 if b == 0 else 2 + 4 * (b - 1)

    for n, i in enumerate(order[2:]):  # re-checked after batch b-2 ran, before b journaled
        b = n // 4 + 1
        assert steps_before(b - 1) <= runner.begun_before[i] <= steps_before(b), (n, i)
    result = runner.result
    assert result.skipped == 1 and result.done == PAIRS - 1, result.problems
    assert [w.path for w in result.problems] == [str(victim)]
    assert victim.read_bytes() == before[str(victim)] + b"late\n"
    for i in range(PAIRS):
        a, b = root / "a" / f"f{i:02}", root / "b" / f"f{i:02}"
        assert (os.lstat(a).st_ino == os.lstat(b).st_ino) == (b != victim)
    data = read_journal(str(journal))
    assert data.ended
    assert sorted(data.state(s.index) for s in data.steps) == ["done"] * (PAIRS - 1) + ["skipped"]


def test_batches_sharing_an_inode_are_not_overlapped(tmp_path: Path) -> None:
    root, _, plan, j, runner = start(tmp_path, triples=True)  # a kept, b and c dropped
    runner.batch = 3  # odd: a group's two steps often straddle two batches
    runner.run_all(plan.steps)
    j.record("end", at=now(), sync=True)
    j.close()
    cut = list(batches.batches(plan.steps, runner.batch, lambda: None))
    for (_, cur_keys), (nxt, nxt_keys) in itertools.pairwise(cut):
        want = "MainThread" if cur_keys & nxt_keys else "sif-ahead"
        assert {runner.where[s.index] for s in nxt} == {want}
    assert any(a[1] & b[1] for a, b in itertools.pairwise(cut))
    assert runner.result.done == 2 * PAIRS
    for i in range(PAIRS):
        assert len({os.lstat(root / s / f"f{i:02}").st_ino for s in "abc"}) == 1


def test_a_ctrl_c_while_the_next_batch_is_rechecked_closes_all_and_resume_finishes(
    tmp_path: Path,
) -> None:
    open_before = open_fds()
    root, journal, plan, j, runner = start(tmp_path)
    rechecked_ahead = threading.Event()
    acts = []

    def noted(step: Step) -> None:
        if threading.current_thread().name == "sif-ahead":
            rechecked_ahead.set()

    def interrupt(r: _Ready) -> None:
        acts.append(r.step.index)
        if len(acts) == 4:  # the second batch's second step: the third batch is re-checked
            assert rechecked_ahead.wait(10)
            raise KeyboardInterrupt

    runner.after_recheck = noted
    runner.before_act = interrupt
    before = contents(root)
    with pytest.raises(KeyboardInterrupt):
        runner.run_all(plan.steps)
    j.close()
    assert runner.result.done == 2  # the first batch settled; the second interrupted
    assert not any(t.name == "sif-ahead" for t in threading.enumerate())
    assert_stopped_cleanly(root, before, open_before)
    assert_resume_finishes(journal, root, before)
    for i in range(PAIRS):
        assert os.lstat(root / "a" / f"f{i:02}").st_ino == os.lstat(root / "b" / f"f{i:02}").st_ino


def test_a_ctrl_c_while_the_plan_gives_the_next_batch_closes_the_files_rechecked_ahead(
    tmp_path: Path,
) -> None:
    open_before = open_fds()
    root, journal, plan, j, runner = start(tmp_path)
    before = contents(root)

    def steps() -> Any:  # a lazy plan, as resume's: the Ctrl-C comes as it gives step 9
        for n, step in enumerate(plan.steps):
            if n == 9:  # batch 2 (steps 2-5) re-checked ahead, batch 3 being cut
                raise KeyboardInterrupt
            yield step

    with pytest.raises(KeyboardInterrupt):
        runner.run_all(steps())
    j.close()
    assert {runner.where[s.index] for s in plan.steps[2:6]} == {"sif-ahead"}
    assert runner.result.done == 2
    assert not any(t.name == "sif-ahead" for t in threading.enumerate())
    assert_stopped_cleanly(root, before, open_before)
    assert_resume_finishes(journal, root, before)
    for i in range(PAIRS):
        assert os.lstat(root / "a" / f"f{i:02}").st_ino == os.lstat(root / "b" / f"f{i:02}").st_ino
