"""icl-circuit's real data: the text-classification sets the paper's notebooks feed through StaICC (Cho et
al., ICLR 2025, Sec. 3 and Appendix; the public code's ``Experiments/Exp5_Ablation.ipynb`` builds its prompts
with ``StaICC.Normal(k)``), read from the files the PyPI package ``staicc`` (0.1.1) ships.

Each ``StaICC/cached_dataset/<name>.dataset`` is a pickle of a plain list of ``([text], label)`` tuples
(strings and integers). The files are read where the package is installed, found with
:func:`importlib.util.find_spec` (which locates a package without running it); none of the package's
modules is imported, and the unpickler refuses every global, so a file that names a class or a function
(anything that could run code) is refused instead of loaded.

The prompt layout and label words are StaICC's (``util/hgf_dataset_loader.py``: each set's input prefix,
label prefix and, where it has one, its reduced label space; ``util/dataset_interface.py``
``prompt_writter.write_prompt_from_dataline``)::

    sentence: <x_1> sentiment: <y_1>\\n ... sentence: <x_q> sentiment:

the input text followed by one space, the label prefix, the label word and a newline per demonstration;
the query ends at the label prefix without its trailing space, as the paper's
``util/load_model_and_data.py`` cuts it, so its last token is the forerunner ``s_q``.

Splits: StaICC divides each set once with a fixed seed into calibration, demonstration and test parts
(1,024 / 4,096 / 512; financial phrasebank 1,024 / 512 / 512) and samples each test item's ``k``
demonstrations uniformly from the demonstration part. Here one fixed permutation (its own seed scope, the
same for every run) gives a demonstration pool and a disjoint test pool of StaICC's sizes; each run's seed
draws its test items from the test pool and their demonstrations from the demonstration pool (StaICC's own
permutation is not reproduced; the calibration part is not used).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from iclrbench.models.staicc import read_set


@dataclasses.dataclass(frozen=True)
class TextSet:
    """One StaICC set: its file, StaICC's prompt parts and label words, and its pool sizes."""

    file: str
    input_prefix: str
    label_prefix: str  # with its trailing space, as StaICC writes it before a demonstration's label
    labels: tuple[str, ...]  # label words by the file's label index (StaICC's reduced space where it has one)
    demonstrations: int = 4096
    tests: int = 512


#: StaICC.Normal's first seven sets, in its order (the ones the paper reports)
TEXT_SETS = {
    "sst2": TextSet("sst2", "sentence: ", "sentiment: ", ("negative", "positive")),
    "rotten_tomatoes": TextSet("rotten_tomatoes", "review: ", "sentiment: ", ("negative", "positive")),
    "financial_phrasebank": TextSet(
        "financial_phrasebank", "sentence: ", "sentiment: ", ("negative", "neutral", "positive"), 512
    ),
    "sst5": TextSet("sst5", "sentence: ", "sentiment: ", ("poor", "bad", "neutral", "good", "great")),
    "trec": TextSet(
        "trec", "question: ", "target: ", ("short", "entity", "description", "person", "location", "number")
    ),
    "agnews": TextSet("agnews", "news: ", "topic: ", ("world", "sports", "business", "science")),
    "subjective": TextSet("subjective", "review: ", "subjectiveness: ", ("false", "true")),
}


def load_set(name: str) -> tuple[tuple[str, ...], np.ndarray]:
    """The texts and label indices of a StaICC set (each item a single text), its labels checked to lie in
    the set's label space."""
    spec = TEXT_SETS[name]
    texts, y = read_set(spec.file)
    if y.max() >= len(spec.labels):
        raise ValueError(f"{spec.file}.dataset: labels outside 0-{len(spec.labels) - 1}")
    return texts, y


def pools(name: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The demonstration pool and the disjoint test pool (item indices) of a set, by a fixed permutation
    drawn from ``rng`` (the caller gives one seed scope for every run)."""
    spec = TEXT_SETS[name]
    texts, _ = load_set(name)
    if len(texts) < spec.demonstrations + spec.tests:
        raise ValueError(
            f"{name}: {len(texts)} items, fewer than the pools' {spec.demonstrations + spec.tests}"
        )
    order = rng.permutation(len(texts))
    return order[: spec.demonstrations], order[spec.demonstrations : spec.demonstrations + spec.tests]


def demonstration_line(spec: TextSet, text: str, label: int) -> str:
    """One demonstration as StaICC writes it: input prefix, text, a space, label prefix, label, newline."""
    return f"{spec.input_prefix}{text} {spec.label_prefix}{spec.labels[label]}\n"


def query_line(spec: TextSet, text: str) -> str:
    """The query: input prefix, text, a space, and the label prefix without its trailing space."""
    return f"{spec.input_prefix}{text} {spec.label_prefix.rstrip(' ')}"
