"""The public names of ``sif``: complete, importable, and lazy."""

from __future__ import annotations

import subprocess
import sys

import sif


def test_every_exported_name_resolves() -> None:
    for name in sif.__all__:
        assert getattr(sif, name) is not None, name


def test_dupes_cli_does_not_import_numpy() -> None:
    code = "import sys, sif.cli; sys.exit('numpy' in sys.modules)"
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
