"""What ``bench`` prints: lines on stdout, JSON lines, one line per finished run, progress bars on stderr,
and docstrings (reST) turned into plain text for ``bench list`` and ``bench info``."""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

from iclrbench.core.jsonsafe import dumps


def emit(text: str) -> None:
    """Write ``text`` to stdout as whole lines, flushed at once (a pipe reader sees each as it comes)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def json_line(obj: Any) -> None:
    """One JSON Lines record on stdout, strict JSON (non-finite numbers as null)."""
    emit(dumps(obj))


# ------------------------------------------------------------------------------------ reST to text
_ROLE = re.compile(r":[\w:.-]+:`([^`<]*?)\s*(?:<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``")
_LINK = re.compile(r"`([^`<]+?)\s*(?:<[^`>]*>)?`_{1,2}")
_INTERPRETED = re.compile(r"`([^`]+)`")
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}(?=\S)([^*]+?)(?<=\S)\*{1,2}(?![\w*])")
#: abbreviations after which a full stop does not end a sentence
_ABBREVIATIONS = (
    *("e.g.", "i.e.", "cf.", "vs.", "et al.", "etc."),
    *("Sec.", "Eq.", "Fig.", "Thm.", "Alg.", "App.", "Tab."),
)


def plain_text(text: str) -> str:
    """reST markup removed (``literal``, :role:`x`, `link <url>`_, *emphasis*), whitespace collapsed."""
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    return " ".join(text.split())


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, as plain text, never cut mid-sentence."""
    paragraph = plain_text(doc.strip().split("\n\n")[0]) if doc.strip() else ""
    for match in re.finditer(r"[.!?](?=\s+[A-Z(])", paragraph):
        head = paragraph[: match.end()]
        if not head.endswith(_ABBREVIATIONS):
            return head
    return paragraph


def wrapped(prefix: str, text: str) -> list[str]:
    """``prefix`` + ``text``; on a terminal wrapped to its width with continuation lines indented under
    the text, elsewhere one line (so that ``grep`` sees whole entries)."""
    if not sys.stdout.isatty():
        return [prefix + text]
    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    return textwrap.wrap(text, width=width, initial_indent=prefix, subsequent_indent=" " * len(prefix)) or [
        prefix.rstrip()
    ]


# ------------------------------------------------------------------------------------------- runs
def run_record(r: Any, reused: bool) -> dict[str, Any]:
    """One finished run as ``--format json`` prints it (a JSON Lines record)."""
    return {
        "task": r.task,
        "algorithm": r.algorithm,
        "seed": r.seed,
        "config": r.config,
        "params": r.params,
        "budget": r.budget,
        "metrics": r.metrics,
        "status": r.status,
        "error": r.error,
        "wall_s": round(r.wall_s, 6),
        "reused": reused,
        "run_id": r.run_id,
    }


def result_line(r: Any, reused: bool, primary: str) -> str:
    """One finished run as the table format prints it: status, algorithm, seed, primary metric, time."""
    if r.status != "ok":
        return f"FAILED  {r.algorithm:<20} seed={r.seed:<3} {r.error}"
    tag = "stored" if reused else "ok"
    value = r.metrics.get(primary, float("nan"))
    return f"{tag:<7} {r.algorithm:<20} seed={r.seed:<3} {primary}={value:.6g}  ({r.wall_s:.2f} s)"


@contextlib.contextmanager
def progress(total: int, description: str, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on stderr (counts, failures, ETA); a no-op when disabled.

    Yields the handle :func:`advance` takes, or None when there is no bar.
    """
    if not enabled or total == 0:
        yield None
        return
    # rich only here: a command without a bar (and bench list) does not pay for importing it
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[red]{task.fields[failed]} failed"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        yield (bar, bar.add_task(description, total=total, failed=0))


def advance(bar: Any, failed: bool) -> None:
    """One more run done on the bar from :func:`progress` (counted as failed if ``failed``)."""
    if bar is None:
        return
    handle, task_id = bar
    fields = handle.tasks[task_id].fields
    handle.update(task_id, advance=1, failed=fields["failed"] + int(failed))
