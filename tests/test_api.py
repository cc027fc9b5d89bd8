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
        if name == "fingerprint":
            # The module sif.fingerprint shadows the function once imported; it forwards calls.
            data = bytes(range(256)) * 8
            assert (value(data) == source(data)).all()
            continue
        # Each name resolves to the object of the module it is exported from.
        assert value is source, name


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
