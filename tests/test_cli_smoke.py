import importlib
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import sif
from sif.cli import main


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"sif, version {sif.__version__}"


def _every_command() -> dict[str, click.Command]:
    from sif.cli import COMMANDS

    out = {}
    for name, spec in COMMANDS.items():
        module, attr = spec.split(":")
        out[name] = getattr(importlib.import_module(module), attr)
    return out


def test_each_summary_is_the_first_paragraph_of_its_command_s_help() -> None:
    from sif.cli import COMMANDS, SUMMARIES

    assert set(SUMMARIES) == set(COMMANDS)
    for name, cmd in _every_command().items():
        assert not cmd.short_help and not cmd.hidden and not cmd.deprecated, name
        first = " ".join((cmd.help or "").partition("\n\n")[0].split())
        assert " ".join(SUMMARIES[name].split()) == first, name
        stand_in = click.Command(name, help=SUMMARIES[name])
        for limit in (3, 10, 30, 45, 60, 66, 100, 200):
            assert stand_in.get_short_help_str(limit) == cmd.get_short_help_str(limit)


@pytest.mark.parametrize("columns", ["80", "50", "200"])
def test_help_lists_the_commands_as_click_would_with_them_all_imported(columns: str) -> None:
    eager = click.Group(
        main.name, help=main.help, params=main.params, context_settings=main.context_settings
    )
    for name, cmd in _every_command().items():
        eager.add_command(cmd, name)
    env = {"COLUMNS": columns}
    lazy_help = CliRunner().invoke(main, ["--help"], env=env, terminal_width=int(columns))
    eager_help = CliRunner().invoke(eager, ["--help"], env=env, terminal_width=int(columns))
    assert lazy_help.exit_code == eager_help.exit_code == 0
    assert "Commands:" in lazy_help.output and "query" in lazy_help.output
    assert lazy_help.output == eager_help.output


def test_help_imports_no_command() -> None:
    # The listing comes from SUMMARIES: no command module, no numpy (was ~160 ms).
    code = (
        "import sys\nfrom sif.cli import main\n"
        "heavy = {'numpy', 'numba', 'duckdb', 'rich', 'pygments', 'multiprocessing'}\n"
        "try:\n    main(['--help'])\nexcept SystemExit as exc:\n    assert exc.code == 0\n"
        "print(' '.join(sorted(m for m in sys.modules if m in heavy or "
        "m.startswith(('sif.cli.', 'sif.similar', 'sif.actions', 'sif.index')) "
        "and m != 'sif.cli.common')))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Commands:" in run.stdout
    assert run.stdout.splitlines()[-1] == ""
