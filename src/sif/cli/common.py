"""What every command shares: output options, filters, error mapping, stderr.

Exit status, for every command:

- 0: the command did all its work;
- 1: it finished, but some paths were skipped with a warning on stderr (a note,
  such as a name shown escaped, skips nothing and does not count);
- 2: usage error (bad option or argument, a PATH that does not exist), nothing was done;
- 3: fatal error (an unusable index or input, a worker process that died), named on stderr;
- 130: interrupted (Ctrl-C): stopped quietly; the index keeps its last committed state.

An unexpected exception is one line on stderr and exit 3; ``SIF_DEBUG=1`` adds
the traceback.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, NoReturn, TypeVar

import click

from sif.errors import ConfigError, SifError
from sif.events import ScanWarning, display_path

EXIT_OK = 0
EXIT_WARNINGS = 1
EXIT_USAGE = 2
EXIT_FATAL = 3
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


class WarningCounter:
    """A warning sink that prints each warning on stderr and counts those that skipped a path.

    ``count`` (what sets exit status 1) counts the warnings that skipped
    something; a note (``ScanWarning.skipped`` false, such as a name shown
    escaped) is printed as ``sif: note:`` and not counted.
    """

    def __init__(self, quiet: bool = False) -> None:
        self.count = 0
        self.quiet = quiet

    def __call__(self, warning: ScanWarning) -> None:
        if warning.skipped:
            self.count += 1
        if not self.quiet:
            kind = "warning" if warning.skipped else "note"
            click.echo(f"sif: {kind}: {warning}", err=True)


def fail_cleanly(func: F) -> F:
    """Turn :class:`SifError` raised by the library into a message and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from exc
        except SifError as exc:
            _report_before_error()
            click.echo(f"sif: error: {exc}", err=True)
            sys.exit(EXIT_FATAL)
        except BrokenPipeError:
            _stop_broken_pipe()

    return wrapper  # type: ignore[return-value]


#: Seconds a fatal error's line waits for standard output's reader to take the report's
#: part already made (:func:`_report_before_error`).
REPORT_BEFORE_ERROR_S = 1.0


def _report_before_error() -> None:
    """Let out what standard output still buffers before a fatal error's line, not after it.

    The report was cut by the error: its part already made goes first, then the
    line that says why it stops (the exit status says it too). The interpreter's
    last flush let it out after the line. If it cannot be written (the reader
    went away, a full disk), it is dropped: the error to tell is the first one.
    A reader that does not take it within :data:`REPORT_BEFORE_ERROR_S` (a pipe
    to a stalled process) gets the rest after the line, as before: the line is
    never held up by it.
    """
    from sif.cli.streams import flush_within

    flush_within(REPORT_BEFORE_ERROR_S)


def run_guarded(func: Callable[[], Any]) -> Any:
    """Run a command with the last-resort handlers: Ctrl-C, a closed pipe, any exception.

    Ctrl-C stops quietly with exit 130 (whatever the exception it turned into
    on its way up, DuckDB's interrupt for one). An exception that no command
    maps (a bug, a damaged file nobody checked) is one line and exit 3; with
    ``SIF_DEBUG=1`` in the environment, its traceback follows. Click's own
    exceptions (usage errors, exits) pass through.
    """
    # A plain flag, not a threading.Event: its set() takes a lock, and a second Ctrl-C
    # landing inside the first one's set() waited on that lock for ever.
    interrupted = [False]

    def on_sigint(signum: int, frame: Any) -> None:
        interrupted[0] = True
        raise KeyboardInterrupt

    previous = None
    # A run started with SIGINT ignored (a script's background job, by the shell's rule;
    # nohup) keeps ignoring it, as Python itself does: a Ctrl-C at the terminal is for
    # the job in the foreground.
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    ):
        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        return func()
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except KeyboardInterrupt:
        _exit_interrupted()
    except BrokenPipeError:
        _stop_broken_pipe()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except SifError as exc:
        _report_before_error()
        click.echo(f"sif: error: {exc}", err=True)
        sys.exit(EXIT_FATAL)
    except Exception as exc:  # the last resort: one line, never a traceback
        if interrupted[0]:
            _exit_interrupted()
        _report_before_error()
        click.echo(f"sif: error: {describe_exception(exc)}", err=True)
        if os.environ.get("SIF_DEBUG"):
            import traceback

            traceback.print_exc()
        else:
            click.echo("sif: (SIF_DEBUG=1 shows the traceback)", err=True)
        sys.exit(EXIT_FATAL)
    finally:
        if previous is not None:
            # In sif's own process a Ctrl-C from here on (the interpreter shutting
            # down) exits 130 at once; in a host process the old handler returns.
            signal.signal(signal.SIGINT, _late_interrupt if OWN_PROCESS else previous)


