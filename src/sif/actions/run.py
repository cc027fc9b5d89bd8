"""Running a plan: each step re-checked, journaled, then done atomically.

For every step, in order:

1. **re-check** (:mod:`sif.actions.verify`): open the kept copy and the file
   to drop as the report's inodes, check size, mtime and ctime, compare the
   bytes through both descriptors. Any difference: the step is *skipped*
   with a warning naming the file and the cause;
2. **journal**: a ``begin`` record naming the temporary name the step will
   use, fsynced before the step acts (steps go in batches of up to
   :data:`sif.actions.batches.BATCH`: each is re-checked, their records fsynced at once, then
   each runs);
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
   kept inode's ctime: the next step of the group expects that), written
   with the next batch's ``begin`` records;
5. the dropped file's descriptor, open until after the rename, is closed by
   eight threads beside the run (:class:`Closer`): where that close frees
   the file's blocks, the file system's wait (a discard) overlaps the next
   steps instead of stalling them.

A batch's re-checks, then its steps, are shared by two lanes (threads,
:mod:`sif.actions.lanes`: the reads and the file-system calls release the
GIL): the steps of one kept inode go to one lane, in plan order, so steps of
different lanes touch different inodes. Every outcome is settled (journaled,
counted, named) in plan order by the calling thread; no step acts before its
batch's ``begin`` records are fsynced.

A step that fails (permission denied, read-only file system, disk full)
leaves its file as it was, removes its temporary name, and is counted and
named. A killed run is finished by :func:`sif.actions.resume.resume_journal`
or reversed by :func:`sif.actions.undo.undo_journal`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sif.actions import fsops
from sif.actions.batches import batch_size, batches
from sif.actions.journal import Journal, begin_line, done_line, now
from sif.actions.lanes import Ahead, Closer, Failed, Lanes, attempt, default_threads
from sif.actions.plan import FileRef, Plan, Step
from sif.actions.verify import Changed, Comparer, Expected, check_stat, recheck_pair
from sif.events import ScanWarning, WarningSink, ignore_warning

if TYPE_CHECKING:
    from sif.actions.trash import TrashCan

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


def _figures(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class _Ready:
    """A step re-checked and about to run: both files open, its ``begin`` record made."""

    __slots__ = ("after", "begin", "dfd", "dst", "keep_now", "kfd", "kst", "outcome", "step")

    def __init__(
        self,
        step: Step,
        kfd: int,
        kst: os.stat_result,
        dfd: int,
        dst: os.stat_result,
        begin: dict[str, str],
    ) -> None:
        self.step = step
        self.kfd = kfd
        self.kst = kst
        self.dfd = dfd
        self.dst = dst
        self.begin = begin
        """The names the step will use (``tmp``; ``dest``, ``info``), for its ``begin`` record."""
        self.outcome: Any = None
        """Once run (in its lane): ``"done"`` or a :class:`Failed`; settled in plan order."""
        self.after: tuple[os.stat_result, os.stat_result | None, dict[str, str]] | None = None
        """What a done step left: both files' ``fstat`` (the dropped one's if it has other
        names) and the names for its ``done`` record."""
        self.keep_now: os.stat_result | None = None
        """A failed link's kept inode, changed (ctime) by sif's own link and unlink only."""

    def close(self, later: list[int] | None = None) -> None:
        """Close both files (once); the dropped one's descriptor goes to ``later``, if given."""
        if self.kfd >= 0:
            os.close(self.kfd)
            self.kfd = -1
        if self.dfd >= 0:
            if later is None:
                os.close(self.dfd)
            else:
                later.append(self.dfd)
            self.dfd = -1


def _close_checked(checked: list[Any] | None) -> None:
    """Close the files of every re-checked step of ``checked`` (never run)."""
    for out in checked or ():
        if isinstance(out, _Ready):
            out.close()


_SHARED = "shared"
"""A reflink step's re-check found the extents shared already: a no-op."""
_ERRORS = (Changed, OSError)
"""A step's own errors: :class:`Changed` skips it, an ``OSError`` fails it."""


