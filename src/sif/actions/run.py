"""Running a plan: each step re-checked, journaled, then done atomically.

For every step, in order:

1. **re-check** (:mod:`sif.actions.verify`): open the kept copy and the file
   to drop as the report's inodes, check size, mtime and ctime, compare the
   bytes through both descriptors. Any difference: the step is *skipped*
   with a warning naming the file and the cause;
2. **journal**: a ``begin`` record naming the temporary name the step will
   use, fsynced;
3. **act**, so that a kill at any moment leaves the old file or the new one,
   never neither:

   - ``link``/``symlink``: the link is made under a temporary name beside the
     target (``.sif-<random>.tmp``), checked to be the kept inode, and
     renamed over the target;
   - ``reflink``: ``FIDEDUPERANGE``; the kernel compares the bytes again
     under its locks and shares the extents in place;
   - ``remove``: the target is renamed to a temporary name, checked to be the
     re-checked inode (else put back), then unlinked;
   - ``trash``/``move``: renamed into the trash (:mod:`sif.actions.trash`) or
     under ``--to``, never over an existing name;

   just before the rename, both descriptors are ``fstat``-ed again: a file
   written to during the step is left alone;
4. a ``done`` record with what the step left (sif's own step changes the
   kept inode's ctime: the next step of the group expects that).

A step that fails (permission denied, read-only file system, disk full)
leaves its file as it was, removes its temporary name, and is counted and
named. A killed run is finished by :func:`resume_journal` or reversed by
:func:`sif.actions.undo.undo_journal`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sif.actions import fsops
from sif.actions.journal import Journal, JournalData, now, read_journal
from sif.actions.plan import FileRef, Plan, Step
from sif.actions.trash import TrashCan, reserve, trash_can
from sif.actions.verify import Changed, Comparer, Expected, check_stat, open_checked
from sif.errors import InputError
from sif.events import ScanWarning, WarningSink, display_path, ignore_warning

RECLAIMING = frozenset({"link", "symlink", "reflink", "remove"})


@dataclass
class RunResult:
    """Figures of one run (or resume) of a plan."""

    journal: str | None
    done: int = 0
    noops: int = 0
    skipped: int = 0
    failed: int = 0
    bytes_reclaimed: int = 0
    bytes_moved: int = 0
    bytes_read: int = 0
    problems: list[ScanWarning] = field(default_factory=list)


def _meta(st: os.stat_result) -> dict[str, int]:
    return {
        "mode": st.st_mode,
        "uid": st.st_uid,
        "gid": st.st_gid,
        "atime_ns": st.st_atime_ns,
        "mtime_ns": st.st_mtime_ns,
    }


def _figures(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class Runner:
    """Runs steps one by one, with what sif's own earlier steps changed in mind."""

    def __init__(self, journal: Journal | None, on_warning: WarningSink) -> None:
        self.journal = journal
        self.on_warning = on_warning
        self.expected: dict[tuple[int, int], Expected] = {}
        self.comparer = Comparer()
        self.cans: dict[int, TrashCan] = {}
        self.result = RunResult(journal.path if journal else None)

    def _record(self, kind: str, step: int, **fields: Any) -> None:
        if self.journal is not None:
            self.journal.record(kind, step, **fields)

    def want(self, ref: FileRef) -> Expected:
        return self.expected.get(ref.key) or Expected.of(ref)

    def forget_ctime(self, ref: FileRef) -> None:
        w = self.want(ref)
        self.expected[ref.key] = Expected(w.size, w.mtime_ns, None)

    def _warn(self, path: str, cause: str) -> None:
        w = ScanWarning(path, cause)
        self.result.problems.append(w)
        self.on_warning(w)

    def run(self, step: Step) -> str:
        """Run one step; its outcome: ``done``, ``noop``, ``skipped`` or ``failed``."""
        if step.noop is not None:
            self.result.noops += 1
            return "noop"
        try:
            outcome = self._run(step)
        except Changed as exc:
            self._record("skipped", step.index, cause=str(exc))
            self._warn(exc.path, f"{exc.cause}: skipped, left as it was")
            self.result.skipped += 1
            return "skipped"
        except OSError as exc:
            cause = exc.strerror or str(exc)
            self._record("failed", step.index, cause=cause)
            self._warn(step.drop.path, f"{step.action} failed ({cause}): left as it was")
            self.result.failed += 1
            return "failed"
        if outcome == "noop":
            self.result.noops += 1
        else:
            self.result.done += 1
        return outcome

    def _run(self, step: Step) -> str:
        keep, drop = step.keep, step.drop
        kfd, kst = open_checked(keep, self.want(keep))
        try:
            dfd, dst = open_checked(drop, self.want(drop))
            try:
                if not self.comparer.same(kfd, dfd, keep.size):
                    raise Changed(
                        drop.path, f"its bytes differ from the kept copy {display_path(keep.path)}"
                    )
                return self._act(step, kfd, kst, dfd, dst)
            finally:
                self.result.bytes_read = self.comparer.bytes_read
                os.close(dfd)
        finally:
            os.close(kfd)

    def _still(
        self,
        step: Step,
        kfd: int,
        kst: os.stat_result,
        dfd: int,
        dst: os.stat_result,
        linked: bool = False,
    ) -> None:
        """Nothing changed since the re-check: both inodes, and the target's name.

        ``linked``: sif itself just gave the kept inode a name (its ctime changed).
        """
        want = Expected.now(kst)
        check_stat(
            step.keep.path,
            os.fstat(kfd),
            want if not linked else Expected(want.size, want.mtime_ns, None),
        )
        check_stat(step.drop.path, os.fstat(dfd), Expected.now(dst))
        try:
            lst = os.lstat(step.drop.path)
        except FileNotFoundError:
            raise Changed(step.drop.path, "vanished during the step") from None
        if (lst.st_dev, lst.st_ino) != step.drop.key:
            raise Changed(step.drop.path, "replaced by another file during the step")

    def _after(self, step: Step, kfd: int, dfd: int, dst: os.stat_result, **extra: Any) -> None:
        ka, da = os.fstat(kfd), os.fstat(dfd)
        self.expected[step.keep.key] = Expected.now(ka)
        self.expected[step.drop.key] = Expected.now(da)
        last_name = dst.st_nlink == 1
        if step.action in RECLAIMING and (last_name or step.action == "reflink"):
            self.result.bytes_reclaimed += step.drop.size
        elif step.action in ("trash", "move") and last_name:
            self.result.bytes_moved += step.drop.size
        self._record("done", step.index, keep_after=_figures(ka), drop_after=_figures(da), **extra)

    def _act(self, step: Step, kfd: int, kst: os.stat_result, dfd: int, dst: os.stat_result) -> str:
        action, drop = step.action, step.drop
        directory = os.path.dirname(drop.path)
        if action == "reflink":
            if fsops.extents_shared(kfd, dfd):
                return "noop"
            self._record("begin", step.index, meta=_meta(dst), at=now())
            fsops.dedupe_range(kfd, dfd, drop.size)
            self._after(step, kfd, dfd, dst)
            return "done"
        if action in ("link", "symlink"):
            tmp = fsops.temp_name(directory)
            self._record("begin", step.index, tmp=tmp, meta=_meta(dst), at=now())
            try:
                if action == "link":
                    os.link(step.keep.path, tmp, follow_symlinks=False)
                    made = os.lstat(tmp)
                else:
                    os.symlink(step.target or "", tmp)
                    made = os.stat(tmp)
            except FileExistsError:
                raise OSError(errno.EEXIST, "the temporary name was taken", tmp) from None
            try:
                if (made.st_dev, made.st_ino) != step.keep.key:
                    raise Changed(step.keep.path, "replaced by another file during the step")
                self._still(step, kfd, kst, dfd, dst, linked=action == "link")
                os.replace(tmp, drop.path)
            except BaseException:
                os.unlink(tmp)  # the name sif just made, never the user's file
                raise
            self._after(step, kfd, dfd, dst)
            return "done"
        if action == "remove":
            tmp = fsops.temp_name(directory)
            self._record("begin", step.index, tmp=tmp, meta=_meta(dst), at=now())
            self._still(step, kfd, kst, dfd, dst)
            self._park_and_check(drop, tmp)
            os.unlink(tmp)
            self._after(step, kfd, dfd, dst)
            return "done"
        if action == "trash":
            can = self.cans.get(drop.dev)
            if can is None:
                can = self.cans[drop.dev] = trash_can(drop.path, drop.dev)
            self._record("begin", step.index, can=can.root, meta=_meta(dst), at=now())
            dest, info = reserve(drop.path, can)
            self._record("begin", step.index, dest=dest, info=info, meta=_meta(dst), at=now())
            try:
                self._still(step, kfd, kst, dfd, dst)
                self._park_and_check(drop, dest)
            except BaseException:
                os.unlink(info)  # sif's own info file
                raise
            self._after(step, kfd, dfd, dst, dest=dest, info=info)
            return "done"
        assert action == "move" and step.target is not None
        self._record("begin", step.index, dest=step.target, meta=_meta(dst), at=now())
        os.makedirs(os.path.dirname(step.target), exist_ok=True)
        self._still(step, kfd, kst, dfd, dst)
        self._park_and_check(drop, step.target)
        self._after(step, kfd, dfd, dst, dest=step.target)
        return "done"

    @staticmethod
    def _park_and_check(drop: FileRef, dest: str) -> None:
        """Rename ``drop`` to ``dest`` (never over a name); put it back if it was not the inode."""
        fsops.rename_noreplace(drop.path, dest)
        st = os.lstat(dest)
        if (st.st_dev, st.st_ino) != drop.key:
            fsops.rename_noreplace(dest, drop.path)
            raise Changed(drop.path, "replaced by another file during the step")


