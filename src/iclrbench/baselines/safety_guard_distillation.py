"""safety-guard-distillation's baselines (HarmAug, Lee et al., ICLR 2025, section 4): the student without
augmentation, a larger student without augmentation, EDA (Wei & Zou, 2019), HarmAug's generation without
its affirmative prefix, and the teacher itself (the reference the students are distilled from)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from iclrbench.algorithms.safety_guard_distillation import (
    WORD,
    Augmentation,
    GuardMethod,
    HarmAug,
    HarmAugParams,
)
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import NoParams, param
from iclrbench.core.seeding import rng_for
from iclrbench.envs.safety_guard_distillation import TASK_ID, Split, Teacher


@register_algorithm(task=TASK_ID, name="no-augmentation", role="baseline")
class NoAugmentation(GuardMethod):
    """The student distilled from the teacher on the labelled set alone."""


@dataclasses.dataclass(frozen=True)
class LargerParams:
    hidden: int = param(1024, "hidden units of the larger student", low=1, high=65536)


@register_algorithm(task=TASK_ID, name="larger-student", role="baseline")
class LargerStudent(GuardMethod):
    """A student 16x wider (1,024 hidden units), on the labelled set alone."""

    Params = LargerParams


@dataclasses.dataclass(frozen=True)
class NoPrefixParams(HarmAugParams):
    prefix: str = param("", "nothing prefilled: the generator answers the request as it likes")


@register_algorithm(task=TASK_ID, name="harmaug-no-prefix", role="baseline")
class HarmAugNoPrefix(HarmAug):
    """HarmAug's generation without the affirmative prefix (the paper's ablation)."""

    Params = NoPrefixParams


# ---------------------------------------------------------------------------------------------- EDA
@functools.lru_cache(maxsize=1)
def _vocabulary() -> tuple[list[str], dict[str, int], np.ndarray]:
    """MiniLM's whole-word pieces of 3+ letters, their index, and their unit-norm input embeddings."""
    from iclrbench.models.vision_language import minilm_tokenizer, minilm_word_embeddings

    vocab = minilm_tokenizer().get_vocab()
    words = sorted(w for w in vocab if w.isalpha() and len(w) >= 3)
    table = minilm_word_embeddings()[[vocab[w] for w in words]]
    table = table / np.linalg.norm(table, axis=1, keepdims=True)
    return words, {w: i for i, w in enumerate(words)}, table


@functools.lru_cache(maxsize=4096)
def synonym(word: str) -> str | None:
    """The nearest other whole word to ``word`` by MiniLM's input embeddings (EDA's WordNet synonym: no
    WordNet ships offline), or None for a word outside the vocabulary."""
    words, index, table = _vocabulary()
    if word not in index:
        return None
    similarity = table @ table[index[word]]
    similarity[index[word]] = -np.inf
    return words[int(np.argmax(similarity))]


def eda(text: str, operation: str, alpha: float, rng: np.random.Generator) -> str:
    """One EDA operation on ``text`` touching ``max(1, round(alpha * words))`` words: ``sr`` synonym
    replacement, ``ri`` random insertion (a synonym of a random word at a random place), ``rs`` random
    swap, ``rd`` random deletion (each word with probability alpha, never all)."""
    words = WORD.findall(text.lower()) or [text]
    n = max(1, round(alpha * len(words)))
    words = list(words)
    if operation == "sr":
        candidates = [i for i, w in enumerate(words) if synonym(w)]
        for i in rng.permutation(candidates)[:n]:
            words[i] = synonym(words[i]) or words[i]
    elif operation == "ri":
        for _ in range(n):
            found = [s for s in (synonym(w) for w in words) if s]
            if found:
                words.insert(int(rng.integers(len(words) + 1)), found[int(rng.integers(len(found)))])
    elif operation == "rs":
        for _ in range(n):
            if len(words) > 1:
                i, j = rng.choice(len(words), 2, replace=False)
                words[i], words[j] = words[j], words[i]
    elif operation == "rd":
        kept = [w for w in words if rng.random() > alpha]
        words = kept or [words[int(rng.integers(len(words)))]]
    else:
        raise ValueError(f"EDA operation: sr, ri, rs or rd, not {operation!r}")
    return " ".join(words)


@dataclasses.dataclass(frozen=True)
class EDAParams:
    hidden: int = param(64, "hidden units of the student", low=1, high=65536)
    alpha: float = param(0.1, "share of words each operation changes (EDA's default 0.1)", low=0.0, high=1.0)


@register_algorithm(task=TASK_ID, name="eda", role="baseline")
class EDA(GuardMethod):
    """EDA: as many augmented prompts as HarmAug adds, each one operation (synonym replacement, random
    insertion, swap or deletion, in turn) on a labelled prompt drawn at random; answered by the same second
    pass as HarmAug's, the teacher labels them."""

    Params = EDAParams

    def augment(self, split: Split, teacher: Teacher, seed: int) -> Augmentation:
        rng = rng_for(seed, TASK_ID, "eda")
        texts = split.student_train.prompts  # prompts alone: the second pass answers the rewrites
        out = []
        for i in range(self.config.synthetic):
            source = texts[int(rng.integers(len(texts)))]
            out.append(eda(source, ("sr", "ri", "rs", "rd")[i % 4], self.params.alpha, rng))
        return Augmentation(out)


# ---------------------------------------------------------------------------------------------- teacher
@register_algorithm(task=TASK_ID, name="teacher", role="oracle")
class TeacherGuard(GuardMethod):
    """The teacher itself (MiniLM's embedding and its head, trained on every category): what the students
    are distilled from, and the compute they are measured against."""

    Params = NoParams

    def fit(self, split: Split, teacher: Teacher, seed: int) -> Augmentation:
        self.teacher, self.curve = teacher, []
        return Augmentation()

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        return self.teacher.unsafe(texts)

    def fresh_scores(self, texts: Sequence[str]) -> np.ndarray:
        return self.teacher.unsafe(texts, memoised=False)

    def flops(self, text: str) -> float:
        return Teacher.flops(text)


__all__ = ["EDA", "HarmAugNoPrefix", "LargerStudent", "NoAugmentation", "TeacherGuard", "eda", "synonym"]
