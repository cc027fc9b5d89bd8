"""``sif link``, ``sif dedupe``, ``sif remove``, ``sif undo``, ``sif resume``: act on a report."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from sif.cli.common import (
    EXIT_OK,
    EXIT_WARNINGS,
    WarningCounter,
    fail_cleanly,
    quiet_option,
    report_output,
)
from sif.report import human_size, json_line

F = TypeVar("F", bound=Callable[..., Any])

KEEP_HELP = (
    "Which copy of each group is kept, best first; repeat to break ties in order "
    "(the path breaks the last tie). first-root: the copy under the earliest root given "
    "to 'sif dupes' (rdfind's rule)."
)


def plan_options(func: F) -> F:
    """The report, the keep policy, --dry-run, --format and --journal of every action."""
    from sif.actions.plan import KEEP_RULES

    options = [
        click.argument("report", type=click.Path(dir_okay=False, allow_dash=True, exists=True)),
        click.option(
            "--keep",
            "keep_rules",
            multiple=True,
            type=click.Choice(KEEP_RULES),
            help=KEEP_HELP + "  [default: first-root]",
        ),
        click.option(
            "--keep-path",
            multiple=True,
            metavar="GLOB",
            help="Never drop a file matching GLOB (a glob with '/' matches the whole path, "
            "else the name; repeat).",
        ),
        click.option(
            "--only-path",
            multiple=True,
            metavar="GLOB",
            help="Drop only files matching GLOB (repeat).",
        ),
        click.option(
            "--rf-over",
            type=click.IntRange(1),
            default=1,
            show_default=True,
            help="Copies of each group to keep.",
        ),
        click.option("-n", "--dry-run", is_flag=True, help="Print the plan and change nothing."),
        click.option(
            "--format",
            "fmt",
            type=click.Choice(["text", "json"]),
            default="text",
            show_default=True,
            help="The plan on stdout: shell commands, or JSON lines (one step a line).",
        ),
        click.option(
            "--journal",
            type=click.Path(dir_okay=False),
            help="Write the journal here (default: a new file under the user's state "
            "directory, named in the summary).",
        ),
        click.option(
            "-j",
            "--jobs",
            type=click.IntRange(1, 64),
            help="Threads sharing the re-checks and steps (default 1: on two quiet cores one "
            "was faster, the other core closing the dropped files; more can help on a busy "
            "machine).",
        ),
        quiet_option,
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def _act(action: str, opts: dict[str, Any], to: str | None = None, absolute: bool = False) -> None:
    from sif.actions import KeepPolicy, plan_actions, read_report, run_plan
    from sif.actions.probe import probe_reflink

    quiet = opts["quiet"]
    warnings = WarningCounter(quiet)
    gc.disable()  # the report's objects live to the end: no collection need walk them
    try:
        report = read_report(opts["report"])
        policy = KeepPolicy(
            rules=tuple(opts["keep_rules"]) or ("first-root",),
            keep_paths=tuple(opts["keep_path"]),
            only_paths=tuple(opts["only_path"]),
            rf_over=opts["rf_over"],
        )
        plan = plan_actions(report, action, policy, to=to, absolute=absolute)
    finally:
        gc.freeze()  # the report and the plan: out of every later collection's walk
        gc.enable()
    if action == "reflink":
        probe_reflink(plan)
    for message in plan.refused:
        warnings.count += 1
        if not quiet:
            click.echo(f"sif: warning: {message}", err=True)
    if opts["dry_run"]:
        with report_output() as out:
            for step in plan.steps:
                if opts["fmt"] == "json":
                    out.write(json_line(step.to_dict()))
                else:
                    out.write(step.shell().encode("utf-8", "surrogateescape") + b"\n")
        if not quiet:
            click.echo(
                f"sif: dry run: {len(plan.active):,} steps, {len(plan.noops):,} no-ops, "
                f"{len(plan.refused):,} refused, {plan.left_alone:,} groups left alone; "
                "nothing changed",
                err=True,
            )
        sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)

    def tell(path: str) -> None:
        if not quiet:  # before the first step: a killed run can be resumed or undone
            click.echo(f"sif: journal: {path} (sif undo / sif resume read it)", err=True)

    result = run_plan(
        plan, journal=opts["journal"], on_warning=warnings, on_journal=tell, threads=opts["jobs"]
    )
    if not quiet:
        gained = (
            f"{human_size(result.bytes_moved)} moved"
            if action in ("trash", "move")
            else f"{human_size(result.bytes_reclaimed)} reclaimed"
        )
        click.echo(
            f"sif: {action}: {result.done:,} done, {result.noops:,} no-ops, "
            f"{result.skipped:,} skipped, {result.failed:,} failed, {len(plan.refused):,} "
            f"refused; {gained}, {human_size(result.bytes_read)} re-read; "
            f"journal: {result.journal}",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


@click.command()
@plan_options
@click.option(
    "--symlink", is_flag=True, help="Make symbolic links (relative) instead of hard links."
)
@click.option("--absolute", is_flag=True, help="With --symlink: absolute symbolic links.")
@fail_cleanly
def link(symlink: bool, absolute: bool, **opts: Any) -> None:
    """Make every redundant file of REPORT a hard link to the kept copy.

    REPORT is the output of 'sif dupes --format json' (a file, or '-' for
    stdin). The whole plan is made first (--dry-run prints it). Just before
    each step, both files are opened and checked against the report (device,
    inode, size, mtime, ctime) and their bytes are compared; any difference
    skips that file with a warning. The link is made under a temporary name
    beside the file and renamed over it, and every step is journaled: 'sif
    undo JOURNAL' makes the files independent again.

    A hard link has one owner, mode and set of times: the kept copy's. The
    redundant files' own metadata is kept in the journal, and undo restores
    it. Files on another file system than the kept copy are refused (say
    --symlink for symbolic links).

    Exit status: 0 done, 1 some files skipped, refused or failed (named on
    stderr), 2 usage error, 3 unusable report.
    """
    if absolute and not symlink:
        raise click.UsageError("--absolute goes with --symlink")
    _act("symlink" if symlink else "link", opts, absolute=absolute)


@click.command()
@plan_options
@fail_cleanly
def dedupe(**opts: Any) -> None:
    """Share the extents of the redundant files of REPORT with the kept copy (reflinks).

    For Btrfs, XFS (with reflink) and bcachefs: FIDEDUPERANGE, so the kernel
    compares the bytes itself, after sif's own re-check. Each file stays a
    file of its own, with its own owner, mode and times; only its blocks
    are shared. Each target directory is probed once: where the file system
    cannot share extents, sif says so and leaves the files alone (there is
    no silent fallback). Extents already shared are no-ops.

    Exit status: 0 done, 1 some files skipped, refused or failed, 2 usage
    error, 3 unusable report.
    """
    _act("reflink", opts)


@click.command()
@plan_options
@click.option("--trash", is_flag=True, help="Move them to the user's trash (freedesktop.org).")
@click.option(
    "--to",
    "to",
    type=click.Path(file_okay=False),
    help="Move them under DIR, keeping their paths relative to their 'sif dupes' root.",
)
@fail_cleanly
def remove(trash: bool, to: str | None, **opts: Any) -> None:
    """Delete the redundant files of REPORT (or move them: --trash, --to DIR).

    Each file is re-checked against the report and byte-compared with the
    kept copy just before it goes. Only --trash and --to can be undone
    ('sif undo JOURNAL'). A file is moved by a rename on its own file
    system, never over an existing name.

    Exit status: 0 done, 1 some files skipped, refused or failed, 2 usage
    error, 3 unusable report.
    """
    if trash and to is not None:
        raise click.UsageError("--trash and --to exclude each other")
    _act("trash" if trash else "move" if to is not None else "remove", opts, to=to)


@click.command()
@click.argument("journal", type=click.Path(dir_okay=False, exists=True))
@quiet_option
@fail_cleanly
def undo(journal: str, quiet: bool) -> None:
    """Reverse the run recorded in JOURNAL (link, dedupe, remove --trash/--to).

    A link becomes an independent copy again (with its own mode, owner and
    times); a moved file goes back. Where a file changed since the run, it
    is refused with a warning naming it. A killed run can be undone too.

    Exit status: 0 done, 1 some files refused or failed, 3 unusable journal.
    """
    from sif.actions import undo_journal

    warnings = WarningCounter(quiet)
    result = undo_journal(journal, on_warning=warnings)
    if not quiet:
        click.echo(
            f"sif: undo: {result.undone:,} undone, {result.refused:,} refused, "
            f"{result.failed:,} failed",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)


@click.command()
@click.argument("journal", type=click.Path(dir_okay=False, exists=True))
@quiet_option
@fail_cleanly
def resume(journal: str, quiet: bool) -> None:
    """Finish the run recorded in JOURNAL (one that was killed): the same checks, the same journal.

    Exit status: 0 done, 1 some files skipped or failed, 3 unusable journal.
    """
    from sif.actions import resume_journal

    warnings = WarningCounter(quiet)
    result = resume_journal(journal, on_warning=warnings)
    if not quiet:
        click.echo(
            f"sif: resume: {result.done:,} done, {result.noops:,} no-ops, "
            f"{result.skipped:,} skipped, {result.failed:,} failed; journal: {journal}",
            err=True,
        )
    sys.exit(EXIT_WARNINGS if warnings.count else EXIT_OK)