OWN_PROCESS = False
"""Set by :func:`sif.cli.run`: the command is the process (not a test's CliRunner)."""


def _late_interrupt(signum: int, frame: Any) -> None:
    _exit_interrupted()


def _exit_interrupted() -> NoReturn:
    """Exit 130 now, every ``finally`` of the command having run.

    Not ``sys.exit``: when the interrupt lands inside ``exec`` of a string (a
    dataclass or named tuple being made while a module is imported), CPython
    3.11 records an unhandled KeyboardInterrupt that nothing clears, and at
    exit kills itself with SIGINT (status -2) although sif handled it.
    """
    from sif.cli.streams import abandon_output

    abandon_output()  # sif's own standard output drops what it buffers: no stalled reader waits
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_INTERRUPTED)


REPORT_BUFFER = 1 << 16


@contextlib.contextmanager
def report_output() -> Iterator[BinaryIO]:
    """Standard output for a report, as bytes, buffered even where Python's is not; flushed
    when the block ends.

    Under ``python -u`` or ``PYTHONUNBUFFERED`` (set in many container images)
    ``sys.stdout.buffer`` is the raw file, and each write of a report a
    system call: 21,455 of them for the 4,129 groups of ``sif dupes /usr``.
    Then the report goes through a buffer of :data:`REPORT_BUFFER` bytes over
    a duplicate of the descriptor, closed at the end (standard output itself
    stays open; a closed reader's ``BrokenPipeError`` comes from here).

    In sif's own process standard output is always buffered already
    (:mod:`sif.cli.streams`, which also names its write errors and drops what
    it buffers on a Ctrl-C); this path serves a host that calls :func:`sif.cli.main`
    in an unbuffered interpreter.
    """
    out = sys.stdout.buffer
    try:
        fd = out.fileno() if isinstance(out, io.RawIOBase) else -1
    except (OSError, ValueError):  # a raw stream with no descriptor: as it is
        fd = -1
    if fd < 0:
        yield out
        out.flush()
        return
    raw = io.FileIO(os.dup(fd), "wb")
    buffered = io.BufferedWriter(raw, REPORT_BUFFER)
    try:
        yield buffered
    except BaseException:
        # The run is stopping (Ctrl-C, an error): what is buffered is dropped, not
        # written to a reader that may be gone or stalled, and its error not raised
        # over the one on its way up.
        raw.close()
        with contextlib.suppress(OSError, ValueError):
            buffered.close()
        raise
    buffered.close()  # flushes, then closes the duplicate whatever the flush did


def _stop_broken_pipe() -> None:
    # The reader went away (``sif dupes | head``): stop quietly, like coreutils. Standard
    # output goes to /dev/null first (Python's own advice): the interpreter's last flush
    # of what its buffer still held met the closed pipe again and exited 120.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    sys.stderr.close()
    sys.exit(EXIT_OK)


def describe_exception(exc: BaseException) -> str:
    """One line for an exception no command expected: the path and the cause when known."""
    if isinstance(exc, MemoryError):
        return "out of memory"
    if isinstance(exc, OSError):
        from sif.outfile import cause_of

        cause = cause_of(exc)
        if exc.filename is not None:
            return f"{display_path(os.fsdecode(exc.filename))}: {cause}"
        return cause
    text = " ".join(str(exc).split()) or "(no message)"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}"


