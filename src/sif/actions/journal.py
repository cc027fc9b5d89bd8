"""The journal of a run: JSON lines, fsynced before every step acts.

It lives under the user's state directory
(``platformdirs.user_state_dir("sif")/journals``, e.g.
``~/.local/state/sif/journals``) unless a path is given, and holds:

1. ``{"j": "header", ...}``: the action, the policy, the report's header, the time;
2. ``{"j": "step", ...}``: every step of the plan (so a killed run can be
   resumed from the journal alone);
3. per step run: ``begin`` (with the temporary name or the trash entry it
   will use, and the dropped file's metadata), fsynced before the step
   touches anything (a batch of steps at a time: one write, one fsync); then
   ``done`` (with the figures the step left), ``skipped`` or ``failed`` with
   the cause. ``done`` records go out with the next batch's ``begin`` records
   (and its fsync): a kill may take the last batch's with it, and then
   :func:`sif.actions.resume.reconcile` tells from the files which of those
   steps happened, as it does for the one step a kill interrupts;
4. ``undone`` records written by ``sif undo``, and ``end`` when a run finished.

A last line cut short by a kill is ignored when the journal is read.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _jstr
from typing import Any

from sif.actions.plan import FileRef, Step
from sif.errors import InputError, SifError
from sif.events import display_path
from sif.report import json_line

JOURNAL_KIND = "sif journal"
JOURNAL_FORMAT = 1


def journal_dir() -> str:
    """Where journals go: ``$XDG_STATE_HOME/sif/journals`` (``~/.local/state/...``).

    ``platformdirs.user_state_dir("sif")``; on Linux, its answer for an absolute
    ``$XDG_STATE_HOME`` or ``$HOME`` is made here (importing platformdirs costs
    more than the rest of a small run's start).
    """
    if sys.platform.startswith("linux"):
        xdg, home = os.environ.get("XDG_STATE_HOME", ""), os.environ.get("HOME", "")
        if xdg.startswith("/"):
            return os.path.join(xdg, "sif", "journals")
        if home.startswith("/"):
            return os.path.join(home, ".local", "state", "sif", "journals")
    import platformdirs

    return os.path.join(platformdirs.user_state_dir("sif"), "journals")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _fast(text: str, doc: Callable[[], dict[str, Any]]) -> bytes:
    """``text`` (a JSON line built by hand) as UTF-8; a name with undecodable bytes
    (lone surrogates) takes :func:`sif.report.json_line`, which escapes them."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json_line(doc())


def _ref_json(r: FileRef) -> str:
    return (
        f'{{"path":{_jstr(r.path)},"dev":{r.dev},"ino":{r.ino},"size":{r.size},'
        f'"mtime_ns":{r.mtime_ns},"ctime_ns":{r.ctime_ns}}}'
    )


def _opt(value: str | None) -> str:
    return "null" if value is None else _jstr(value)


def step_line(s: Step) -> bytes:
    """The journal's ``step`` record of ``s``: ``json_line({"j": "step", **s.to_dict()})``,
    written by hand (json.dumps was most of the cost of writing a plan)."""
    text = (
        f'{{"j":"step","index":{s.index},"action":{_jstr(s.action)},"group":{s.group},'
        f'"digest":{_jstr(s.digest)},"keep":{_ref_json(s.keep)},"drop":{_ref_json(s.drop)},'
        f'"target":{_opt(s.target)},"noop":{_opt(s.noop)}}}\n'
    )
    return _fast(text, lambda: {"j": "step", **s.to_dict()})


def begin_line(step: int, st: os.stat_result, at: str, names: dict[str, str]) -> bytes:
    """A ``begin`` record: the dropped file's metadata ``st`` (for undo), the time, and the
    names the step will use (``tmp``, or ``dest`` and ``info``)."""
    meta = (
        f'{{"mode":{st.st_mode},"uid":{st.st_uid},"gid":{st.st_gid},'
        f'"atime_ns":{st.st_atime_ns},"mtime_ns":{st.st_mtime_ns}}}'
    )
    extra = "".join(f",{_jstr(k)}:{_jstr(v)}" for k, v in names.items())
    text = f'{{"j":"begin","step":{step},"meta":{meta},"at":{_jstr(at)}{extra}}}\n'

    def doc() -> dict[str, Any]:
        m = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid}
        m.update(atime_ns=st.st_atime_ns, mtime_ns=st.st_mtime_ns)
        return {"j": "begin", "step": step, "meta": m, "at": at, **names}

    return _fast(text, doc)


