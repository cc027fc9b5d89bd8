"""A killed run, settled from its journal: which interrupted step happened, then the rest.

A step that was begun but has no ``done`` record is inspected on disk
(:func:`_inspect`): whether its rename happened, and sif's own temporary
names are removed. :func:`reconcile` records what it finds (``done``,
inferred, or ``abandoned``); :func:`resume_journal` then runs the steps never
begun, and :func:`sif.actions.undo.undo_journal` reverses the done ones.
"""

from __future__ import annotations

import os
from typing import Any

from sif.actions.journal import Journal, JournalData, now, read_journal
from sif.actions.plan import Step
from sif.actions.run import Runner, RunResult
from sif.actions.trash import written_for
from sif.actions.verify import Expected
from sif.errors import InputError
from sif.events import WarningSink, ignore_warning


def _inspect(
    step: Step, begin: dict[str, Any], undoing: bool = False, put_back: list[str] | None = None
) -> bool:
    """After a kill mid-step: did the step happen? Cleans up sif's own temporary names.

    ``undoing`` (``sif undo``): a removal caught with its file parked under sif's
    temporary name is taken back (renamed to its own name) instead of finished: the
    file is still whole there, and finishing it deleted a file undo could restore."""
    drop, keep = step.drop, step.keep

    def key(path: str, follow: bool = False) -> tuple[int, int] | None:
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino)

    tmp = begin.get("tmp")
    if step.action in ("link", "symlink"):
        happened = key(drop.path, follow=step.action == "symlink") == keep.key and (
            step.action == "link" or os.path.islink(drop.path)
        )
        if tmp and os.path.lexists(tmp):
            if step.action == "link" and key(tmp) == keep.key and key(keep.path) == keep.key:
                os.unlink(tmp)  # a second name of the kept copy, made by sif
            elif (
                step.action == "symlink" and os.path.islink(tmp) and os.readlink(tmp) == step.target
            ):
                os.unlink(tmp)
        return happened
    if step.action == "remove":
        if tmp and key(tmp) == drop.key and key(drop.path) is None:
            if undoing:
                from sif.actions.fsops import rename_noreplace

                rename_noreplace(tmp, drop.path)  # parked, never removed: back in place
                if put_back is not None:
                    put_back.append(drop.path)
                return False
            os.unlink(tmp)  # renamed aside by sif after the re-check: finish the removal
            return True
        return key(drop.path) is None
    if step.action in ("trash", "move"):
        dest = begin.get("dest")
        if dest and key(dest) == drop.key and key(drop.path) is None:
            return True
        info = begin.get("info")
        if info and written_for(info, drop.path):
            os.unlink(info)  # sif's own reservation in the trash
        return False
    return False  # reflink: run it again (a no-op when the extents are shared)


def reconcile(
    data: JournalData,
    journal: Journal | None,
    runner: Runner | None,
    undoing: bool = False,
    put_back: list[str] | None = None,
) -> set[int]:
    """Settle the steps a kill interrupted; the indices of the steps that are done.
    ``undoing``: for ``sif undo`` (:func:`_inspect`), which lists in ``put_back`` the
    files a killed removal had parked and it put back."""
    done: set[int] = set()
    for step in data.steps:
        state = data.state(step.index)
        if state == "done":
            done.add(step.index)
            rec = data.last(step.index) or {}
            if runner is not None:
                for ref, fig in (
                    (step.keep, rec.get("keep_after")),
                    (step.drop, rec.get("drop_after")),
                ):
                    if fig:
                        runner.expected[ref.key] = Expected(fig[0], fig[1], fig[2])
        elif state == "begin":
            begin = data.last(step.index) or {}
            if runner is not None:
                runner.forget_ctime(step.keep)
                runner.forget_ctime(step.drop)
            if _inspect(step, begin, undoing, put_back):
                done.add(step.index)
                if journal is not None:
                    extra = {k: begin[k] for k in ("dest", "info") if k in begin}
                    journal.record("done", step.index, inferred=True, **extra)
                data.events[step.index].append({**begin, "j": "done"})
            elif journal is not None:
                journal.record("abandoned", step.index, at=now())
                data.events[step.index].append({"j": "abandoned", "step": step.index})
    return done


def resume_journal(path: str, *, on_warning: WarningSink = ignore_warning) -> RunResult:
    """Finish a run that was killed: settle its interrupted step, run the steps never begun."""
    from sif.actions.report import hostname

    first = read_journal(path)  # a journal, before anything opens it to write
    if first.header.get("host") != hostname():  # as undo: its devices and inodes are not here
        raise InputError(f"{path}: a journal of another machine ({first.header.get('host')!r})")
    j = Journal.append_to(path)
    try:
        data = read_journal(path)  # again, held: as no other run leaves it
        if data.ended:
            raise InputError(f"{path}: that run finished: nothing to resume")
    except BaseException:
        j.close(synced=True)
        raise
    runner = Runner(j, on_warning)
    ended = False
    try:
        reconcile(data, j, runner)
        runner.run_all(s for s in data.steps if data.state(s.index) in (None, "abandoned"))
        j.record("end", at=now(), sync=True)
        ended = True
    finally:
        j.close(synced=ended, failing=not ended)
    return runner.result