def check_paths(paths: Iterable[str], what: str = "PATH") -> None:
    """A usage error for the first of ``paths`` that does not exist (``-`` is stdin).

    Checked before any work, so that a typo creates nothing (no index
    directory, no lock). A path that exists but cannot be read is left to the
    command, which skips it with a warning.
    """
    for path in paths:
        if path == "-":
            continue
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            raise click.UsageError(
                f"{what} {display_path(path)}: no such file or directory"
            ) from None
        except OSError:
            pass  # the command's walk names it as a warning
        except ValueError:  # an embedded NUL
            raise click.UsageError(f"{what} {display_path(path)}: not a valid path") from None


def check_output_file(path: str, inputs: Iterable[str] = (), index: str | None = None) -> None:
    """A usage error, before any work, when ``path`` cannot be written: empty, a directory, a
    file that is not writable, or a new file whose directory is missing or read-only
    (written as ``>`` would, :mod:`sif.outfile`), one of ``inputs`` (read lazily, after the
    file is emptied), a path in the ``index`` directory (its files are mapped and read
    while the report is written: emptied, they would end the run with SIGBUS and lose
    the index), or a descriptor (``/dev/stdout``, ``/dev/fd/N``) that is not open for
    writing."""
    from sif.outfile import cause_of, check_descriptor, descriptor_of

    if not path:
        raise click.UsageError("-o/--output: an empty path")
    if index is not None:
        where = os.path.realpath(path)
        top = os.path.realpath(index)
        if where == top or where.startswith(top.rstrip(os.sep) + os.sep):
            raise click.UsageError(f"{display_path(path)}: inside the index {display_path(index)}")
    fd = descriptor_of(path)
    if fd is not None:  # sif's own descriptor (as bash has it): open, and for writing
        why = check_descriptor(path, fd)
        if why is not None:
            raise click.UsageError(f"{display_path(path)}: {why}")
        return
    try:
        os.stat(path)
    except FileNotFoundError:
        if path.endswith(os.sep):
            raise click.UsageError(f"{display_path(path)}: is a directory") from None
    except OSError as exc:  # a loop of symbolic links, a component that is a file
        raise click.UsageError(f"{display_path(path)}: {cause_of(exc)}") from None
    else:
        if os.path.isdir(path):
            raise click.UsageError(f"{display_path(path)}: is a directory")
        if not os.access(path, os.W_OK):  # written in place: the file's permission decides
            raise click.UsageError(f"{display_path(path)}: not writable")
        for name in inputs:  # `sort x > x`: emptied before it is read
            with contextlib.suppress(OSError, ValueError):
                if os.path.samefile(name, path):
                    raise click.UsageError(
                        f"{display_path(path)}: also an input (it would be emptied before "
                        "it is read)"
                    )
        return
    parent = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(parent):
        raise click.UsageError(f"{display_path(path)}: no such directory {display_path(parent)}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise click.UsageError(
            f"{display_path(path)}: directory {display_path(parent)} is not writable"
        )


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
    """``-j/--jobs``: how many share the work: processes (this one and ``jobs - 1``
    workers), or, for ``sif dupes`` where its C loops serve, this process and up to
    ``jobs - 1`` helper threads."""
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(1, 256),
        help="Processes (or, for dupes, threads) that share the work (default: one per core).",
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