def probe_reflink(plan: Plan) -> list[str]:
    """Probe each target directory once (``FIDEDUPERANGE`` of 0 bytes); drop its steps if it cannot.

    Returns one message per directory whose file system cannot share extents.
    """
    from sif.fileio import open_regular

    verdict: dict[str, str | None] = {}
    for s in plan.active:
        d = os.path.dirname(s.drop.path)
        if d in verdict:
            continue
        try:
            fd, _ = open_regular(s.drop.path, follow_symlinks=False)
        except OSError:
            continue  # the step's own re-check names it
        try:
            fsops.probe_dedupe(fd)
            verdict[d] = None
        except OSError as exc:
            if exc.errno in fsops.NO_REFLINK_ERRNOS:
                verdict[d] = exc.strerror or str(exc)
        finally:
            os.close(fd)
    messages = []
    for d, why in verdict.items():
        if why is not None:
            n = sum(1 for s in plan.active if os.path.dirname(s.drop.path) == d)
            messages.append(
                f"{display_path(d)}: this file system cannot share extents "
                f"(FIDEDUPERANGE: {why}): {n} file(s) left as they are"
            )
    bad = {d for d, why in verdict.items() if why is not None}
    plan.steps = [s for s in plan.steps if os.path.dirname(s.drop.path) not in bad]
    plan.refused.extend(messages)
    return messages


