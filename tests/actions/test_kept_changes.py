"""A kept copy changed after its re-check, before a step acts: the step is skipped.

The change keeps the kept copy's size and mtime (a write whose mtime is put
back, as ``rsync --inplace -t`` or a restore does, or a chmod): only its ctime
shows it. A hard link has the kept copy's bytes, owner and mode: linking the
dropped name to it then would lose the dropped file's bytes or give it another
mode. A symbolic link step that finds such a change skips it, and the later
steps of that kept copy do not forget it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionutil import report_of
from sif.actions import batches, plan_actions
from sif.actions.plan import Step
from sif.actions.run import Runner, _Ready
from treeutil import write

PAIRS = 20


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(batches, "FIRST_BATCH", 2)


class Hooked(Runner):
    """Calls ``before_act`` with each step's re-checked files, just before it acts."""

    before_act: Callable[[_Ready], None] = staticmethod(lambda r: None)

    def _act(self, r: _Ready) -> str:
        self.before_act(r)
        return super()._act(r)


def plan_of(tmp_path: Path, action: str) -> tuple[Any, Hooked]:
    root = tmp_path / "t"
    for i in range(PAIRS):  # a kept (first root), b and c dropped: two steps a kept copy
        for side in "abc":
            write(root / side / f"f{i:02}", f"pair {i}\n".encode() * (40 * i + 1))
    plan = plan_actions(report_of(*(root / s for s in "abc")), action)
    runner = Hooked(None, lambda w: None, threads=1)
    runner.batch = 3  # odd: a kept copy's two steps often straddle two batches
    return plan, runner


def rewrite_keeping_mtime(path: str) -> None:
    """New bytes in place, the same size, the mtime put back."""
    st = os.stat(path)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"X", 0)
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def run_changing(plan: Any, runner: Hooked, victim: Step, change: Callable[[str], None]) -> None:
    def before_act(r: _Ready) -> None:
        if r.step.index == victim.index:  # re-checked already: its files are open
            change(victim.keep.path)

    runner.before_act = before_act  # type: ignore[method-assign]
    runner.run_all(plan.steps)


def steps_of(plan: Any, keep: Step) -> list[Step]:
    return [s for s in plan.steps if s.keep.key == keep.keep.key]


@pytest.mark.parametrize(
    "change",
    [rewrite_keeping_mtime, lambda path: os.chmod(path, 0o600)],
    ids=["rewritten, mtime put back", "chmod"],
)
@pytest.mark.parametrize("which", [0, 1], ids=["first step", "second step"])
def test_a_link_to_a_kept_copy_changed_since_its_recheck_is_skipped(
    tmp_path: Path, change: Callable[[str], None], which: int
) -> None:
    plan, runner = plan_of(tmp_path, "link")
    victim = plan.steps[7 * 2 + which]  # a kept copy's first or second step
    before = {s.drop.path: Path(s.drop.path).read_bytes() for s in steps_of(plan, victim)}
    run_changing(plan, runner, victim, change)
    mine = steps_of(plan, victim)
    later = mine[mine.index(victim) :]
    for s in later:  # this step, and the kept copy's next one: left alone
        st = os.lstat(s.drop.path)
        assert (st.st_dev, st.st_ino) == s.drop.key, s.drop.path
        assert Path(s.drop.path).read_bytes() == before[s.drop.path]
    assert [w.path for w in runner.result.problems] == [victim.keep.path] * len(later)
    assert all("ctime differs" in w.cause for w in runner.result.problems)
    assert runner.result.skipped == len(later)
    assert runner.result.done == 2 * PAIRS - len(later)  # every other step linked


def test_a_symlink_step_that_finds_the_kept_copy_changed_is_not_forgotten(
    tmp_path: Path,
) -> None:
    plan, runner = plan_of(tmp_path, "symlink")
    cut = [b[0] for b in batches.batches(plan.steps, runner.batch, lambda: None)]
    victim, mine = next(  # a kept copy whose two steps are in two batches
        (b[-1], steps_of(plan, b[-1]))
        for b, nxt in itertools.pairwise(cut)
        if steps_of(plan, b[-1])[-1] in nxt
    )
    before = {s.drop.path: Path(s.drop.path).read_bytes() for s in mine}
    run_changing(plan, runner, victim, lambda path: os.chmod(path, 0o600))
    for s in mine:  # both steps skipped: the chmod is the user's, not sif's
        assert not os.path.islink(s.drop.path)
        assert Path(s.drop.path).read_bytes() == before[s.drop.path]
    assert runner.result.skipped == 2 and runner.result.done == 2 * PAIRS - 2
