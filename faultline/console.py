"""What every command shares at the terminal: the exit codes ``../shared/INTERFACE.md``
fixes, the stderr console (messages, warnings and progress; stdout carries only
results), and its progress bars."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C (faultline.ctrl_c)

err = Console(stderr=True, soft_wrap=True)


def fail(command: str, message: str) -> None:
    """``faultline <command>: <message>`` on stderr, the message as plain text: a path
    or an error holding ``[...]`` is printed as it is, never read as markup (a
    ``--db`` path with ``[/b]`` in it ended in a MarkupError traceback)."""
    err.print(f"[bold red]faultline{' ' if command else ''}{command}:[/] {escape(message)}")


def progress(*, transient: bool = True) -> Progress:
    """A progress bar on stderr (hidden when stderr is not a terminal)."""
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    TaskProgressColumn(), TextColumn("{task.fields[detail]}"),
                    TimeElapsedColumn(), console=err, transient=transient,
                    disable=not err.is_terminal)
