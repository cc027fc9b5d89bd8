"""The ``sif`` command line: a thin layer over the library.

Each command parses its options into a frozen configuration, makes one
library call and renders the result with :mod:`sif.report`.
"""

from __future__ import annotations

import click

from sif import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sif")
def main() -> None:
    """Find exact replicas and similar files in large file systems."""


def _register() -> None:
    # Imported here so that each command lives in a module of its own.
    from sif.cli.dupes import dupes
    from sif.cli.fuzzysum import fuzzysum

    main.add_command(dupes)
    main.add_command(fuzzysum)


_register()
