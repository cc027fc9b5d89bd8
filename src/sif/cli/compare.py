"""``sif compare A B``: two trees by content, file by file and directory by directory."""

from __future__ import annotations

import os
import stat
import sys

import click

from sif.cli.common import (
    EXIT_FATAL,
    EXIT_USAGE,
    WarningCounter,
    fail_cleanly,
    format_option,
    jobs_option,
    quiet_option,
    report_output,
)
from sif.cli.index_options import index_option
from sif.events import display_path

#: diff's exit status: 0 the same content under the same names, 1 different.
EXIT_SAME, EXIT_DIFFERENT = 0, 1


def _check_tree(name: str, path: str) -> None:
    """One line and status 2 for a tree that is missing or not a directory."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        cause = "no such file or directory"
    except OSError as exc:
        click.echo(f"sif: error: {name} {display_path(path)}: {exc.strerror}", err=True)
        sys.exit(EXIT_FATAL)
    except ValueError:
        cause = "not a valid path"
    else:
        from sif.compare.passes import is_archive

        if stat.S_ISDIR(st.st_mode) or is_archive(path):
            return
        cause = "not a directory (nor a zip or tar archive)"
    click.echo(f"sif: error: {name} {display_path(path)}: {cause}", err=True)
    sys.exit(EXIT_USAGE)


@click.command()
@click.argument("a", type=click.Path(path_type=str))
@click.argument("b", type=click.Path(path_type=str))
@click.option(
    "-t",
    "--threshold",
    type=click.FloatRange(0, 100),
    default=50.0,
    show_default=True,
    help="Least similarity, in percent (how much of the smaller file the larger holds), "
    "for moved+changed.",
)
@click.option(
    "--fast",
    is_flag=True,
    help="Pass 3 compares -t with the sampled estimate (~N), not the exact score.",
)
@click.option("--all", "all_files", is_flag=True, help="Text: list same files and directories too.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files and directories.")
@click.option(
    "--hidden/--no-hidden",
    default=True,
    show_default=True,
    help="Include names starting with '.'.",
)
@click.option("--wait", is_flag=True, help="Wait while another process writes the index.")
@index_option
@jobs_option
@format_option("text", "json", "csv")
@quiet_option
@fail_cleanly
def compare(
    a: str,
    b: str,
    threshold: float,
    fast: bool,
    all_files: bool,
    exclude: tuple[str, ...],
    hidden: bool,
    wait: bool,
    index: str | None,
    jobs: int | None,
    fmt: str,
    quiet: bool,
) -> None:
    """Compare the trees A and B by content: every file of each accounted for.

    Four passes, each record naming the one that decided: 1, the same
    relative path: same (identical bytes) or changed (with the exact
    containments both ways; two large files, 32 MB together or more, on a
    window sample, shown ~N); 2, by exact content: moved (a rename is a
    move), or duplicate (a copy within one side whose content the other side
    holds under a name already matched); 3, by fingerprints through the index
    (--index; a second run reads only what changed): moved+changed, similar
    content under another path at -t or more, with a-in-b or b-in-a when one
    is held whole by the other; 4, what is left: only-a, only-b.

    Content decides; names are only hints where content is ambiguous: among
    several candidates of equal score, the pairs with the most similar names
    (file name, then path) are taken first, and the record says "names chose".

    Then, for each directory of A and of B, the share of its bytes found on
    the other side and the directory there that holds most of it, and the
    bytes by status. Text lists what differs (--all: everything); json gives
    one record per file, per directory and the summary; csv the files.

    A or B may be a zip or tar archive (also compressed): its members are
    its files (under its one top directory, when all lie under one).

    Exit status, as diff: 0 the same content under the same names, 1 they
    differ (or a file could not be read: a warning), 2 usage error, 3 fatal.
    """
    from sif.compare import compare_trees
    from sif.index import default_index_path
    from sif.report_compare import write_compare
    from sif.walk import WalkOptions

    _check_tree("A", a)
    _check_tree("B", b)
    warnings = WarningCounter(quiet)
    result = compare_trees(
        a,
        b,
        index or default_index_path(),
        threshold=threshold,
        exact=not fast,
        walk_options=WalkOptions(exclude=exclude, hidden=hidden),
        jobs=jobs,
        wait=wait,
        on_warning=warnings,
    )
    with report_output() as out:
        write_compare(result, out, fmt, all_files)
    if not quiet:
        s = result.stats
        idx = (
            f"; {s.queried:,} files queried, index {s.index.files_read:,} files read"
            if s.index is not None
            else ""
        )
        click.echo(
            f"sif: {s.files_a:,} files in A, {s.files_b:,} in B; "
            f"{s.files_hashed:,} files hashed ({s.files_known:,} known to the index){idx}; "
            f"{warnings.count} warnings, {s.seconds:.2f} s",
            err=True,
        )
    sys.exit(EXIT_SAME if result.identical and not warnings.count else EXIT_DIFFERENT)
