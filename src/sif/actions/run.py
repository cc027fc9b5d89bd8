"""Running a plan: each step re-checked, journaled, then done atomically.

For every step, in order:

1. **re-check** (:mod:`sif.actions.verify`): open the kept copy and the file
   to drop as the report's inodes, check size, mtime and ctime, compare the
   bytes through both descriptors. Any difference: the step is *skipped*
   with a warning naming the file and the cause;
2. **journal**: a ``begin`` record naming the temporary name the step will
   use, fsynced before the step acts (steps go in batches of up to
   :data:`BATCH`: each is re-checked, their records fsynced at once, then
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
   a few threads beside the run (:class:`_Closer`): where that close frees
   the file's blocks, the file system's wait (a discard) overlaps the next
   steps instead of stalling them.

A step that fails (permission denied, read-only file system, disk full)
leaves its file as it was, removes its temporary name, and is counted and
named. A killed run is finished by :func:`sif.actions.resume.resume_journal`
or reversed by :func:`sif.actions.undo.undo_journal`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sif.actions import fsops
from sif.actions.journal import Journal, begin_line, done_line, now
from sif.actions.plan import FileRef, Plan, Step
from sif.actions.verify import Changed, Comparer, Expected, check_stat, open_checked
from sif.events import ScanWarning, WarningSink, display_path, ignore_warning

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


BATCH = 128
"""Steps re-checked, then journaled with one fsync, then run: fsyncs are what a run waits on."""


def batch_size() -> int:
    """:data:`BATCH`, or fewer where the descriptor limit is low: a step holds two
    descriptors, and the dropped files' wait for :class:`_Closer` (two batches behind)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return BATCH
    if soft == resource.RLIM_INFINITY:
        return BATCH
    return max(1, min(BATCH, (soft - 64) // (2 + 2 * _Closer.BEHIND)))


class _Ready:
    """A step re-checked and about to run: both files open, its ``begin`` record made."""

    __slots__ = ("begin", "dfd", "dst", "kfd", "kst", "step")

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


class _Closer:
    """Closes the dropped files' descriptors, in a few threads of their own.

    The last close of a file whose last name is gone frees its blocks; where
    the file system discards freed blocks at once (ext4 ``-o discard``), that
    is a wait on the device, file after file: without this, most of a run's
    time. Each batch's descriptors are closed here, in :attr:`THREADS`
    chunks, while the next batch runs; the waits overlap. The descriptors
    are read-only: closing them changes nothing else.
    """

    THREADS = 3
    BEHIND = 2
    """Batches whose descriptors may wait to be closed (then the run waits)."""

    def __init__(self) -> None:
        self.todo: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()
        self.finished: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.pending = 0
        self.threads: list[threading.Thread] = []

    def close_all(self, fds: list[int]) -> None:
        if not fds:
            return
        if not self.threads:
            for i in range(self.THREADS):
                t = threading.Thread(target=self._loop, name=f"sif-close-{i}", daemon=True)
                t.start()
                self.threads.append(t)
        n = -(-len(fds) // self.THREADS)
        for i in range(0, len(fds), n):
            self.todo.put(fds[i : i + n])
            self.pending += 1
        while self.pending > self.BEHIND * self.THREADS:
            self.finished.get()
            self.pending -= 1

    def _loop(self) -> None:
        while (chunk := self.todo.get()) is not None:
            for fd in chunk:
                with contextlib.suppress(OSError):  # read-only: nothing to lose
                    os.close(fd)
            self.finished.put(len(chunk))

    def shutdown(self) -> None:
        """Return once every descriptor handed over is closed."""
        for _ in self.threads:
            self.todo.put(None)
        for t in self.threads:
            t.join()
        self.threads = []
        self.pending = 0
        self.finished = queue.SimpleQueue()


class Runner:
    """Runs steps in order, with what sif's own earlier steps changed in mind.

    Steps go in batches: each step of a batch is re-checked (both files
    opened, figures and bytes compared) and gets its ``begin`` record; the
    records are written and fsynced at once (with the ``done`` records of
    the batch before); then each step runs, checking both descriptors and
    the name once more just before its rename. A batch ends early before a
    step touching an inode that an earlier step of the batch changes (the
    other names of a file with hard links). The dropped files' descriptors
    are closed by a :class:`_Closer`.
    """

    def __init__(self, journal: Journal | None, on_warning: WarningSink) -> None:
        self.journal = journal
        self.on_warning = on_warning
        self.expected: dict[tuple[int, int], Expected] = {}
        self.comparer = Comparer()
        self.cans: dict[int, TrashCan] = {}
        self.result = RunResult(journal.path if journal else None)
        self.batch = batch_size()
        self.closer = _Closer()
        self._done: list[bytes] = []
        """``done`` records not yet written: they go with the next batch's ``begin`` records."""

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
        """Run ``steps`` in order, in batches (see the class)."""
        batch: list[_Ready] = []
        touched: set[tuple[int, int]] = set()
        try:
            for step in steps:
                if step.noop is not None:
                    self.result.noops += 1
                    continue
                if step.drop.key in touched or len(batch) >= self.batch:
                    self._run_batch(batch)
                    batch, touched = [], set()
                ready = self._guard(step, self._prepare, step)
                if isinstance(ready, _Ready):
                    batch.append(ready)
                    touched.add(step.drop.key)
            self._run_batch(batch)
            self._journal_batch([], sync=False)  # the last done records: the end record syncs
        finally:
            for r in batch:  # an interrupt: closed before anything was done to them
                r.close()
            self.closer.shutdown()

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

    def _run_batch(self, batch: list[_Ready]) -> None:
        """Journal ``batch``, then run each of its steps."""
        later: list[int] = []
        try:
            if batch:
                self._journal_batch(batch)
            for r in batch:
                if self._guard(r.step, self._act, r) == "done":
                    self.result.done += 1
                r.close(later)
        finally:
            for r in batch:
                r.close(later)
            self.closer.close_all(later)

    def _guard(self, step: Step, func: Any, *args: Any) -> Any:
        """``func(*args)``; a :class:`Changed` skips the step, an ``OSError`` fails it."""
        try:
            return func(*args)
        except Changed as exc:
            self._record("skipped", step.index, cause=str(exc))
            self._warn(exc.path, f"{exc.cause}: skipped, left as it was")
            self.result.skipped += 1
        except OSError as exc:
            cause = exc.strerror or str(exc)
            self._record("failed", step.index, cause=cause)
            self._warn(step.drop.path, f"{step.action} failed ({cause}): left as it was")
            self.result.failed += 1
        return None

    def _prepare(self, step: Step) -> _Ready | None:
        """Re-check ``step``; its files stay open for the run (closed here on any failure)."""
        keep, drop = step.keep, step.drop
        kfd, kst = open_checked(keep, self.want(keep))
        dfd = -1
        try:
            dfd, dst = open_checked(drop, self.want(drop))
            same = self.comparer.same(kfd, dfd, keep.size)
            self.result.bytes_read = self.comparer.bytes_read
            if not same:
                raise Changed(
                    drop.path, f"its bytes differ from the kept copy {display_path(keep.path)}"
                )
            if step.action == "reflink" and fsops.extents_shared(kfd, dfd):
                os.close(kfd)
                os.close(dfd)
                self.result.noops += 1
                return None
            begin: dict[str, str] = {}
            directory = os.path.dirname(drop.path)
            if step.action in ("link", "symlink", "remove"):
                begin["tmp"] = fsops.temp_name(directory)
            elif step.action == "move":
                assert step.target is not None  # the plan gives every move its destination
                begin["dest"] = step.target
            elif step.action == "trash":
                from sif.actions.trash import reserve, trash_can

                can = self.cans.get(drop.dev)
                if can is None:
                    can = self.cans[drop.dev] = trash_can(drop.path, drop.dev)
                # The info file reserves the name: a kill before the fsync below leaves
                # at most an info file (sif's own) without its file.
                begin["dest"], begin["info"] = reserve(drop.path, can)
            return _Ready(step, kfd, kst, dfd, dst, begin)
        except BaseException:
            os.close(kfd)
            if dfd >= 0:
                os.close(dfd)
            raise

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

    def _after(self, r: _Ready, **extra: str) -> None:
        step = r.step
        ka = os.fstat(r.kfd)
        self.expected[step.keep.key] = Expected.now(ka)
        last_name = r.dst.st_nlink == 1
        da = None  # the dropped file had no other name: nothing will look for it again
        if not last_name:
            dst = os.fstat(r.dfd)
            self.expected[step.drop.key] = Expected.now(dst)  # for its other names
            da = _figures(dst)
        if step.action in RECLAIMING and (last_name or step.action == "reflink"):
            self.result.bytes_reclaimed += step.drop.size
        elif step.action in ("trash", "move") and last_name:
            self.result.bytes_moved += step.drop.size
        if self.journal is not None:
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
                self._still(r, linked=action == "link")
                os.replace(tmp, drop.path)
            except BaseException:
                os.unlink(tmp)  # the name sif just made, never the user's file
                now_k = os.fstat(r.kfd)
                if (now_k.st_size, now_k.st_mtime_ns) == (r.kst.st_size, r.kst.st_mtime_ns):
                    # sif's own link and unlink changed the kept inode's ctime, nothing else.
                    self.expected[step.keep.key] = Expected.now(now_k)
                raise
            self._after(r)
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
                os.unlink(info)  # sif's own info file
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
) -> RunResult:
    """Run every step of ``plan``; journal it to ``journal`` (default: the state directory).

    Per-file problems go to ``on_warning`` (and into the result's
    ``problems``); the run always goes on to the next step. ``on_journal``
    is told the journal's path once it exists, before the first step.
    """
    j = Journal.create(_header(plan), plan.steps, journal) if use_journal else None
    if j is not None and on_journal is not None:
        on_journal(j.path)
    runner = Runner(j, on_warning)
    ended = False
    try:
        runner.run_all(plan.steps)
        if j is not None:
            j.record("end", at=now(), sync=True)
            ended = True
    finally:
        if j is not None:
            j.close(synced=ended)  # the end record's fsync made everything durable
    return runner.result
