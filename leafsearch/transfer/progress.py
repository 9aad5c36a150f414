"""The progress bar of the transfer commands (rich): documents done, docs/s and time left.

Shown on standard error only when it is a terminal, so logs and pipes get no control codes."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class _DocsPerSecond(ProgressColumn):
    """The rate of this run: a resumed export's earlier documents (`base`) are not counted."""

    def render(self, task: Task) -> Text:
        docs = task.fields.get("docs", task.completed) - task.fields.get("base", 0)
        elapsed = task.elapsed or 0.0
        rate = docs / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:,.0f} docs/s", style="progress.data.speed")


class _Docs(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(f"{task.fields.get('docs', 0):,} docs")


def documents_bar(quiet: bool = False) -> Progress:
    """A bar counting documents against a known (or unknown: None) total."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _DocsPerSecond(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        disable=quiet or not sys.stderr.isatty(),
    )


def bytes_bar(quiet: bool = False) -> Progress:
    """A bar over the input's bytes (its size is known before its documents are counted), showing
    the documents done and their rate beside it."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        _Docs(),
        _DocsPerSecond(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        disable=quiet or not sys.stderr.isatty(),
    )