def collect_roots(
    paths: tuple[str, ...],
    from_file: Any,
    null: bool,
    on_warning: Callable[[ScanWarning], None] | None = None,
) -> list[str]:
    """The command-line paths followed by those of ``--from-file``; at least one.

    A command-line path that does not exist is a usage error; a path of
    ``--from-file`` that does not exist is skipped with a warning (the list may
    be older than the tree): here, given ``on_warning`` (``sif index`` and
    ``sif similar``, whose index update refuses a root that is not there), else
    by the walk.
    """
    from sif.walk import read_path_list

    check_paths(paths)
    roots = list(paths)
    if from_file is not None:
        listed = list(read_path_list(from_file, nul=null))
        if on_warning is not None:
            for gone in [p for p in listed if not os.path.lexists(p)]:
                on_warning(ScanWarning(gone, "no such file or directory (listed by --from-file)"))
            listed = [p for p in listed if os.path.lexists(p)]
            if not listed and not roots:
                raise click.UsageError("no PATH given, and none of --from-file's is there")
        roots.extend(listed)
    if not roots:
        raise click.UsageError("no PATH given (and no --from-file)")
    return roots


def progress_amount(completed: float, total: float | None, unit: str) -> str:
    """The amount shown beside a stage's bar: ``"12.0 MiB/1.5 GiB"``, ``"1,234 files"``.

    Bytes are in binary units (as in the summaries); other units are counts.
    A stage without a total shows what is done so far (nothing before the
    first unit: its spinner says it works).
    """
    from sif.report import human_size

    def amount(n: float) -> str:
        return human_size(int(n)) if unit == "bytes" else f"{int(n):,}"

    if total is None:
        if not completed:
            return ""
        return amount(completed) if unit == "bytes" else f"{amount(completed)} {unit}"
    done = f"{amount(completed)}/{amount(total)}"
    return done if unit == "bytes" else f"{done} {unit}"


_ACTIVE: list[StderrProgress] = []
"""The progress bars whose refresh thread runs (paused across a fork)."""


def _pause_refresh() -> None:
    for bar in _ACTIVE:
        bar._gate.acquire()


def _resume_refresh() -> None:
    for bar in _ACTIVE:
        bar._gate.release()


def _forget_refresh() -> None:
    _ACTIVE.clear()  # a forked child has no refresh thread (and never draws)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_pause_refresh, after_in_parent=_resume_refresh, after_in_child=_forget_refresh
    )


class StderrProgress:
    """A rich progress bar on stderr (only when stderr is a terminal).

    A stage with a total shows a bar and its amount (bytes in KiB, MiB...);
    one without shows a spinner and the count so far. The bar is redrawn ten
    times a second by a thread of its own, which holds no lock while the
    library forks its workers (``os.register_at_fork``): a worker never
    inherits the terminal's lock mid-write, whenever it is forked.
    """

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            ProgressColumn,
            SpinnerColumn,
            Task,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.text import Text

        class BarOrSpinner(ProgressColumn):
            def __init__(self) -> None:
                super().__init__()
                self.bar, self.spinner = BarColumn(), SpinnerColumn()

            def render(self, task: Task) -> Any:
                return self.spinner.render(task) if task.total is None else self.bar.render(task)

        class Amount(ProgressColumn):
            def render(self, task: Task) -> Text:
                unit = task.fields.get("unit", "files")
                return Text(progress_amount(task.completed, task.total, unit))

        self._console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarOrSpinner(),
            Amount(),
            TimeElapsedColumn(),
            console=self._console,
            transient=True,
            auto_refresh=False,
        )
        self._task: Any = None
        self._started = False
        self._pending = 0
        self._next = 0.0
        self._gate = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _refresh_loop(self) -> None:
        while not self._stop.wait(0.1):
            with self._gate:
                if not self._stop.is_set():
                    self._progress.refresh()

    def stage(self, name: str, total: int | None = None, unit: str = "files") -> None:
        if not self._started:
            self._started = True
            self._progress.start()
            _ACTIVE.append(self)
            self._thread = threading.Thread(
                target=self._refresh_loop, name="sif-progress", daemon=True
            )
            self._thread.start()
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._pending = 0
        self._task = self._progress.add_task(name, total=total, unit=unit)

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
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            self._progress.stop()
            self._started = False


def make_progress(quiet: bool) -> Any:
    """A progress bar on stderr when it is a terminal and not ``quiet``; else ``None``."""
    if quiet or not sys.stderr.isatty():
        return None
    return StderrProgress()
