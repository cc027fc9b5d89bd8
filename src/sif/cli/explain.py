"""``sif explain``: the passages two files share, side by side."""

from __future__ import annotations

import contextlib
import shutil
import sys

import click

from sif.cli.common import (
    EXIT_FATAL,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WARNINGS,
    WarningCounter,
    check_output_file,
    format_option,
    quiet_option,
    size_option_value,
)
from sif.errors import ConfigError, SifError
from sif.outfile import written_text


@click.command()
@click.argument("file_a", type=click.Path(path_type=str))
@click.argument("file_b", type=click.Path(path_type=str))
@format_option("text", "json", "html")
@click.option(
    "--context",
    type=click.IntRange(0, 1 << 30),
    default=3,
    show_default=True,
    help="Lines shown around each passage; the rest of each file is elided with a count.",
)
@click.option(
    "--normalize",
    type=click.Choice(["auto", "markup", "code"]),
    default="auto",
    show_default=True,
    help="Content views, as the index makes them: auto (compressed files decompressed, "
    "PostScript without prolog, ELF strings), markup (also troff/TeX/HTML tags removed), "
    "code (also source as tokens).",
)
@click.option("--raw", is_flag=True, help="No content views: both files as their bytes.")
@click.option(
    "--window",
    type=click.IntRange(8, 4096),
    default=50,
    show_default=True,
    help="Bytes per window (the exact score's 50).",
)
@click.option(
    "--memory",
    default="1G",
    show_default=True,
    callback=size_option_value,
    help="Memory for the tables of windows (a larger pair takes more passes; 16 bytes "
    "a window would do it in one).",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour passages in the text format (auto: when stdout is a terminal).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=str),
    help="Write the report to this file instead of stdout.",
)
@quiet_option
def explain(
    file_a: str,
    file_b: str,
    fmt: str,
    context: int,
    normalize: str,
    raw: bool,
    window: int,
    memory: int,
    color: str,
    output: str | None,
    quiet: bool,
) -> None:
    """The passages FILE_A and FILE_B share: maximal runs of shared windows.

    Exact, not sampled: every shared 50-byte window of either file lies in a
    passage; a passage may come in another order, or several times. The
    summary gives both containments (the exact score's), the longest
    passage, the share of each file covered and the gaps. A member of an
    archive is named a.zip!/dir/x; compressed files are compared
    decompressed; offsets of the markup, code, postscript and elf-strings
    views are the view's (they keep no map to the original lines). json:
    one record per passage (byte offsets, end exclusive; lines for text),
    then a summary record. html: one page, both panes, click a passage.

    Exit status: 0 done, 1 done with warnings, 2 usage error (a missing
    file, a directory, a FIFO, files of different kinds), 3 fatal error.
    """
    from sif.passages import explain as run_explain

    if output is not None:
        # Neither file (nor the archive holding a member) may be the report: emptied
        # before it is read.
        names = {file_a, file_b} | {f.split("!/", 1)[0] for f in (file_a, file_b)}
        check_output_file(output, inputs=sorted(names))
    warnings = WarningCounter(quiet)
    try:
        expl = run_explain(
            file_a,
            file_b,
            normalize="raw" if raw else normalize,
            window=window,
            budget=max(1 << 20, memory),
            on_warning=warnings,
            keep_content=fmt != "json",
        )
    except ConfigError as exc:
        click.echo(f"sif: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except SifError as exc:
        click.echo(f"sif: error: {exc}", err=True)
        sys.exit(EXIT_FATAL)
    try:
        _write(expl, fmt, context, color, output)
    except BrokenPipeError:
        from sif.cli.common import _stop_broken_pipe

        _stop_broken_pipe()
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


def _write(expl: object, fmt: str, context: int, color: str, output: str | None) -> None:
    from sif.explainview import write_json, write_text
    from sif.passages import Explanation

    assert isinstance(expl, Explanation)
    if fmt == "html":
        from sif.html.explain import explain_page

        page = explain_page(expl, context=context)
        if output is None:
            sys.stdout.write(page)
            sys.stdout.flush()
        else:
            with written_text(output) as f:
                f.write(page)
        return
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(written_text(output)) if output else sys.stdout
        if fmt == "json":
            write_json(expl, out)
        else:
            tty = output is None and sys.stdout.isatty()
            colour = color == "always" or (color == "auto" and tty)
            width = shutil.get_terminal_size((160, 24)).columns if tty else 160
            write_text(expl, out, context=context, width=width, colour=colour)
        out.flush()
