"""The ``sif`` command line: a thin layer over the library.

Each command parses its options into a frozen configuration, makes one
library call and renders the result with :mod:`sif.report`. Commands live in
modules of their own and are imported only when run, so that ``sif dupes``
starts without numpy; ``sif --help`` lists them from :data:`SUMMARIES`
without importing any.
"""

from __future__ import annotations

import gc
import importlib
from gettext import gettext as _
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

SUMMARIES = {
    "anchors": "Anchor sets for --scheme anchors (the paper's first method).",
    "compare": "Compare the trees A and B by content: every file of each accounted for.",
    "dedupe": "Share the extents of the redundant files of REPORT with the kept copy (reflinks).",
    "dupes": "Groups of exact replicas (identical content) among the files under PATHS.",
    "explain": "The passages FILE_A and FILE_B share: maximal runs of shared windows.",
    "fuzzysum": "Fuzzy checksums of text FILES, printed as 'digest  path' like md5sum "
    "('-': stdin).",
    "index": "Build or refresh the index of the files under PATHS.",
    "link": "Make every redundant file of REPORT a hard link to the kept copy.",
    "query": "The indexed files similar to each FILE (which need not be indexed).",
    "remove": "Delete the redundant files of REPORT (or move them: --trash, --to DIR).",
    "resume": "Finish the run recorded in JOURNAL (one that was killed): the same checks, "
    "the same journal.",
    "similar": "All groups of similar files under PATHS (the paper's section 4).",
    "undo": "Reverse the run recorded in JOURNAL (link, dedupe, remove --trash/--to).",
}
"""Command name -> the first paragraph of its help, which ``sif --help`` shortens
as click would (held to each command's own by the tests). Importing every command
for it cost ``sif --help`` ~160 ms: numpy, sif.similar, the actions' planner."""


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, attr = COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's listing, with a stand-in made of its summary for each command
        # not imported yet (the stand-in is shown, never run).
        commands: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is None and name in SUMMARIES:
                cmd = click.Command(name, help=SUMMARIES[name])
            elif cmd is None:
                cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                commands.append((name, cmd))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section(_("Commands")):
                formatter.write_dl(
                    [(name, cmd.get_short_help_str(limit)) for name, cmd in commands]
                )

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
    import sys

    from sif.cli import common, streams

    common.OWN_PROCESS = True
    streams.install()
    try:
        try:
            main()
        finally:
            # What is still buffered is written here, where a failure is one line
            # and exit 3, not at the interpreter's exit (a message and exit 120).
            if sys.stdout is not None:
                sys.stdout.flush()
    except streams.OutputError as exc:  # raised before a command's handlers (--help)
        click.echo(f"sif: error: {exc}", err=True)
        sys.exit(common.EXIT_FATAL)
    except BrokenPipeError:  # the reader of the last flush went away: quietly, 0
        common._stop_broken_pipe()
    except KeyboardInterrupt:  # during the last flush
        common._exit_interrupted()
    except SystemExit as exc:
        # click's own answer to a closed pipe before any command ran (`sif --help | true`)
        # is exit 1; a closed pipe is 0 everywhere else.
        if exc.code == 1 and streams.output_broken():
            common._stop_broken_pipe()
        raise
