"""The public names of ``sif``: complete, importable, and lazy."""

from __future__ import annotations

import importlib
import subprocess
import sys

import sif


def test_every_exported_name_resolves() -> None:
    for name in sif.__all__:
        if name == "__version__":
            continue
        value = getattr(sif, name)
        source = getattr(importlib.import_module(sif._EXPORTS[name]), name)
        # Each name resolves to the object of the module it is exported from.
        assert value is source, name
        assert not name.startswith("_"), name


def test_all_is_sorted() -> None:
    assert sif.__all__ == sorted(sif.__all__)


def test_no_export_is_also_a_module_name() -> None:
    # ``sif.walk`` and ``sif.fingerprint`` are modules: a function of the same name
    # would be shadowed as soon as the module is imported.
    import pkgutil

    modules = {m.name for m in pkgutil.iter_modules(sif.__path__)}
    assert not modules & set(sif.__all__)


def test_every_error_class_is_exported() -> None:
    import inspect

    import sif.errors

    errors = {
        name
        for name, obj in vars(sif.errors).items()
        if inspect.isclass(obj) and issubclass(obj, sif.errors.SifError)
    }
    assert errors >= {"SifError", "ConfigError", "IndexUnusable", "IndexCorrupt", "InputError"}
    assert errors <= set(sif.__all__)


def _sif_classes(hint: object) -> set[type]:
    """The classes of sif named in a type hint (through unions, tuples, iterators...)."""
    import typing

    found: set[type] = set()
    if isinstance(hint, type) and hint.__module__.startswith("sif."):
        found.add(hint)
    for arg in typing.get_args(hint):
        found |= _sif_classes(arg)
    return found


def test_the_entry_points_their_arguments_and_results_are_exported() -> None:
    """Every class a public function takes or returns (and their fields hold) is exported."""
    import dataclasses
    import inspect
    import typing

    for name in (
        "find_duplicates",
        "find_similar",
        "build_index",
        "query_files",
        "compare_trees",
        "plan_actions",
        "run_plan",
    ):
        assert name in sif.__all__, name
    exported = {id(getattr(sif, n)) for n in sif.__all__ if n != "__version__"}
    # Types a caller never needs to name: internal stores and per-entry details.
    internal = {"IndexStore", "ParamSet", "Fingerprints"}
    seen: set[type] = set()
    todo: list[type] = []
    for name in sif.__all__:
        obj = getattr(sif, name, None)
        if inspect.isfunction(obj):
            hints = typing.get_type_hints(obj)
            for hint in hints.values():
                todo.extend(_sif_classes(hint))
        elif dataclasses.is_dataclass(obj) and isinstance(obj, type):
            todo.append(obj)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if dataclasses.is_dataclass(cls):
            for hint in typing.get_type_hints(cls).values():
                todo.extend(_sif_classes(hint))
    missing = sorted(c.__name__ for c in seen if id(c) not in exported)
    assert [n for n in missing if n not in internal] == []


def test_dupes_cli_does_not_import_numpy() -> None:
    code = (
        "import sys\nfrom sif.cli import main\n"
        "try:\n    main(['dupes', '--help'])\nexcept SystemExit:\n    pass\n"
        "sys.exit('numpy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_find_duplicates_yields_groups(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    (root / "a").write_bytes(b"x" * 100)
    (root / "b").write_bytes(b"x" * 100)
    [group] = list(sif.find_duplicates([root]))
    assert isinstance(group, sif.Group)
    assert group.size == 100


def test_all_lists_exactly_the_exports() -> None:
    assert set(sif.__all__) == set(sif._EXPORTS) | {"__version__"}


def test_every_command_is_documented_in_the_readme() -> None:
    from pathlib import Path

    from sif.cli import COMMANDS

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for name in COMMANDS:
        assert f"`sif {name}" in readme, name


def test_plan_actions_and_run_plan_from_the_top_level(tmp_path: object) -> None:
    """Issue 12's API: ``sif.plan_actions(groups, action=..., keep=...)`` then
    ``sif.run_plan(plan)``, on the groups ``find_duplicates`` yields."""
    import os
    from pathlib import Path

    root = Path(str(tmp_path))
    for name in ("a", "b", "c"):
        (root / name).write_bytes(b"y" * 100)
    groups = list(sif.find_duplicates([root]))
    plan = sif.plan_actions(groups, action="link", keep=sif.KeepPolicy(rules=("shortest-path",)))
    assert isinstance(plan, sif.Plan) and all(isinstance(s, sif.Step) for s in plan.steps)
    assert [s.drop.path for s in plan.active] == [str(root / "b"), str(root / "c")]
    result = sif.run_plan(plan, journal=str(root / "journal.jsonl"))
    assert isinstance(result, sif.RunResult) and (result.done, result.failed) == (2, 0)
    assert len({os.stat(root / n).st_ino for n in ("a", "b", "c")}) == 1
    undone = sif.undo_journal(result.journal)
    assert isinstance(undone, sif.UndoResult)
    assert len({os.stat(root / n).st_ino for n in ("a", "b", "c")}) == 3