class Runner:
    """Runs steps in order, with what sif's own earlier steps changed in mind.

    Steps go in batches: each step of a batch is re-checked (both files
    opened, figures and bytes compared) and gets its ``begin`` record; the
    records are written and fsynced at once (with the ``done`` records of
    the batch before); then each step runs, checking both descriptors and
    the name once more just before its rename. A batch ends early before a
    step touching an inode that an earlier step of the batch changes (the
    other names of a file with hard links). The dropped files' descriptors
    are closed by a :class:`Closer`.

    With ``threads`` above one, a batch's re-checks are shared by that many
    lanes (:class:`sif.actions.lanes.Lanes`), and so are its steps, all the
    steps of one kept inode in one lane, in plan order (the steps of
    different lanes touch different inodes); every outcome is then settled
    (journaled, counted, warned about) in plan order, here.
    """

    def __init__(
        self, journal: Journal | None, on_warning: WarningSink, threads: int | None = None
    ) -> None:
        self.journal = journal
        self.on_warning = on_warning
        self.expected: dict[tuple[int, int], Expected] = {}
        self.lanes = Lanes(default_threads() if threads is None else threads)
        self.comparers = [Comparer() for _ in range(self.lanes.size)]
        self.comparer = Comparer()
        """The re-checks of the next batch, in :class:`Ahead`'s thread."""
        self.ahead = True
        """Re-check the next batch while one runs (where they touch no inode in common)."""
        self.cans: dict[int, TrashCan] = {}
        self.result = RunResult(journal.path if journal else None)
        self.batch = batch_size()
        self.closer = Closer()
        self._done: list[bytes] = []
        """``done`` records not yet written: they go with the next batch's ``begin`` records."""
        self._linked: dict[tuple[int, int], int] = {}
        """The ctime sif's last link of this batch left on a kept inode (each kept inode's
        steps are in one lane: only that lane reads and writes its entry)."""

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

    def run_all(self, steps: Iterable[Step]) -> None:
        """Run ``steps`` in order, in batches (see the class): while one batch runs, the
        next one is re-checked in a thread of its own when the two touch no inode in
        common (its re-check then cannot depend on what this batch leaves)."""
        todo = batches(steps, self.batch, self._noop)
        checked: list[Any] | None = None  # the current batch's re-checks, until it has run
        ahead: Ahead | None = None  # the next batch's, until they are in ``checked``
        try:
            cur = next(todo, None)
            while cur is not None:
                nxt = next(todo, None)  # a lazy plan: a Ctrl-C may come here too
                if checked is None:
                    checked = self._recheck_here(cur[0])
                if self.ahead and nxt is not None and not (cur[1] & nxt[1]):
                    ahead = Ahead(functools.partial(self._recheck_ahead, nxt[0]))
                    ahead.start()
                self._run_checked(cur[0], checked)
                checked = None
                if ahead is not None:
                    checked = ahead.join()  # on any error, closed below
                    ahead = None
                cur = nxt
            self._journal_batch([], sync=False)  # the last done records: the end record syncs
        except BaseException:  # every file still open is closed (closing twice is a no-op)
            if ahead is not None:
                _close_checked(ahead.abandon())
            _close_checked(checked)
            raise
        finally:
            self.lanes.shutdown()
            self.closer.shutdown()
            self.result.bytes_read = sum(c.bytes_read for c in (*self.comparers, self.comparer))

    def _noop(self) -> None:
        self.result.noops += 1

    def _recheck_here(self, steps: list[Step]) -> list[Any]:
        """The re-checks of ``steps``, in this thread's lanes (every file closed on an error)."""
        checked: list[Any] = [None] * len(steps)
        try:
            self._recheck_all(steps, checked)
        except BaseException:
            _close_checked(checked)
            raise
        return checked

    def _recheck_ahead(self, steps: list[Step], ahead: Ahead) -> list[Any]:
        """The re-checks of ``steps`` in :class:`Ahead`'s thread (``None`` for those a stop
        left undone)."""
        checked: list[Any] = [None] * len(steps)
        try:
            for i, step in enumerate(steps):
                if ahead.stop:
                    break
                checked[i] = attempt(_ERRORS, self._recheck, step, self.comparer)
        except BaseException:  # not a step's own error: nothing of this batch runs
            _close_checked(checked)
            raise
        return checked

    def run(self, step: Step) -> None:
        """Run one step on its own."""
        self.run_all([step])

    def _journal_batch(self, batch: list[_Ready], sync: bool = True) -> None:
        """Write the ``begin`` records of ``batch`` (and the pending ``done`` records) and
        fsync them: one write and one fsync, before any step of ``batch`` acts."""
        if self.journal is None or not (batch or self._done):
            return
        at = now()
        lines = [*self._done, *(begin_line(r.step.index, r.dst, at, r.begin) for r in batch)]
        self._done = []
        self.journal.write(b"".join(lines), sync=sync)

    def _run_checked(self, steps: list[Step], checked: list[Any]) -> None:
        """Journal ``steps`` (re-checked: ``checked``), run them (in lanes), settle them."""
        later: list[int] = []
        try:
            ready: list[_Ready] = []
            for step, out in zip(steps, checked, strict=True):  # in plan order
                if out is _SHARED:
                    self.result.noops += 1
                elif isinstance(out, Failed):
                    self._settle_error(step, out.exc)
                elif isinstance(self._guard(step, self._names, out), _Ready):
                    ready.append(out)
                else:
                    out.close()
            self._journal_batch(ready)
            self._act_all(ready)
            for r in ready:
                self._settle(r)
                r.close(later)
        finally:
            for out in checked:  # an interrupt: every file still open is closed
                if isinstance(out, _Ready):
                    out.close(later)
            self.closer.close_all(later)

    def _recheck_all(self, steps: list[Step], checked: list[Any]) -> None:
        """Fill ``checked`` with each step's re-check: a :class:`_Ready`, :data:`_SHARED`
        or a :class:`Failed`; the lanes take the next step as each is done."""
        todo = iter(range(len(steps)))  # shared by the lanes: next() is atomic

        def lane(comparer: Comparer) -> None:
            for i in todo:
                if self.lanes.stop:
                    return
                checked[i] = attempt(_ERRORS, self._recheck, steps[i], comparer)

        n = min(self.lanes.size, len(steps))
        self.lanes.run([functools.partial(lane, c) for c in self.comparers[:n]])

    def _act_all(self, ready: list[_Ready]) -> None:
        """Run ``ready``'s steps: those of one kept inode in one lane, in plan order,
        each kept inode in the lane with the fewest steps so far."""
        self._linked = {}
        n = min(self.lanes.size, len(ready))
        parts: list[list[_Ready]] = [[] for _ in range(n)]
        lane_of: dict[tuple[int, int], list[_Ready]] = {}
        for r in ready:
            part = lane_of.get(r.step.keep.key)
            if part is None:
                part = lane_of[r.step.keep.key] = min(parts, key=len)
            part.append(r)

        def lane(part: list[_Ready]) -> None:
            for r in part:
                if self.lanes.stop:
                    return
                r.outcome = attempt(_ERRORS, self._act, r)

        self.lanes.run([functools.partial(lane, p) for p in parts if p])

    def _guard(self, step: Step, func: Any, *args: Any) -> Any:
        """``func(*args)``; a :class:`Changed` skips the step, an ``OSError`` fails it."""
        try:
            return func(*args)
        except _ERRORS as exc:
            self._settle_error(step, exc)
        return None

    def _settle_error(self, step: Step, exc: BaseException) -> None:
        """Journal, name and count a step's error: a :class:`Changed` skips the step,
        an ``OSError`` fails it."""
        if isinstance(exc, Changed):
            self._record("skipped", step.index, cause=str(exc))
            self._warn(exc.path, f"{exc.cause}: skipped, left as it was")
            self.result.skipped += 1
        else:
            assert isinstance(exc, OSError)
            cause = exc.strerror or str(exc)
            self._record("failed", step.index, cause=cause)
            self._warn(step.drop.path, f"{step.action} failed ({cause}): left as it was")
            self.result.failed += 1

    def _recheck(self, step: Step, comparer: Comparer) -> _Ready | str:
        """Re-check ``step`` (in a lane: reads :attr:`expected`, changes nothing here); its
        files stay open for the run (closed here on any failure)."""
        keep, drop = step.keep, step.drop
        kfd, kst, dfd, dst = recheck_pair(keep, self.want(keep), drop, self.want(drop), comparer)
        try:
            if step.action == "reflink" and fsops.extents_shared(kfd, dfd):
                os.close(kfd)
                os.close(dfd)
                return _SHARED
            return _Ready(step, kfd, kst, dfd, dst, {})
        except BaseException:
            os.close(kfd)
            os.close(dfd)
            raise

    def _names(self, r: _Ready) -> _Ready:
        """The names ``r``'s step will use, for its ``begin`` record (here, in plan order:
        a trash entry is reserved by creating its info file)."""
        step, begin = r.step, r.begin
        if step.action in ("link", "symlink", "remove"):
            begin["tmp"] = fsops.temp_name(os.path.dirname(step.drop.path))
        elif step.action == "move":
            assert step.target is not None  # the plan gives every move its destination
            begin["dest"] = step.target
        elif step.action == "trash":
            from sif.actions.trash import reserve, trash_can

            can = self.cans.get(step.drop.dev)
            if can is None:
                can = self.cans[step.drop.dev] = trash_can(step.drop.path, step.drop.dev)
            # The info file reserves the name: a kill before the fsync of the begin
            # records leaves at most an info file (sif's own) without its file.
            begin["dest"], begin["info"] = reserve(step.drop.path, can)
        return r

    def _still(self, r: _Ready, linked: bool = False) -> None:
        """Nothing changed since the re-check: both inodes, and the target's name.

        ``linked``: sif itself just gave the kept inode a name (its ctime changed;
        so did the ctime an earlier step of the batch left).
        """
        step = r.step
        k, d, kst, dst = os.fstat(r.kfd), os.fstat(r.dfd), r.kst, r.dst
        ctime_too = not (linked or step.action == "link")
        if (k.st_size, k.st_mtime_ns) != (kst.st_size, kst.st_mtime_ns) or (
            ctime_too and k.st_ctime_ns != kst.st_ctime_ns
        ):
            want = Expected.now(kst)
            check_stat(step.keep.path, k, want if ctime_too else want._replace(ctime_ns=None))
        if (d.st_size, d.st_mtime_ns, d.st_ctime_ns) != (
            dst.st_size,
            dst.st_mtime_ns,
            dst.st_ctime_ns,
        ):
            check_stat(step.drop.path, d, Expected.now(dst))
        try:
            lst = os.lstat(step.drop.path)
        except FileNotFoundError:
            raise Changed(step.drop.path, "vanished during the step") from None
        if (lst.st_dev, lst.st_ino) != step.drop.key:
            raise Changed(step.drop.path, "replaced by another file during the step")

    def _kept_as_checked(self, r: _Ready) -> None:
        """Just before a hard link: the kept inode as re-checked, its ctime too (or the one
        sif's own last link of this batch left on it). A link has one owner, mode and
        content, the kept copy's: a chmod, or a write with its mtime put back, since the
        re-check would pass to the dropped file's name unseen (``_still`` cannot look at
        the ctime once sif's own link has changed it)."""
        k, kst = os.fstat(r.kfd), r.kst
        ctime = self._linked.get(r.step.keep.key, kst.st_ctime_ns)
        if (k.st_size, k.st_mtime_ns, k.st_ctime_ns) != (kst.st_size, kst.st_mtime_ns, ctime):
            check_stat(r.step.keep.path, k, Expected(kst.st_size, kst.st_mtime_ns, ctime))

    def _after(self, r: _Ready, **extra: str) -> None:
        """Note what the step left (in its lane); :meth:`_settle` takes it from there."""
        ka = os.fstat(r.kfd)
        da = os.fstat(r.dfd) if r.dst.st_nlink != 1 else None
        r.after = (ka, da, extra)

    def _settle(self, r: _Ready) -> None:
        """Account for a step that ran (here, in plan order): what it left becomes what the
        next steps expect, its ``done`` record waits for the next batch's write."""
        step = r.step
        if isinstance(r.outcome, Failed):
            if r.keep_now is not None:
                # sif's own link and unlink changed the kept inode's ctime, nothing else.
                self.expected[step.keep.key] = Expected.now(r.keep_now)
            self._settle_error(step, r.outcome.exc)
            return
        assert r.outcome == "done" and r.after is not None
        ka, dst, extra = r.after
        self.result.done += 1
        self.expected[step.keep.key] = Expected.now(ka)
        last_name = dst is None  # the dropped file had no other name: nothing looks for it again
        if dst is not None:
            self.expected[step.drop.key] = Expected.now(dst)  # for its other names
        if step.action in RECLAIMING and (last_name or step.action == "reflink"):
            self.result.bytes_reclaimed += step.drop.size
        elif step.action in ("trash", "move") and last_name:
            self.result.bytes_moved += step.drop.size
        if self.journal is not None:
            da = None if dst is None else _figures(dst)
            self._done.append(done_line(step.index, _figures(ka), da, extra))

    def _act(self, r: _Ready) -> str:
        step = r.step
        action, drop = step.action, step.drop
        if action == "reflink":
            self._still(r)
            fsops.dedupe_range(r.kfd, r.dfd, drop.size)
            self._after(r)
            return "done"
        if action in ("link", "symlink"):
            tmp = r.begin["tmp"]
            if action == "link":
                self._kept_as_checked(r)
            try:
                if action == "link":
                    os.link(step.keep.path, tmp, follow_symlinks=False)
                    made = os.lstat(tmp)
                else:
                    os.symlink(step.target or "", tmp)
                    made = os.stat(tmp)
            except FileExistsError:
                raise OSError(errno.EEXIST, "the temporary name was taken", tmp) from None
            except BaseException:  # a Ctrl-C just after the name was made: it goes too
                with contextlib.suppress(OSError):
                    if _made_by_step(tmp, step):
                        os.unlink(tmp)
                raise
            try:
                if (made.st_dev, made.st_ino) != step.keep.key:
                    raise Changed(step.keep.path, "replaced by another file during the step")
                self._still(r, linked=action == "link")
                os.replace(tmp, drop.path)
            except BaseException:
                # The name sif just made, never the user's file; gone already after a
                # Ctrl-C just past the rename (its unlink's failure hid the Ctrl-C, and the
                # step, done, was recorded failed: undo never reversed it).
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                now_k = os.fstat(r.kfd)
                if action == "link" and (now_k.st_size, now_k.st_mtime_ns) == (
                    r.kst.st_size,
                    r.kst.st_mtime_ns,
                ):  # a symbolic link leaves the kept inode alone: its ctime is the user's
                    r.keep_now = now_k  # sif's own link and unlink changed its ctime, only
                    self._linked[step.keep.key] = now_k.st_ctime_ns
                raise
            self._after(r)
            if action == "link":
                assert r.after is not None
                self._linked[step.keep.key] = r.after[0].st_ctime_ns
            return "done"
        if action == "remove":
            tmp = r.begin["tmp"]
            self._still(r)
            self._park_and_check(drop, tmp)
            os.unlink(tmp)
            self._after(r)
            return "done"
        dest = r.begin["dest"]
        if action == "trash":
            info = r.begin["info"]
            try:
                self._still(r)
                self._park_and_check(drop, dest)
            except BaseException:
                # sif's own info file, unless the file is in the trash all the same (a
                # Ctrl-C just after the rename): then it describes the file, which a trash
                # tool could neither list nor restore without it.
                if _key_of(dest) != drop.key:
                    os.unlink(info)
                raise
            self._after(r, dest=dest, info=info)
            return "done"
        assert action == "move"
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        self._still(r)
        self._park_and_check(drop, dest)
        self._after(r, dest=dest)
        return "done"

    @staticmethod
    def _park_and_check(drop: FileRef, dest: str) -> None:
        """Rename ``drop`` to ``dest`` (never over a name); put it back if it was not the inode."""
        fsops.rename_noreplace(drop.path, dest)
        st = os.lstat(dest)
        if (st.st_dev, st.st_ino) != drop.key:
            fsops.rename_noreplace(dest, drop.path)
            raise Changed(drop.path, "replaced by another file during the step")


