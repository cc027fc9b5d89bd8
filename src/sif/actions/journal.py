"""The journal of a run: JSON lines, fsynced before every step.

It lives under the user's state directory
(``platformdirs.user_state_dir("sif")/journals``, e.g.
``~/.local/state/sif/journals``) unless a path is given, and holds:

1. ``{"j": "header", ...}``: the action, the policy, the report's header, the time;
2. ``{"j": "step", ...}``: every step of the plan (so a killed run can be
   resumed from the journal alone);
3. per step run: ``begin`` (with the temporary name or the trash entry it
   will use), fsynced before the step touches anything; then ``done`` (with
   the figures the step left), ``skipped`` or ``failed`` with the cause;
4. ``undone`` records written by ``sif undo``, and ``end`` when a run finished.

A last line cut short by a kill is ignored when the journal is read.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass, field
from typing import Any

from sif.actions.plan import Step
from sif.errors import InputError
from sif.report import json_line

JOURNAL_KIND = "sif journal"
JOURNAL_FORMAT = 1


def journal_dir() -> str:
    """Where journals go: ``$XDG_STATE_HOME/sif/journals`` (``~/.local/state/...``)."""
    import platformdirs

    return os.path.join(platformdirs.user_state_dir("sif"), "journals")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


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
            raise InputError(f"{path}: cannot write the journal: {exc.strerror}") from None
        journal = cls(path, fd)
        try:
            head = {"j": "header", "kind": JOURNAL_KIND, "format": JOURNAL_FORMAT, **header}
            lines = [json_line(head), *(json_line({"j": "step", **s.to_dict()}) for s in steps)]
            journal._write(b"".join(lines), sync=True)
            rename_noreplace(tmp, path)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        return journal

    @classmethod
    def append_to(cls, path: str) -> Journal:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        return cls(path, fd)

    def _write(self, data: bytes, sync: bool) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        if sync:
            os.fsync(self._fd)

    def record(self, kind: str, step: int | None = None, sync: bool = False, **fields: Any) -> None:
        """Append one record; ``sync`` fsyncs it (a batch of ``begin`` records: :meth:`sync`)."""
        doc: dict[str, Any] = {"j": kind}
        if step is not None:
            doc["step"] = step
        doc.update(fields)
        self._write(json_line(doc), sync)

    def sync(self) -> None:
        """Make every record written so far durable."""
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


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


def read_journal(path: str) -> JournalData:
    """Read a journal; :class:`InputError` if it is not one."""
    try:
        with open(path, "rb") as f:
            raw = f.read().split(b"\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the journal: {exc.strerror}") from None
    docs: list[dict[str, Any]] = []
    for n, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            if n >= len(raw) - 1:
                break  # the last line, cut short by a kill
            raise InputError(f"{path}: line {n}: not JSON: a damaged journal") from None
        docs.append(doc)
    if not docs or docs[0].get("j") != "header" or docs[0].get("kind") != JOURNAL_KIND:
        raise InputError(f"{path}: not a sif journal")
    if docs[0].get("format") != JOURNAL_FORMAT:
        raise InputError(f"{path}: journal format {docs[0].get('format')!r}: not this sif's")
    data = JournalData(path, docs[0], [])
    for doc in docs[1:]:
        if doc["j"] == "step":
            data.steps.append(Step.from_dict({k: v for k, v in doc.items() if k != "j"}))
        elif doc["j"] == "end":
            data.ended = True
        elif "step" in doc:
            data.events.setdefault(doc["step"], []).append(doc)
    return data
