"""Acting on a ``dupes`` report: plan, dry run, re-checked atomic journaled steps, undo.

::

    report = read_report("dupes.json")          # sif dupes --format json > dupes.json
    plan = plan_actions(report, action="link", keep=KeepPolicy(rules=("first-root",)))
    result = run_plan(plan)                      # re-checks every byte, journals every step
    undo_journal(result.journal)                 # a link becomes an independent copy again

See :mod:`sif.actions.plan` (keep policies, steps), :mod:`sif.actions.run`
(what each step does), :mod:`sif.actions.undo` and :mod:`sif.actions.journal`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ACTIONS": "sif.actions.plan",
    "KEEP_RULES": "sif.actions.plan",
    "FileRef": "sif.actions.plan",
    "KeepPolicy": "sif.actions.plan",
    "Plan": "sif.actions.plan",
    "Step": "sif.actions.plan",
    "plan_actions": "sif.actions.plan",
    "Report": "sif.actions.report",
    "read_report": "sif.actions.report",
    "RunResult": "sif.actions.run",
    "probe_reflink": "sif.actions.probe",
    "resume_journal": "sif.actions.resume",
    "run_plan": "sif.actions.run",
    "UndoResult": "sif.actions.undo",
    "undo_journal": "sif.actions.undo",
    "journal_dir": "sif.actions.journal",
}

__all__ = [
    "ACTIONS",
    "KEEP_RULES",
    "FileRef",
    "KeepPolicy",
    "Plan",
    "Report",
    "RunResult",
    "Step",
    "UndoResult",
    "journal_dir",
    "plan_actions",
    "probe_reflink",
    "read_report",
    "resume_journal",
    "run_plan",
    "undo_journal",
]

if TYPE_CHECKING:
    from sif.actions.journal import journal_dir
    from sif.actions.plan import ACTIONS, KEEP_RULES, FileRef, KeepPolicy, Plan, Step, plan_actions
    from sif.actions.probe import probe_reflink
    from sif.actions.report import Report, read_report
    from sif.actions.resume import resume_journal
    from sif.actions.run import RunResult, run_plan
    from sif.actions.undo import UndoResult, undo_journal


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'sif.actions' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
