from click.testing import CliRunner

import sif
from sif.cli import main


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"sif, version {sif.__version__}"
