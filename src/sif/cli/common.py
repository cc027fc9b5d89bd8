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
