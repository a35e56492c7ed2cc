"""icl-circuit's text prompts for a real language model: in-context classification episodes written from
seeded templates, laid out as the paper's prompts (Cho et al., ICLR 2025, section 3)::

    Review: <x_1>\\nSentiment: <y_1>\\n ... Review: <x_q>\\nSentiment:

``x`` is a generated sentence, the forerunner ``s`` the ``:`` that ends the label prompt, ``y`` the single
token of the label word. Two sets: ``sentiment`` (positive / negative film reviews) and ``topic`` (sports,
business, science, food). Each segment is tokenised on its own and the ids are joined, so every role's
position is known exactly; prompts are right-padded (padding follows s_q, which a causal mask hides).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from iclrbench.envs.icl_circuit import Episodes, IclCircuitConfig, Roles

Tokenize = Callable[[str], list[int]]

SENTIMENT_WORDS = {
    "positive": (
        "wonderful", "delightful", "brilliant", "superb", "charming", "excellent", "moving", "fantastic",
        "lovely", "great", "beautiful", "gripping",
    ),
    "negative": (
        "terrible", "awful", "boring", "dreadful", "dull", "horrible", "disappointing", "bad", "painful",
        "weak", "clumsy", "tedious",
    ),
}  # fmt: skip
SENTIMENT_NOUNS = ("film", "movie", "story", "acting", "soundtrack", "ending", "plot", "script", "cast")
SENTIMENT_TEMPLATES = (
    "The {noun} was {word}.",
    "Honestly, the {noun} felt {word}.",
    "I found the {noun} {word} from start to finish.",
    "A {word} {noun}, and the {noun2} was {word2} too.",
    "Everyone said the {noun} was {word}, and they were right.",
)
TOPIC_WORDS = {
    "sports": ("match", "team", "goal", "coach", "season", "player", "league", "stadium", "referee"),
    "business": ("market", "company", "profit", "shares", "investors", "bank", "merger", "revenue", "CEO"),
    "science": (
        "experiment", "laboratory", "physicists", "telescope", "molecule", "researchers", "genome",
        "theory", "particle",
    ),
    "food": ("recipe", "chef", "soup", "bakery", "flavour", "dessert", "restaurant", "spices", "menu"),
}  # fmt: skip
TOPIC_TEMPLATES = (
    "The {word} and the {word2} made headlines today.",
    "Everyone talked about the {word} after the {word2}.",
    "A new report on the {word} surprised the {word2}.",
    "Nobody expected the {word} to change the {word2} so quickly.",
)
PROMPTS = {  # dataset -> (input prefix, label prompt, labels, words per label, templates)
    "sentiment": ("Review:", "\nSentiment:", tuple(SENTIMENT_WORDS), SENTIMENT_WORDS, SENTIMENT_TEMPLATES),
    "topic": ("Text:", "\nTopic:", tuple(TOPIC_WORDS), TOPIC_WORDS, TOPIC_TEMPLATES),
}


def sentence(dataset: str, label: str, rng: np.random.Generator) -> str:
    """One input of class ``label``, drawn from the dataset's templates and word lists."""
    _, _, _, words, templates = PROMPTS[dataset]
    template = templates[rng.integers(len(templates))]
    pool = words[label]
    w1, w2 = rng.choice(len(pool), size=2, replace=False)
    n1, n2 = rng.choice(len(SENTIMENT_NOUNS), size=2, replace=False)
    return template.format(word=pool[w1], word2=pool[w2], noun=SENTIMENT_NOUNS[n1], noun2=SENTIMENT_NOUNS[n2])


def label_tokens(dataset: str, tokenize: Tokenize) -> np.ndarray:
    """The single token of each label word (with its leading space); an error if a word splits."""
    out = []
    for label in PROMPTS[dataset][2]:
        ids = tokenize(" " + label)
        if len(ids) != 1:
            raise ValueError(f"the label word {label!r} is {len(ids)} tokens for this tokenizer, not 1")
        out.append(ids[0])
    return np.asarray(out, dtype=np.int64)


def text_episodes(
    config: IclCircuitConfig, n: int, rng: np.random.Generator, tokenize: Tokenize, pad: int
) -> Episodes:
    """``n`` text episodes of ``config.dataset`` with ``config.k`` demonstrations each (classes drawn
    uniformly; the query's class is among the demonstrations', as in the tiny world)."""
    prefix, prompt, labels, _, _ = PROMPTS[config.dataset]
    words = label_tokens(config.dataset, tokenize)
    prefix_ids, prompt_ids, newline = tokenize(prefix), tokenize(prompt), tokenize("\n")
    k, c = config.k, len(labels)
    demo = rng.integers(c, size=(n, k))
    query = demo[np.arange(n), rng.integers(k, size=n)]
    rows: list[list[int]] = []
    x_start, x_end = np.zeros((n, k + 1), np.int64), np.zeros((n, k + 1), np.int64)
    s, y, sq = np.zeros((n, k), np.int64), np.zeros((n, k), np.int64), np.zeros(n, np.int64)
    for i in range(n):
        ids: list[int] = []
        for j, cls in enumerate([*demo[i], query[i]]):
            ids += prefix_ids
            x_start[i, j] = len(ids)
            ids += tokenize(" " + sentence(config.dataset, labels[cls], rng))
            x_end[i, j] = len(ids)
            ids += prompt_ids
            if j == k:
                sq[i] = len(ids) - 1
                break
            s[i, j] = len(ids) - 1
            y[i, j] = len(ids)
            ids += [int(words[cls]), *newline]
        rows.append(ids)
    length = np.asarray([len(r) for r in rows], dtype=np.int64)
    padded = np.full((n, int(length.max())), pad, dtype=np.int64)
    for i, r in enumerate(rows):
        padded[i, : len(r)] = r
    classes = np.concatenate([demo, query[:, None]], axis=1)
    return Episodes(
        padded, Roles(x_start, x_end, s, y, sq, length), demo, query, np.tile(words, (n, 1)), classes
    )