def done_line(
    step: int, keep_after: list[int], drop_after: list[int] | None, names: dict[str, str]
) -> bytes:
    """A ``done`` record: the figures (size, mtime, ctime) the step left, and its names."""
    da = "null" if drop_after is None else f"[{drop_after[0]},{drop_after[1]},{drop_after[2]}]"
    extra = "".join(f",{_jstr(k)}:{_jstr(v)}" for k, v in names.items())
    text = (
        f'{{"j":"done","step":{step},"keep_after":[{keep_after[0]},{keep_after[1]},'
        f'{keep_after[2]}],"drop_after":{da}{extra}}}\n'
    )
    return _fast(
        text,
        lambda: (
            {"j": "done", "step": step, "keep_after": keep_after, "drop_after": drop_after} | names
        ),
    )


class Journal:
    """An open journal, appended to."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def create(cls, header: dict[str, Any], steps: list[Step], path: str | None = None) -> Journal:
        """A new journal holding ``header`` and the plan's steps, on disk (fsynced)."""
        if path is None:
            directory = journal_dir()
            os.makedirs(directory, mode=0o700, exist_ok=True)
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
            path = os.path.join(directory, f"{stamp}-{header['action']}-{os.getpid()}.jsonl")
        # Written whole under a temporary name, then renamed into place (never over a
        # file): a kill leaves no journal or a complete plan, never half a plan.
        from sif.actions.fsops import rename_noreplace

        if os.path.lexists(path):
            raise InputError(f"{path}: a journal of that name exists already")
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600
            )
        except OSError as exc:
            raise _write_error(path, exc) from None
        journal = cls(path, fd)
        try:
            _lock(path, fd)  # held under the journal's own name, once renamed
            head = {"j": "header", "kind": JOURNAL_KIND, "format": JOURNAL_FORMAT, **header}
            lines = [json_line(head), *map(step_line, steps)]
            journal._write(b"".join(lines), sync=True)
            rename_noreplace(tmp, path)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        return journal

    @classmethod
    def append_to(cls, path: str) -> Journal:
        """The journal at ``path``, open to append (``resume``, ``undo``), its last line
        cut off first if a kill or a full disk left it cut short: records appended right
        after half a line made one line that was no JSON, and every later ``undo`` then
        refused the journal as damaged. That half record was never whole, so it never
        counted (:func:`read_journal` skips it): a step it began is inferred from the files,
        as after a kill before it was written."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise _write_error(path, exc) from None
        journal = cls(path, fd)
        try:
            _lock(path, fd)
            _check_header(path, fd)  # through the held descriptor: this very file
            _cut_torn_tail(fd)
        except OSError as exc:
            os.close(fd)
            raise _write_error(path, exc) from None
        except BaseException:
            os.close(fd)
            raise
        return journal

    def write(self, data: bytes, sync: bool = False) -> None:
        """Append records already encoded (:func:`begin_line`, :func:`done_line`)."""
        self._write(data, sync)

    def _write(self, data: bytes, sync: bool) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
            if sync:
                os.fsync(self._fd)
        except OSError as exc:  # a full disk: the run stops, naming the journal
            raise _write_error(self.path, exc) from None

    def record(self, kind: str, step: int | None = None, sync: bool = False, **fields: Any) -> None:
        """Append one record; ``sync`` fsyncs it (a batch of ``begin`` records: :meth:`sync`)."""
        doc: dict[str, Any] = {"j": kind}
        if step is not None:
            doc["step"] = step
        doc.update(fields)
        self._write(json_line(doc), sync)

    def sync(self) -> None:
        """Make every record written so far durable."""
        try:
            os.fsync(self._fd)
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def close(self, synced: bool = False, failing: bool = False) -> None:
        """Close the journal, fsynced first unless ``synced`` (the caller just did).
        ``failing``: the run is stopping on an error of its own (a full disk, Ctrl-C),
        which a failed fsync here must not hide."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                if not synced:
                    os.fsync(fd)
            except OSError as exc:
                if not failing:
                    raise _write_error(self.path, exc) from None
            finally:
                os.close(fd)


class JournalError(SifError):
    """The journal could not be written: the run stops there (exit 3), the journal named."""


def _write_error(path: str, exc: OSError) -> JournalError:
    from sif.outfile import cause_of

    return JournalError(f"{display_path(path)}: cannot write the journal: {cause_of(exc)}")


def _lock(path: str, fd: int) -> None:
    """Hold the journal for this process alone (``flock``, let go when it ends): two
    ``resume`` runs of one journal both acted, and the loser's ``skipped`` records, after
    the winner's ``done``, hid some 370 steps from a later ``undo``."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise JournalError(
            f"{display_path(path)}: in use by another sif (the run, a resume or an undo of "
            "it): try again when it has ended"
        ) from None


def _check_header(path: str, fd: int) -> None:
    """InputError unless the file at ``fd`` begins with a sif journal's header line (whole:
    a report's header of many roots makes it megabytes long)."""
    head = b""
    while b"\n" not in head:
        more = os.pread(fd, 1 << 20, len(head))
        if not more:
            break
        head += more
    head = head.split(b"\n", 1)[0]
    try:
        doc = json.loads(head)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("j") != "header" or doc.get("kind") != JOURNAL_KIND:
        raise InputError(f"{display_path(path)}: not a sif journal")