def _header(plan: Plan) -> dict[str, Any]:
    import socket

    from sif import __version__

    return {
        "action": plan.action,
        "policy": {
            "rules": list(plan.policy.rules),
            "keep_paths": list(plan.policy.keep_paths),
            "only_paths": list(plan.policy.only_paths),
            "rf_over": plan.policy.rf_over,
        },
        "report": plan.source,
        "sif_version": __version__,
        "host": socket.gethostname(),
        "started": now(),
    }


def run_plan(
    plan: Plan,
    *,
    journal: str | None = None,
    use_journal: bool = True,
    on_warning: WarningSink = ignore_warning,
) -> RunResult:
    """Run every step of ``plan``; journal it to ``journal`` (default: the state directory).

    Per-file problems go to ``on_warning`` (and into the result's
    ``problems``); the run always goes on to the next step.
    """
    j = Journal.create(_header(plan), plan.steps, journal) if use_journal else None
    runner = Runner(j, on_warning)
    try:
        for step in plan.steps:
            runner.run(step)
        if j is not None:
            j.record("end", at=now(), sync=True)
    finally:
        if j is not None:
            j.close()
    return runner.result


def _inspect(step: Step, begin: dict[str, Any]) -> bool:
    """After a kill mid-step: did the step happen? Cleans up sif's own temporary names."""
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
            os.unlink(tmp)  # renamed aside by sif after the re-check: finish the removal
            return True
        return key(drop.path) is None
    if step.action in ("trash", "move"):
        dest = begin.get("dest")
        if dest and key(dest) == drop.key and key(drop.path) is None:
            return True
        info = begin.get("info")
        if info and os.path.isfile(info) and not os.path.islink(info):
            os.unlink(info)  # sif's own reservation in the trash
        return False
    return False  # reflink: run it again (a no-op when the extents are shared)


def reconcile(data: JournalData, journal: Journal | None, runner: Runner | None) -> set[int]:
    """Settle the steps a kill interrupted; the indices of the steps that are done."""
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
            if _inspect(step, begin):
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
    data = read_journal(path)
    if data.ended:
        raise InputError(f"{path}: that run finished: nothing to resume")
    j = Journal.append_to(path)
    runner = Runner(j, on_warning)
    try:
        reconcile(data, j, runner)
        for step in data.steps:
            if data.state(step.index) in (None, "abandoned"):
                runner.run(step)
        j.record("end", at=now(), sync=True)
    finally:
        j.close()
    return runner.result


def outcomes(steps: Iterable[Step], data: JournalData) -> dict[str, int]:
    """How many steps of a journal ended how (``done``, ``skipped``...)."""
    counts: dict[str, int] = {}
    for s in steps:
        state = data.state(s.index) or ("noop" if s.noop else "not run")
        counts[state] = counts.get(state, 0) + 1
    return counts