def _made_by_step(tmp: str, step: Step) -> bool:
    """Whether ``tmp`` is the name the link step just made: a hard link of the kept copy,
    or the symbolic link it writes."""
    if step.action == "symlink":
        return os.path.islink(tmp) and os.readlink(tmp) == (step.target or "")
    return _key_of(tmp) == step.keep.key


def _key_of(path: str) -> tuple[int, int] | None:
    """The (device, inode) at ``path`` (not followed), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _header(plan: Plan) -> dict[str, Any]:
    from sif import __version__
    from sif.actions.report import hostname

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
        "host": hostname(),
        "started": now(),
    }


def run_plan(
    plan: Plan,
    *,
    journal: str | None = None,
    use_journal: bool = True,
    on_warning: WarningSink = ignore_warning,
    on_journal: Callable[[str], None] | None = None,
    threads: int | None = None,
) -> RunResult:
    """Run every step of ``plan``; journal it to ``journal`` (default: the state directory).

    Per-file problems go to ``on_warning`` (and into the result's
    ``problems``); the run always goes on to the next step. ``on_journal``
    is told the journal's path once it exists, before the first step.
    ``threads``: lanes sharing each batch's re-checks and steps (default
    :data:`sif.actions.lanes.THREADS`, at most the CPUs this process may use).
    """
    j = Journal.create(_header(plan), plan.steps, journal) if use_journal else None
    if j is not None and on_journal is not None:
        on_journal(j.path)
    runner = Runner(j, on_warning, default_threads(threads))
    ended = False
    try:
        runner.run_all(plan.steps)
        if j is not None:
            j.record("end", at=now(), sync=True)
            ended = True
    finally:
        if j is not None:
            j.close(synced=ended, failing=not ended)  # the end record's fsync: all durable
    return runner.result