def _cut_torn_tail(fd: int) -> None:
    """Make the journal at ``fd`` end with a whole record and its newline before anything
    is appended: a last line that is no JSON (cut short by a kill or a full disk; it never
    counted, :func:`read_journal` skips it) is cut off; a whole record without its
    newline gets one (it counted, and must go on counting)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    end = size - 1 if os.pread(fd, 1, size - 1) == b"\n" else size
    start = end
    while start > 0:  # the last line: [start, end)
        lo = max(0, start - (1 << 16))
        at = os.pread(fd, start - lo, lo).rfind(b"\n")
        if at >= 0:
            start = lo + at + 1
            break
        start = lo
    if start == 0:
        return  # the header alone, checked before: nothing to cut
    try:
        json.loads(os.pread(fd, end - start, start))
    except ValueError:
        os.ftruncate(fd, start)  # half a record, or damage: never counted
        os.fsync(fd)
        return
    if end == size:
        os.write(fd, b"\n")  # O_APPEND: at the end
        os.fsync(fd)


@dataclass
class JournalData:
    """A journal read back."""

    path: str
    header: dict[str, Any]
    steps: list[Step]
    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    ended: bool = False

    def last(self, step: int) -> dict[str, Any] | None:
        ev = self.events.get(step)
        return ev[-1] if ev else None

    def state(self, step: int) -> str | None:
        """The step's last record kind: ``begin``, ``done``, ``undone``... or None."""
        last = self.last(step)
        return None if last is None else str(last["j"])

    def find(self, step: int, kind: str) -> dict[str, Any] | None:
        for ev in reversed(self.events.get(step, [])):
            if ev["j"] == kind:
                return ev
        return None


def _step(doc: dict[str, Any]) -> Step:
    """The ``step`` record ``doc`` as a :class:`Step`; TypeError or KeyError if it is not one
    (a journal edited by hand: a wrong type went on to fail deep in the run)."""
    from sif.actions.plan import ACTIONS

    def number(v: Any) -> int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(v)
        return v

    for side in ("keep", "drop"):
        ref = doc[side]
        if set(ref) != {"path", "dev", "ino", "size", "mtime_ns", "ctime_ns"}:
            raise KeyError(side)
        if not isinstance(ref["path"], str) or "\0" in ref["path"]:
            raise TypeError(side)
        for k in ("dev", "ino", "size", "mtime_ns", "ctime_ns"):
            number(ref[k])
    number(doc["index"])
    number(doc["group"])
    if doc["action"] not in ACTIONS or not isinstance(doc["digest"], str):
        raise ValueError(doc["action"])
    for k in ("target", "noop"):
        if not isinstance(doc.get(k), (str, type(None))):
            raise TypeError(k)
    return Step.from_dict({k: v for k, v in doc.items() if k != "j"})


def read_journal(path: str) -> JournalData:
    """Read a journal; :class:`InputError` if it is not one."""
    try:
        with open(path, "rb") as f:
            raw = f.read().split(b"\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the journal: {exc.strerror}") from None
    shown = display_path(path)
    docs: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            if n >= len(raw) - 1:
                break  # the last line, cut short by a kill
            raise InputError(f"{shown}: line {n}: not JSON: a damaged journal") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("j"), str):
            if not docs:  # its first record: no journal at all (a report, say)
                raise InputError(f"{shown}: not a sif journal")
            raise InputError(f"{shown}: line {n}: not a journal record: a damaged journal")
        docs.append((n, doc))
    if not docs or docs[0][1].get("j") != "header" or docs[0][1].get("kind") != JOURNAL_KIND:
        raise InputError(f"{shown}: not a sif journal")
    head = docs[0][1]
    if head.get("format") != JOURNAL_FORMAT:
        raise InputError(f"{shown}: journal format {head.get('format')!r}: not this sif's")
    data = JournalData(path, head, [])
    for n, doc in docs[1:]:
        try:
            if doc["j"] == "step":
                data.steps.append(_step(doc))
            elif doc["j"] == "end":
                data.ended = True
            elif "step" in doc:
                if not isinstance(doc["step"], int) or isinstance(doc["step"], bool):
                    raise TypeError("step")
                data.events.setdefault(doc["step"], []).append(doc)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InputError(
                f"{shown}: line {n}: a {doc['j']!r} record sif cannot read: a damaged journal"
            ) from None
    if [s.index for s in data.steps] != list(range(len(data.steps))):
        raise InputError(f"{shown}: its steps are not numbered 0, 1, 2...: a damaged journal")
    return data
