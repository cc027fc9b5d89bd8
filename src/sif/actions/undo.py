"""``sif undo JOURNAL``: reverse a ``link``, ``symlink``, ``dedupe``, ``trash`` or ``move`` run.

Steps are undone last first. Each is re-checked against what the journal
says the step left; where the world changed since, that file is refused
with a warning naming it, and the rest goes on:

- a **link** (or symlink) becomes an independent copy again: the kept
  copy's bytes are copied (plain writes, no shared extents) to a temporary
  name beside it, their digest checked against the report's, the file's
  own mode, owner and times (journaled before the step) restored, and the
  copy renamed over the link. The name gets a new inode, with the original
  bytes and metadata; names that were hard links of one dropped file are
  hard links of one restored file again;
- a **dedupe** is undone the same way (the file keeps its inode's metadata;
  its extents are no longer shared);
- a file moved to the **trash** or under ``--to`` is renamed back, never
  over a name that exists again; its ``.trashinfo`` is removed;
- a **remove** cannot be undone: undo says so and changes nothing.

A journal of a killed run is settled first (see
:func:`sif.actions.resume.reconcile`), so undo works on it too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from typing import Any

from sif.actions import fsops
from sif.actions.journal import Journal, now, read_journal
from sif.actions.plan import Step
from sif.actions.resume import reconcile
from sif.actions.trash import written_for
from sif.errors import InputError
from sif.events import ScanWarning, WarningSink, display_path, ignore_warning
from sif.fileio import open_regular


@dataclass
class UndoResult:
    journal: str
    undone: int = 0
    refused: int = 0
    failed: int = 0
    problems: list[ScanWarning] = field(default_factory=list)


class Refused(Exception):
    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


def _hasher(digest: str) -> Any:
    kind = digest.split(":", 1)[0]
    if kind == "xxh3-128":
        import xxhash

        return xxhash.xxh3_128
    if kind == "blake3":
        from blake3 import blake3

        return blake3
    raise InputError(f"unknown digest kind {kind!r} in the journal")


def _restore_copy(step: Step, path: str, fd: int, meta: dict[str, int] | os.stat_result) -> None:
    """Copy ``fd`` beside ``path``, check the digest, set the metadata, rename over ``path``."""
    directory = os.path.dirname(path)
    tmp, digest = fsops.copy_to_temp(fd, step.drop.size, directory, _hasher(step.digest))
    try:
        if digest != step.digest.split(":", 1)[1]:
            raise Refused(path, "its bytes are no longer the report's (digest differs)")
        if isinstance(meta, os.stat_result):
            meta = {
                "mode": meta.st_mode,
                "uid": meta.st_uid,
                "gid": meta.st_gid,
                "atime_ns": meta.st_atime_ns,
                "mtime_ns": meta.st_mtime_ns,
            }
        with contextlib.suppress(PermissionError):
            os.chown(tmp, meta["uid"], meta["gid"])
        os.chmod(tmp, meta["mode"] & 0o7777)
        os.utime(tmp, ns=(meta["atime_ns"], meta["mtime_ns"]))
        os.replace(tmp, path)
    except BaseException:
        # sif's own copy, unless it is in place already (a Ctrl-C just after the rename:
        # its unlink failed, and the failure hid the Ctrl-C as a failed step)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _relink(path: str, twin: tuple[str, tuple[int, int]]) -> bool:
    """Give ``path`` the inode already restored for another name of the same file."""
    other, key = twin
    try:
        st = os.lstat(other)
    except FileNotFoundError:
        return False
    if (st.st_dev, st.st_ino) != key:
        return False
    tmp = fsops.temp_name(os.path.dirname(path))
    os.link(other, tmp, follow_symlinks=False)
    try:
        made = os.lstat(tmp)
        if (made.st_dev, made.st_ino) != key:
            raise Refused(path, "the restored twin changed during the undo")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):  # in place already (a Ctrl-C past it)
            os.unlink(tmp)
        raise
    return True


def _untouched_twins(
    steps: list[Step], done: set[int]
) -> dict[tuple[int, int], tuple[str, tuple[int, int]]]:
    """For each dropped file of a link a kill cut short, a name of it that no step changed
    and that still holds it, unchanged: its other names, once undone, are hard links of
    that name again (a copy each split them from it)."""
    out: dict[tuple[int, int], tuple[str, tuple[int, int]]] = {}
    for step in steps:
        if step.index in done or step.action not in ("link", "symlink") or step.noop:
            continue
        drop = step.drop
        try:
            st = os.lstat(drop.path)
        except OSError:
            continue
        if (
            stat.S_ISREG(st.st_mode)
            and (st.st_dev, st.st_ino) == drop.key
            and (st.st_size, st.st_mtime_ns) == (drop.size, drop.mtime_ns)
        ):
            out.setdefault(drop.key, (drop.path, drop.key))
    return out


def _undo_step(
    step: Step,
    begin: dict[str, Any],
    done: dict[str, Any],
    restored: dict[tuple[int, int], tuple[str, tuple[int, int]]],
) -> None:
    path = step.drop.path
    keep = step.keep
    if step.action in ("link", "symlink"):
        try:
            lst = os.lstat(path)
        except FileNotFoundError:
            raise Refused(path, "vanished since the link") from None
        meta = begin.get("meta") or {}
        if (
            stat.S_ISREG(lst.st_mode)
            and (lst.st_dev, lst.st_ino) != keep.key
            and (lst.st_size, lst.st_mtime_ns) == (step.drop.size, meta.get("mtime_ns"))
            and stat.S_IMODE(lst.st_mode) == (meta.get("mode", -1) & 0o7777)
        ):
            # Undone already: an undo killed before it said so left this copy, which the
            # dropped file's other names join.
            restored.setdefault(step.drop.key, (path, (lst.st_dev, lst.st_ino)))
            return
        if step.action == "symlink":
            if not stat.S_ISLNK(lst.st_mode) or os.readlink(path) != step.target:
                raise Refused(path, "no longer the symlink sif made")
        elif (lst.st_dev, lst.st_ino) != keep.key:
            raise Refused(path, "no longer a hard link of the kept copy")
        try:
            fd, st = open_regular(path, expect=keep.key, follow_symlinks=step.action == "symlink")
        except OSError as exc:
            raise Refused(path, f"the kept copy cannot be read ({exc.strerror})") from None
        try:
            if st.st_size != keep.size or st.st_mtime_ns != keep.mtime_ns:
                raise Refused(path, "the kept copy was modified since the link")
            # Names that were hard links of one file become one file again.
            twin = restored.get(step.drop.key)
            if twin is None or not _relink(path, twin):
                _restore_copy(step, path, fd, begin["meta"])
        finally:
            os.close(fd)
        new = os.lstat(path)
        restored.setdefault(step.drop.key, (path, (new.st_dev, new.st_ino)))
        return
    if step.action == "reflink":
        try:
            fd, st = open_regular(path, expect=step.drop.key, follow_symlinks=False)
        except OSError as exc:
            raise Refused(path, f"not the deduped file any more ({exc.strerror})") from None
        try:
            if st.st_size != step.drop.size or st.st_mtime_ns != step.drop.mtime_ns:
                raise Refused(path, "modified since the dedupe")
            _restore_copy(step, path, fd, st)
        finally:
            os.close(fd)
        return
    if step.action in ("trash", "move"):
        dest = done.get("dest") or begin.get("dest")
        if not dest:
            raise Refused(path, "the journal does not say where the file went")
        try:
            st = os.lstat(dest)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                back = os.lstat(path)
                if (back.st_dev, back.st_ino) == step.drop.key:
                    # Undone already: an undo killed before it said so moved it back.
                    info = done.get("info") or begin.get("info")
                    if info and written_for(info, path):
                        os.unlink(info)  # the .trashinfo sif wrote, if the kill left it
                    return
            raise Refused(path, f"{display_path(dest)} is gone") from None
        if (st.st_dev, st.st_ino) != step.drop.key:
            raise Refused(path, f"{display_path(dest)} is another file now")
        if st.st_size != step.drop.size or st.st_mtime_ns != step.drop.mtime_ns:
            raise Refused(path, f"{display_path(dest)} was modified since")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fsops.rename_noreplace(dest, path)
        except FileExistsError:
            raise Refused(path, "a file of that name exists again: not overwritten") from None
        info = done.get("info") or begin.get("info")
        if info and written_for(info, path):
            os.unlink(info)  # the .trashinfo sif wrote
        return
    raise Refused(path, "a removed file cannot be brought back (use --trash or --to next time)")


def undo_journal(path: str, *, on_warning: WarningSink = ignore_warning) -> UndoResult:
    """Undo every done step of the journal at ``path``, last first."""
    data = read_journal(path)
    from sif.actions.report import hostname

    if data.header.get("host") != hostname():
        raise InputError(f"{path}: a journal of another machine ({data.header.get('host')!r})")
    result = UndoResult(path)
    j = Journal.append_to(path)
    try:
        data = read_journal(path)  # again, held: as no other run leaves it
    except BaseException:
        j.close(synced=True)
        raise

    def warn(p: str, cause: str) -> None:
        w = ScanWarning(p, cause)
        result.problems.append(w)
        on_warning(w)

    ended = False
    try:
        put_back: list[str] = []
        done_steps = reconcile(data, j, None, undoing=True, put_back=put_back)
        if data.header.get("action") == "remove":
            removed = [s for s in data.steps if data.state(s.index) == "done"]
            if removed:
                # The file a kill left parked under sif's temporary name is back at its
                # name first (that much a plain remove's undo can do).
                back = f"; {len(put_back)} a kill left parked put back" if put_back else ""
                raise InputError(
                    f"{path}: 'sif remove' deleted {len(removed)} file(s): that cannot be "
                    f"undone{back}"
                )
        restored = _untouched_twins(data.steps, done_steps)
        for step in sorted(data.steps, key=lambda s: -s.index):
            if step.index not in done_steps or data.state(step.index) != "done":
                continue
            begin = data.find(step.index, "begin") or {}
            done = data.last(step.index) or {}
            try:
                _undo_step(step, begin, done, restored)
            except Refused as exc:
                j.record("refused", step.index, cause=exc.cause, at=now())
                warn(exc.path, f"{exc.cause}: not undone")
                result.refused += 1
                continue
            except OSError as exc:
                j.record("failed", step.index, cause=exc.strerror or str(exc), at=now())
                warn(step.drop.path, f"undo failed ({exc.strerror or exc}): left as it was")
                result.failed += 1
                continue
            j.record("undone", step.index, at=now())
            result.undone += 1
        j.record("end", undo=True, at=now(), sync=True)
        ended = True
    finally:
        j.close(synced=ended, failing=not ended)
    return result
