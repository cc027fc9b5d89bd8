"""sif: exact replicas, similar files and fuzzy checksums in large file systems.

The public names are imported on first use, so that ``sif dupes`` does not
pay for numpy at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "find_duplicates": "sif.exact",
    "Group": "sif.exact",
    "Replica": "sif.exact",
    "DupesStats": "sif.exact",
    "compare_trees": "sif.compare",
    "CompareResult": "sif.compare",
    "CompareStats": "sif.compare",
    "FileComparison": "sif.compare",
    "DirectoryShare": "sif.compare",
    "find_similar": "sif.similar",
    "SimilarOptions": "sif.similar",
    "SimilarResult": "sif.similar",
    "SimilarPair": "sif.similar",
    "SimilarFile": "sif.similar",
    "SimilarGroup": "sif.similar",
    "GroupMember": "sif.similar",
    "SimilarSet": "sif.similar",
    "SimilarStats": "sif.similar",
    "build_index": "sif.index",
    "PairStore": "sif.index.pairstore",
    "Engine": "sif.executors.engine",
    "DaskEngine": "sif.executors.dask",
    "IndexStats": "sif.index",
    "open_reader": "sif.index",
    "IndexReader": "sif.index",
    "default_index_path": "sif.index",
    "query_files": "sif.query",
    "QueryResult": "sif.query",
    "Match": "sif.query",
    "FileRecord": "sif.records",
    "RecordColumns": "sif.records",
    "WalkOptions": "sif.walk",
    "ContentOptions": "sif.content",
    "ScanWarning": "sif.events",
    "Progress": "sif.events",
    "SifError": "sif.errors",
    "ConfigError": "sif.errors",
    "IndexUnusable": "sif.errors",
    "IndexCorrupt": "sif.errors",
    "IndexInUse": "sif.errors",
    "IndexParamsMismatch": "sif.errors",
    "InputError": "sif.errors",
    "OutOfMemory": "sif.errors",
    "WorkerDied": "sif.errors",
    "EngineUnavailable": "sif.errors",
    "checksum": "sif.core.fuzzysum",
    "checksum_v2": "sif.core.fuzzysum",
    "compare_v2": "sif.core.fuzzysum",
    "fingerprint_file": "sif.fingerprint",
    "explain": "sif.passages",
    "Explanation": "sif.passages",
    "Passage": "sif.passages",
    "ExplainedFile": "sif.passages",
    "FingerprintParams": "sif.fingerprint",
    "AnchorSet": "sif.fingerprint",
    "make_params": "sif.fingerprint",
    "plan_actions": "sif.actions.plan",
    "KeepPolicy": "sif.actions.plan",
    "Plan": "sif.actions.plan",
    "Step": "sif.actions.plan",
    "FileRef": "sif.actions.plan",
    "read_report": "sif.actions.report",
    "Report": "sif.actions.report",
    "run_plan": "sif.actions.run",
    "RunResult": "sif.actions.run",
    "undo_journal": "sif.actions.undo",
    "UndoResult": "sif.actions.undo",
    "resume_journal": "sif.actions.resume",
}
"""Public name -> the module it comes from (imported on first use)."""

__all__ = [
    "AnchorSet",
    "CompareResult",
    "CompareStats",
    "ConfigError",
    "ContentOptions",
    "DaskEngine",
    "DirectoryShare",
    "DupesStats",
    "Engine",
    "EngineUnavailable",
    "ExplainedFile",
    "Explanation",
    "FileComparison",
    "FileRecord",
    "FileRef",
    "FingerprintParams",
    "Group",
    "GroupMember",
    "IndexCorrupt",
    "IndexInUse",
    "IndexParamsMismatch",
    "IndexReader",
    "IndexStats",
    "IndexUnusable",
    "InputError",
    "KeepPolicy",
    "Match",
    "OutOfMemory",
    "PairStore",
    "Passage",
    "Plan",
    "Progress",
    "QueryResult",
    "RecordColumns",
    "Replica",
    "Report",
    "RunResult",
    "ScanWarning",
    "SifError",
    "SimilarFile",
    "SimilarGroup",
    "SimilarOptions",
    "SimilarPair",
    "SimilarResult",
    "SimilarSet",
    "SimilarStats",
    "Step",
    "UndoResult",
    "WalkOptions",
    "WorkerDied",
    "__version__",
    "build_index",
    "checksum",
    "checksum_v2",
    "compare_trees",
    "compare_v2",
    "default_index_path",
    "explain",
    "find_duplicates",
    "find_similar",
    "fingerprint_file",
    "make_params",
    "open_reader",
    "plan_actions",
    "query_files",
    "read_report",
    "resume_journal",
    "run_plan",
    "undo_journal",
]

if TYPE_CHECKING:
    from sif.actions.plan import FileRef, KeepPolicy, Plan, Step, plan_actions
    from sif.actions.report import Report, read_report
    from sif.actions.resume import resume_journal
    from sif.actions.run import RunResult, run_plan
    from sif.actions.undo import UndoResult, undo_journal
    from sif.compare import (
        CompareResult,
        CompareStats,
        DirectoryShare,
        FileComparison,
        compare_trees,
    )
    from sif.content import ContentOptions
    from sif.core.fuzzysum import checksum, checksum_v2, compare_v2
    from sif.errors import (
        ConfigError,
        EngineUnavailable,
        IndexCorrupt,
        IndexInUse,
        IndexParamsMismatch,
        IndexUnusable,
        InputError,
        OutOfMemory,
        SifError,
        WorkerDied,
    )
    from sif.events import Progress, ScanWarning
    from sif.exact import DupesStats, Group, Replica, find_duplicates
    from sif.executors.dask import DaskEngine
    from sif.executors.engine import Engine
    from sif.fingerprint import AnchorSet, FingerprintParams, fingerprint_file, make_params
    from sif.index import IndexReader, IndexStats, build_index, default_index_path, open_reader
    from sif.index.pairstore import PairStore
    from sif.passages import ExplainedFile, Explanation, Passage, explain
    from sif.query import Match, QueryResult, query_files
    from sif.records import FileRecord, RecordColumns
    from sif.similar import (
        GroupMember,
        SimilarFile,
        SimilarGroup,
        SimilarOptions,
        SimilarPair,
        SimilarResult,
        SimilarSet,
        SimilarStats,
        find_similar,
    )
    from sif.walk import WalkOptions


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'sif' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
