"""mobile-llm-profiling's configuration and probes: which model, how it is profiled, and the seeded question,
text and prompt sets quality is measured on (PalmBench, Li et al., ICLR 2025, section 4).

Two subjects: ``tiny`` (the llama trained here on the fact world, with a true float32 reference; its probes
are the fact world's questions, asked in the Q/A form it was trained on, and its grammar's held-out sentences)
and ``smollm2`` (SmolLM2-135M-Instruct, whose highest precision is Q4_1 de-quantised; its questions are real
capitals, 48 a run from a pool of 131, asked through the model's chat template with the reply opened as "The
capital of X is", so the answer is a bare name scored against the gold one by exact match and F1; its
perplexity is on natural English news (:mod:`.natural_text`). A path to a GGUF file of one's own is probed as
SmolLM2 is (through its chat template where the file has one); its weights as stored are its "full model". A
run's seed draws which questions, held-out texts and toxicity prompts it uses from the pools, so seeds differ
in probes as well as in timing noise.
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

#: real country -> capital pairs (public knowledge) for SmolLM2's questions: 128, so the 48 a run asks
#: differ between seeds; names whose spelling varies (Kyiv / Kiev) or that carry accents (Brasilia,
#: Yaounde) are left out, as a gold answer scored by exact match must have one spelling
CAPITALS = (
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"),
    ("China", "Beijing"), ("Russia", "Moscow"), ("Egypt", "Cairo"), ("Greece", "Athens"),
    ("Portugal", "Lisbon"), ("Austria", "Vienna"), ("Poland", "Warsaw"), ("Norway", "Oslo"),
    ("Sweden", "Stockholm"), ("Finland", "Helsinki"), ("Ireland", "Dublin"), ("Kenya", "Nairobi"),
    ("Peru", "Lima"), ("Cuba", "Havana"), ("Thailand", "Bangkok"), ("Canada", "Ottawa"),
    ("Australia", "Canberra"), ("Argentina", "Buenos Aires"), ("Mexico", "Mexico City"),
    ("India", "New Delhi"), ("Belgium", "Brussels"), ("Hungary", "Budapest"), ("Denmark", "Copenhagen"),
    ("Turkey", "Ankara"), ("Iran", "Tehran"), ("Chile", "Santiago"), ("Colombia", "Bogota"),
    ("the Netherlands", "Amsterdam"), ("Switzerland", "Bern"), ("the Czech Republic", "Prague"),
    ("Slovakia", "Bratislava"), ("Romania", "Bucharest"), ("Bulgaria", "Sofia"), ("Serbia", "Belgrade"),
    ("Croatia", "Zagreb"), ("Slovenia", "Ljubljana"), ("Belarus", "Minsk"), ("Lithuania", "Vilnius"),
    ("Latvia", "Riga"), ("Estonia", "Tallinn"), ("Iceland", "Reykjavik"), ("Albania", "Tirana"),
    ("North Macedonia", "Skopje"), ("Bosnia and Herzegovina", "Sarajevo"), ("Montenegro", "Podgorica"),
    ("Moldova", "Chisinau"), ("Georgia", "Tbilisi"), ("Armenia", "Yerevan"), ("Azerbaijan", "Baku"),
    ("Cyprus", "Nicosia"), ("Malta", "Valletta"), ("the United Kingdom", "London"),
    ("South Korea", "Seoul"), ("North Korea", "Pyongyang"), ("Vietnam", "Hanoi"),
    ("the Philippines", "Manila"), ("Indonesia", "Jakarta"), ("Malaysia", "Kuala Lumpur"),
    ("Pakistan", "Islamabad"), ("Bangladesh", "Dhaka"), ("Nepal", "Kathmandu"), ("Afghanistan", "Kabul"),
    ("Iraq", "Baghdad"), ("Syria", "Damascus"), ("Lebanon", "Beirut"), ("Jordan", "Amman"),
    ("Saudi Arabia", "Riyadh"), ("Qatar", "Doha"), ("Oman", "Muscat"), ("Kuwait", "Kuwait City"),
    ("the United Arab Emirates", "Abu Dhabi"), ("Uzbekistan", "Tashkent"), ("Cambodia", "Phnom Penh"),
    ("Laos", "Vientiane"), ("Bhutan", "Thimphu"), ("Kyrgyzstan", "Bishkek"), ("Tajikistan", "Dushanbe"),
    ("Turkmenistan", "Ashgabat"), ("Nigeria", "Abuja"), ("Ghana", "Accra"), ("Ethiopia", "Addis Ababa"),
    ("Morocco", "Rabat"), ("Algeria", "Algiers"), ("Tunisia", "Tunis"), ("Libya", "Tripoli"),
    ("Sudan", "Khartoum"), ("Uganda", "Kampala"), ("Rwanda", "Kigali"), ("Senegal", "Dakar"),
    ("Zimbabwe", "Harare"), ("Zambia", "Lusaka"), ("Angola", "Luanda"), ("Mozambique", "Maputo"),
    ("Madagascar", "Antananarivo"), ("Namibia", "Windhoek"), ("Botswana", "Gaborone"), ("Mali", "Bamako"),
    ("Niger", "Niamey"), ("Somalia", "Mogadishu"), ("the Democratic Republic of the Congo", "Kinshasa"),
    ("Malawi", "Lilongwe"), ("Liberia", "Monrovia"), ("Sierra Leone", "Freetown"), ("Guinea", "Conakry"),
    ("Burkina Faso", "Ouagadougou"), ("Eritrea", "Asmara"), ("Gabon", "Libreville"),
    ("Mauritania", "Nouakchott"), ("Venezuela", "Caracas"), ("Ecuador", "Quito"), ("Uruguay", "Montevideo"),
    ("Jamaica", "Kingston"), ("Haiti", "Port-au-Prince"), ("the Dominican Republic", "Santo Domingo"),
    ("Guatemala", "Guatemala City"), ("Honduras", "Tegucigalpa"), ("Nicaragua", "Managua"),
    ("Panama", "Panama City"), ("El Salvador", "San Salvador"), ("the Bahamas", "Nassau"),
    ("Trinidad and Tobago", "Port of Spain"), ("New Zealand", "Wellington"), ("Fiji", "Suva"),
    ("Papua New Guinea", "Port Moresby"), ("Scotland", "Edinburgh"), ("Wales", "Cardiff"),
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


def held_out_pool(config: MobileLLMConfig) -> list[str]:
    """Perplexity's text pool: the fact world's grammar sentences for the tiny model (the language it
    learnt); natural English news (:mod:`~iclrbench.envs.mobile_llm_profiling.natural_text`) for SmolLM2
    or a file of one's own."""
    if config.model == "tiny":
        return FactWorld(config.entities, 0).held_out(4 * config.held_out)
    from iclrbench.envs.mobile_llm_profiling.natural_text import news_texts

    return list(news_texts())


def probes(config: MobileLLMConfig, seed: int) -> Probes:
    """What a run with ``seed`` asks (PalmBench, section 4): questions with gold answers, held-out text and
    toxicity prompts, each drawn by the seed from its pool."""
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
                prefix=f"The capital of {country} is",
            )
            for country, city in CAPITALS
        ]
        chat = True
    return Probes(
        questions=_pick(pool, config.questions, seed, "questions"),
        held_out=_pick(held_out_pool(config), config.held_out, seed, "held-out"),
        toxicity=_pick(
            world.toxicity_prompts(4 * config.toxicity_prompts), config.toxicity_prompts, seed, "tox"
        ),
        chat=chat,
    )
