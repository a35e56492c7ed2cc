"""The leaderboard page as a file: the stored runs and verdicts aggregated, rendered to one
self-contained HTML page and written where asked, never over the results store or any SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iclrbench.core import catalog
from iclrbench.core.outputs import refuse_overwrite, write_output
from iclrbench.leaderboard.aggregate import aggregate
from iclrbench.leaderboard.html import render_html


def _papers() -> dict[str, dict[str, str]]:
    """Title, authors and arXiv id of every registered task's paper, by task id (the page's headings)."""
    out = {}
    for tid in catalog.task_ids():
        p = catalog.get_task(tid).paper
        out[tid] = {"title": p.title, "authors": p.authors, "arxiv": p.arxiv}
    return out


def write_leaderboard_html(store: Any, path: str | Path, task: str | None = None) -> Path:
    """Write the self-contained page of ``store``'s runs (only ``task``'s if given) to ``path`` and
    return it; an unwritable path or one that is the store or any SQLite file is a :class:`UserError`
    naming ``--html``."""
    refuse_overwrite(path, store.path, "--html")  # before the page is computed
    tables = aggregate(store.runs(task))
    page = render_html(tables, store.claims(task), _papers())
    return write_output(path, lambda target: target.write_text(page, encoding="utf-8"), "--html", store.path)
