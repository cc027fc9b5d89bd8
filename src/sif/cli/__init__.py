"""The ``sif`` command line: a thin layer over the library.

Each command parses its options into a frozen configuration, makes one
library call and renders the result with :mod:`sif.report`. Commands live in
modules of their own and are imported only when run (or listed by
``--help``), so that ``sif dupes`` starts without numpy.
"""

from __future__ import annotations

import gc
import importlib
from typing import Any

from sif import __version__

# Importing click makes ~20 passes of the cyclic GC (3 ms of a cold `sif query`) over
# objects that are no garbage: it runs without the GC, which is then as it was.
_gc_was_enabled = gc.isenabled()
gc.disable()
try:
    import click
finally:
    if _gc_was_enabled:
        gc.enable()

COMMANDS = {
    "anchors": "sif.cli.anchors:anchors",
    "compare": "sif.cli.compare:compare",
    "dedupe": "sif.cli.actions:dedupe",
    "dupes": "sif.cli.dupes:dupes",
    "explain": "sif.cli.explain:explain",
    "fuzzysum": "sif.cli.fuzzysum:fuzzysum",
    "index": "sif.cli.index:index",
    "link": "sif.cli.actions:link",
    "query": "sif.cli.query:query",
    "remove": "sif.cli.actions:remove",
    "resume": "sif.cli.actions:resume",
    "similar": "sif.cli.similar:similar",
    "undo": "sif.cli.actions:undo",
}
"""Command name -> ``module:attribute`` of its click command."""


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, attr = COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        # Every command runs under the last-resort handlers (Ctrl-C: exit 130;
        # an unexpected exception: one line, exit 3), see sif.cli.common.
        from sif.cli.common import run_guarded

        return run_guarded(lambda: super(LazyGroup, self).invoke(ctx))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sif")
def main() -> None:
    """Find exact replicas and similar files in large file systems."""


def run() -> None:
    """The ``sif`` program (console script and ``python -m sif``): :func:`main` in a
    process of its own, so that a Ctrl-C after the command's work, while the
    interpreter shuts down, still ends quietly with 130 (see
    :func:`sif.cli.common.run_guarded`)."""
    from sif.cli import common

    common.OWN_PROCESS = True
    main()
