"""What every command shares: output options, filters, error mapping, stderr.

Exit status, for every command:

- 0: the command did all its work;
- 1: it finished, but some paths were skipped with a warning on stderr;
- 2: usage error (bad option or argument), nothing was done;
- 3: fatal error (an unusable index or input), named on stderr.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from sif.errors import ConfigError, SifError
from sif.events import ScanWarning

EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_USAGE = 2
EXIT_FATAL = 3

F = TypeVar("F", bound=Callable[..., Any])


class WarningCounter:
    """A warning sink that prints each warning on stderr and counts them."""

    def __init__(self, quiet: bool = False) -> None:
        self.count = 0
        self.quiet = quiet

    def __call__(self, warning: ScanWarning) -> None:
        self.count += 1
        if not self.quiet:
            click.echo(f"sif: warning: {warning}", err=True)


def fail_cleanly(func: F) -> F:
    """Turn :class:`SifError` raised by the library into a message and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from exc
        except SifError as exc:
            click.echo(f"sif: error: {exc}", err=True)
            sys.exit(EXIT_FATAL)
        except BrokenPipeError:
            # The reader went away (``sif dupes | head``): stop quietly, like coreutils.
            sys.stderr.close()
            sys.exit(EXIT_OK)

    return wrapper  # type: ignore[return-value]


def format_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    """The ``--format`` option with the formats a command supports."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help="Output format on stdout.",
    )


def quiet_option(func: F) -> F:
    return click.option(
        "-q", "--quiet", is_flag=True, help="No progress bar, summary or warnings on stderr."
    )(func)


def size_option_value(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A click callback: ``"4K"``, ``"1.5MiB"`` -> bytes; a bad size is a usage error."""
    from sif.walk import parse_size

    if value is None:
        return None
    try:
        return parse_size(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from exc


def jobs_option(func: F) -> F:
    """``-j/--jobs``: processes that share the work (this one and ``jobs - 1`` workers)."""
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(1, 256),
        help="Worker processes (default: one per core).",
    )(func)


def walk_options(func: F) -> F:
    """The filters every command that walks a tree takes (see :mod:`sif.walk`)."""
    options = [
        click.option(
            "--from-file",
            "from_file",
            type=click.File("rb"),
            help="Read more paths from FILE, one per line ('-' for stdin).",
        ),
        click.option(
            "-0",
            "--null",
            "null",
            is_flag=True,
            help="Paths in --from-file end with NUL (sif dupes also prints names ending in NUL).",
        ),
        click.option(
            "--min-size",
            callback=size_option_value,
            default="0",
            help="Skip files smaller than this (4K, 1M...).",
        ),
        click.option("--max-size", callback=size_option_value, help="Skip files larger than this."),
        click.option(
            "--include", multiple=True, metavar="GLOB", help="Only files matching GLOB (repeat)."
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="GLOB",
            help="Skip files and directories matching GLOB (repeat). "
            "A glob with '/' matches the whole path, else the name.",
        ),
        click.option(
            "--hidden/--no-hidden",
            default=True,
            show_default=True,
            help="Include files and directories whose name starts with '.'.",
        ),
        click.option(
            "-L",
            "--follow-symlinks",
            is_flag=True,
            help="Follow symbolic links (loops are detected). Off by default.",
        ),
        click.option(
            "-x", "--one-file-system", is_flag=True, help="Stay on the file system of each root."
        ),
        click.option("--empty", is_flag=True, help="Include empty files (left out by default)."),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def collect_roots(paths: tuple[str, ...], from_file: Any, null: bool) -> list[str]:
    """The command-line paths followed by those of ``--from-file``; at least one."""
    from sif.walk import read_path_list

    roots = list(paths)
    if from_file is not None:
        roots.extend(read_path_list(from_file, nul=null))
    if not roots:
        raise click.UsageError("no PATH given (and no --from-file)")
    return roots


class StderrProgress:
    """A rich progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self._console,
            transient=True,
        )
        self._task: Any = None
        self._started = False
        self._pending = 0
        self._next = 0.0

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        if not self._started:
            # Started at the first stage, not before: the library forks its workers
            # first, and a fork must not copy the bar's refresh thread mid-write.
            self._started = True
            self._progress.start()
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._pending = 0
        self._task = self._progress.add_task(f"{name} ({unit})", total=total)

    def advance(self, amount: int = 1) -> None:
        # Called once per file read: hand rich the sum ten times a second, not each call.
        self._pending += amount
        now = time.monotonic()
        if now >= self._next and self._task is not None:
            self._progress.advance(self._task, self._pending)
            self._pending = 0
            self._next = now + 0.1

    def log(self, message: str) -> None:
        pass

    def close(self) -> None:
        if self._started:
            self._progress.stop()


def make_progress(quiet: bool) -> Any:
    """A progress bar on stderr when it is a terminal and not ``quiet``; else ``None``."""
    if quiet or not sys.stderr.isatty():
        return None
    return StderrProgress()
