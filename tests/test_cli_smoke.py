from click.testing import CliRunner

from sif.cli import main


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert "sif" in result.output
