"""icl-circuit's text episodes for a real language model: real items of a StaICC set
(:mod:`iclrbench.envs.icl_circuit.data`) laid out as the paper's prompts (Cho et al., ICLR 2025, Sec. 3;
the public code builds them with StaICC and cuts the query at its label prefix,
``util/load_model_and_data.py``)::

    sentence: <x_1> sentiment: <y_1>\\n ... sentence: <x_q> sentiment:

Each prompt is tokenised whole (as the paper's code tokenises it) and the roles are found from the
tokeniser's character offsets: ``s_i`` is the token of the label prefix's ``:``, ``y_i`` the token after it
(the label word with its leading space, checked to be the label's single token), ``s_q`` the prompt's last
token (the query's ``:``), the input ``x`` the tokens of the text. Prompts are right-padded (padding follows
``s_q``, which a causal mask hides).

Demonstrations are drawn as StaICC draws them, uniformly from the demonstration pool: their labels are not
balanced, and the query's class need not be among them. ``k = 0`` gives the zero-shot prompt of the same
query (the paper's Table 1, line 6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from iclrbench.envs.icl_circuit import Episodes, IclCircuitConfig, Roles, episode_rng
from iclrbench.envs.icl_circuit.data import TEXT_SETS, demonstration_line, load_set, pools, query_line

#: a tokeniser: text -> (token ids, (start, end) character span of each token)
Tokenize = Callable[[str], tuple[Sequence[int], Sequence[tuple[int, int]]]]
#: the seed of the fixed split into demonstration and test pools: the same for every run and every seed
POOL_SEED = 0


def draw_items(config: IclCircuitConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` distinct test items of the set's test pool and, for each, ``config.k`` distinct demonstrations
    from its demonstration pool (item indices into the set; shapes (n,) and (n, k))."""
    demo_pool, test_pool = pools(config.dataset, episode_rng(POOL_SEED, f"pools-{config.dataset}"))
    if n > len(test_pool):
        raise ValueError(f"episodes ({n}): the {config.dataset} test pool has {len(test_pool)} items")
    tests = rng.choice(test_pool, size=n, replace=False)
    demos = (
        np.stack([rng.choice(demo_pool, size=config.k, replace=False) for _ in range(n)])
        if config.k
        else None
    )
    return tests, demos if demos is not None else np.zeros((n, 0), dtype=np.int64)


def label_tokens(dataset: str, tokenize: Tokenize) -> np.ndarray:
    """The single token of each label word with its leading space (as it follows the label prefix); an
    error if a word splits."""
    out = []
    for label in TEXT_SETS[dataset].labels:
        ids, _ = tokenize(" " + label)
        if len(ids) != 1:
            raise ValueError(f"the label word {label!r} is {len(ids)} tokens for this tokenizer, not 1")
        out.append(int(ids[0]))
    return np.asarray(out, dtype=np.int64)


def _locator(offsets: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """char -> the index of the token whose span holds it."""
    starts = np.asarray([a for a, _ in offsets])
    ends = np.asarray([b for _, b in offsets])
    return lambda char: int(np.flatnonzero((starts <= char) & (char < ends))[0])


def text_episodes(
    dataset: str, tests: np.ndarray, demos: np.ndarray, tokenize: Tokenize, pad: int
) -> Episodes:
    """The episodes of test items ``tests`` with demonstrations ``demos`` (n, k) of a StaICC set, tokenised
    whole, with every role's position read from the character offsets."""
    spec = TEXT_SETS[dataset]
    texts, y = load_set(dataset)
    words = label_tokens(dataset, tokenize)
    n, k = demos.shape
    rows: list[Sequence[int]] = []
    x_start, x_end = np.zeros((n, k + 1), np.int64), np.zeros((n, k + 1), np.int64)
    s, lab, sq = np.zeros((n, k), np.int64), np.zeros((n, k), np.int64), np.zeros(n, np.int64)
    for i in range(n):
        prompt, spans, colons = "", [], []
        for j, item in enumerate([*demos[i], tests[i]]):
            text_at = len(prompt) + len(spec.input_prefix)
            spans.append((text_at, text_at + len(texts[item])))
            if j == k:  # the query ends at its label prefix's ':'
                prompt += query_line(spec, texts[item])
                colons.append(len(prompt) - 1)
            else:  # ... ': <label>\n': the ':' is the label's length and 3 characters back
                prompt += demonstration_line(spec, texts[item], y[item])
                colons.append(len(prompt) - len(spec.labels[y[item]]) - 3)
        ids, offsets = tokenize(prompt)
        ends = np.asarray([b for _, b in offsets])
        token_at = _locator(offsets)

        for j, (a, b) in enumerate(spans):
            x_start[i, j] = token_at(a) if b > a else token_at(a - 1) + 1
            x_end[i, j] = token_at(b - 1) + 1 if b > a else x_start[i, j]
        for j, c in enumerate(colons):
            f = token_at(c)
            if ends[f] != c + 1:
                raise ValueError(f"the label prefix's ':' is not a token's end in prompt {i}")
            if j == k:
                if f != len(ids) - 1:
                    raise ValueError(f"the query's ':' is not the last token of prompt {i}")
                sq[i] = f
            else:
                s[i, j], lab[i, j] = f, f + 1
                if ids[f + 1] != words[y[demos[i, j]]]:
                    raise ValueError(f"demonstration {j} of prompt {i}: its label is not one token after ':'")
        rows.append(ids)
    length = np.asarray([len(r) for r in rows], dtype=np.int64)
    padded = np.full((n, int(length.max())), pad, dtype=np.int64)
    for i, r in enumerate(rows):
        padded[i, : len(r)] = r
    classes = np.concatenate([y[demos], y[tests][:, None]], axis=1)
    return Episodes(
        padded, Roles(x_start, x_end, s, lab, sq, length), classes[:, :k], classes[:, k],
        np.tile(words, (n, 1)), classes,
    )  # fmt: skip
