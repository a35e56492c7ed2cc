"""mobile-llm-profiling's configuration and probes: which model, how it is profiled, and the seeded question,
text and prompt sets quality is measured on (PalmBench, Li et al., ICLR 2025, section 4).

Two subjects: ``tiny`` (the llama trained here on the fact world, with a true float32 reference; its probes
are the fact world's questions, asked in the Q/A form it was trained on) and ``smollm2``
(SmolLM2-135M-Instruct, whose highest precision is Q4_1 de-quantised; its questions are real capitals asked
through the model's chat template). A path to a GGUF file of one's own is probed as SmolLM2 is (through its
chat template where the file has one); its weights as stored are its "full model". A run's seed draws which
questions, held-out sentences and toxicity prompts it uses from the pools, so seeds differ in probes as well
as in timing noise.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.seeding import seed_for
from iclrbench.envs.mobile_llm_profiling.fact_world import FactWorld, Question
from iclrbench.models.language import check_gguf, has_chat_template  # light: no engine imported

TASK_ID = "mobile-llm-profiling"
MODELS = ("tiny", "smollm2")

#: real country -> capital pairs (public knowledge) for SmolLM2's questions
CAPITALS = (
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"),
    ("China", "Beijing"), ("Russia", "Moscow"), ("Egypt", "Cairo"), ("Greece", "Athens"),
    ("Portugal", "Lisbon"), ("Austria", "Vienna"), ("Poland", "Warsaw"), ("Norway", "Oslo"),
    ("Sweden", "Stockholm"), ("Finland", "Helsinki"), ("Ireland", "Dublin"), ("Kenya", "Nairobi"),
    ("Peru", "Lima"), ("Cuba", "Havana"), ("Thailand", "Bangkok"), ("Canada", "Ottawa"),
    ("Australia", "Canberra"), ("Argentina", "Buenos Aires"), ("Mexico", "Mexico City"),
    ("India", "New Delhi"), ("Belgium", "Brussels"), ("Hungary", "Budapest"), ("Denmark", "Copenhagen"),
    ("Turkey", "Ankara"), ("Iran", "Tehran"), ("Chile", "Santiago"), ("Colombia", "Bogota"),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class MobileLLMConfig:
    model: str = param(
        "tiny", "subject: tiny (trained here, float32 reference), smollm2 (Q4_1) or a path to a GGUF file"
    )
    entities: int = param(32, "tiny: made-up countries in the fact world", low=4, high=200)
    tiny_layers: int = param(4, "tiny: transformer blocks", low=1, high=12)
    tiny_steps: int = param(
        1500,
        "tiny: steps of a training cycle (AdamW, batch 32, one-cycle schedule); cycles follow until it has "
        "converged, at most 4",
        low=10,
    )
    questions: int = param(48, "questions per run (drawn by the seed from the pool)", low=4)
    held_out: int = param(24, "held-out sentences per run for perplexity", low=2)
    toxicity_prompts: int = param(12, "toxicity-proxy prompts per run", low=2)
    answer_tokens: int = param(8, "greedy tokens per answer", low=1, high=64)
    threads: int = param(1, "threads of every engine (set explicitly; never shared)", low=1, high=64)
    prompt_tokens: int = param(64, "profiled prompt length (tokens)", low=4)
    decode_tokens: int = param(32, "profiled decode length (tokens)", low=1)
    warmup: int = param(1, "profiling warm-up runs", low=0)
    repeats: int = param(3, "profiling repeats (min / median reported)", low=1)
    n_ctx: int = param(128, "context length of the profiled and scored models", low=16)

    def __post_init__(self) -> None:
        if self.model not in MODELS and not self.model.endswith(".gguf"):
            raise ValueError(f"model: must be one of {', '.join(MODELS)} or a .gguf file, not {self.model!r}")
        if self.model not in MODELS:
            try:
                check_gguf(self.model)
            except Exception as exc:  # a UserError; a config error is a ValueError (one line, exit 2)
                raise ValueError(f"model: {exc}") from None
        if self.prompt_tokens + self.decode_tokens + 1 > self.n_ctx:
            raise ValueError(
                f"prompt_tokens + decode_tokens ({self.prompt_tokens} + {self.decode_tokens}) exceed the "
                f"context n_ctx = {self.n_ctx}"
            )


@dataclasses.dataclass(frozen=True)
class Probes:
    """What one run asks: questions with right answers, held-out text, toxicity prompts; ``chat`` says
    whether prompts go through the model's chat template."""

    questions: tuple[Question, ...]
    held_out: tuple[str, ...]
    toxicity: tuple[str, ...]
    chat: bool


def _pick(items: list, count: int, seed: int, what: str) -> tuple:
    rng = np.random.default_rng(seed_for(seed, TASK_ID, what))
    order = rng.permutation(len(items))[: min(count, len(items))]
    return tuple(items[i] for i in sorted(order))


def probes(config: MobileLLMConfig, seed: int) -> Probes:
    world = FactWorld(config.entities, 0)  # the world the tiny model learned; seed picks the probes
    if config.model == "tiny":
        pool = world.questions()
        chat = False
    elif config.model != "smollm2" and not has_chat_template(Path(config.model)):
        pool = [
            Question(f"The capital of {country} is", city, country, "capital") for country, city in CAPITALS
        ]
        chat = False
    else:
        pool = [
            Question(
                f"What is the capital of {country}? Answer with the city's name only.",
                city,
                country,
                "capital",
            )
            for country, city in CAPITALS
        ]
        chat = True
    return Probes(
        questions=_pick(pool, config.questions, seed, "questions"),
        held_out=_pick(world.held_out(4 * config.held_out), config.held_out, seed, "held-out"),
        toxicity=_pick(
            world.toxicity_prompts(4 * config.toxicity_prompts), config.toxicity_prompts, seed, "tox"
        ),
        chat=chat,
    )
