"""mobile-llm-profiling's quality metrics and claim judges, on their definitions: F1 and exact match on
known strings, the hallucination rate's bounds, rank and r^2 statistics on known data, and the judges'
yes / no / don't-know on fake runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.benchmarks.mobile_llm_profiling import (
    LLAMA_NAMES,
    judge_agreement,
    judge_memory,
    judge_roofline,
    judge_trends,
    r_squared,
    spearman,
)
from iclrbench.envs.mobile_llm_profiling import MobileLLMConfig, probes
from iclrbench.envs.mobile_llm_profiling.quality import (
    agreement,
    hallucination_rate,
    is_correct,
    normalise,
    token_f1,
)
from iclrbench.models.quantise import LLAMA_TYPES
from iclrbench.testing import fake_runs

words = st.lists(st.sampled_from(["paris", "the", "Rome", "city", "of", "Lima!", "a", "blue"]), max_size=6)


@given(words, words)
@settings(max_examples=60, deadline=None)
def test_token_f1_is_a_symmetric_score_in_0_1(a: list[str], b: list[str]) -> None:
    x, y = " ".join(a), " ".join(b)
    assert 0.0 <= token_f1(x, y) <= 1.0
    assert token_f1(x, y) == pytest.approx(token_f1(y, x))
    assert token_f1(x, x) == 1.0
    assert normalise(normalise(x)) == normalise(x)


def test_known_answers() -> None:
    assert normalise("The  Capital, Paris!") == "capital paris"
    assert token_f1("Paris is the capital", "Paris") == pytest.approx(0.5)  # p = 1/3 ("the" dropped), r = 1
    assert is_correct("It is Buenos Aires.", "Buenos Aires") and not is_correct("Lima", "Buenos Aires")
    assert agreement(["Paris", "Rome"], ["paris.", "Lima"]) == (0.5, 0.5)


@given(st.lists(st.booleans(), min_size=1, max_size=20), st.lists(st.booleans(), min_size=1, max_size=20))
def test_hallucination_counts_only_what_the_full_model_knew(full: list[bool], this: list[bool]) -> None:
    n = min(len(full), len(this))
    truths = ["Paris"] * n
    references = ["Paris" if k else "Rome" for k in full[:n]]
    predictions = ["Paris" if k else "Oslo" for k in this[:n]]
    rate, known = hallucination_rate(predictions, references, truths)
    assert known == sum(full[:n])
    if known:
        lost = sum(f and not t for f, t in zip(full[:n], this[:n], strict=True))
        assert rate == pytest.approx(lost / known) and 0 <= rate <= 1
    else:
        assert np.isnan(rate)


def test_rank_and_line_statistics() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 2], [1, 2])) and np.isnan(spearman([1, 2, 3], [0, 0, 0]))
    assert spearman([1, 2, 3, 4], [0, 0, 1, 1]) == pytest.approx(np.sqrt(0.8))  # ties share a rank
    assert r_squared([1, 2, 3, 4], [3, 5, 7, 9]) == pytest.approx(1.0)
    assert r_squared([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.64)


def test_probes_are_drawn_by_the_seed() -> None:
    config = MobileLLMConfig(questions=10, entities=16)
    a, b, c = probes(config, 0), probes(config, 0), probes(config, 1)
    assert a == b and a.questions != c.questions and len(a.questions) == 10
    smol = probes(MobileLLMConfig(model="smollm2", questions=5), 0)
    assert smol.chat and all("capital" in q.prompt for q in smol.questions)


def test_bad_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="n_ctx"):
        MobileLLMConfig(prompt_tokens=120, decode_tokens=32, n_ctx=128)


def _llama_groups(metric_for: dict[str, dict[str, float]], seeds: tuple[int, ...] = (0, 1, 2)) -> list:
    return [fake_runs("mobile-llm-profiling", name, seeds, metrics=metric_for[name]) for name in LLAMA_NAMES]


def _metrics(bits: float, **extra: float) -> dict[str, float]:
    return {"bits_per_weight": bits, **extra}


def test_memory_judge_says_yes_and_no() -> None:
    linear = {
        f"llamacpp-{q.replace('_', '-')}": _metrics(
            b, weight_memory_mb=9.0 + (i % 2), peak_rss_mb=40.0, model_mb=0.4 * b
        )
        for i, (q, (_, b)) in enumerate(LLAMA_TYPES.items())
    }
    verdict, measured = judge_memory(_llama_groups(linear))
    assert verdict == "reproduced" and measured["r2_weight_memory_mb"] < 0.5  # RSS is beside, not judged
    flat = {n: {**m, "model_mb": 9.0 + (i % 2)} for i, (n, m) in enumerate(linear.items())}
    assert judge_memory(_llama_groups(flat))[0] == "not_reproduced"
    assert judge_memory([[]])[0] == "inconclusive"


def test_agreement_judge() -> None:
    def groups(q8: list[float], q3: list[float], q2: list[float]) -> list:
        return [
            [
                fake_runs("mobile-llm-profiling", n, (s,), metrics={"agreement_em": v})[0]
                for s, v in enumerate(vals)
            ]
            for n, vals in (("llamacpp-q8-0", q8), ("llamacpp-q3-k-m", q3), ("llamacpp-q2-k", q2))
        ]

    assert judge_agreement(groups([1.0, 0.98, 0.99], [0.7, 0.75, 0.72], [0.5, 0.4, 0.45]))[0] == "reproduced"
    assert (
        judge_agreement(groups([0.6, 0.62, 0.61], [0.7, 0.75, 0.72], [0.5, 0.4, 0.45]))[0] == "not_reproduced"
    )
    assert judge_agreement([[], [], []])[0] == "inconclusive"


def test_trend_judge_on_a_memory_bound_family() -> None:
    rng = np.random.default_rng(0)
    per_seed = {}
    for name, (_, b) in zip(LLAMA_NAMES, LLAMA_TYPES.values(), strict=True):
        per_seed[name] = _metrics(
            b,
            perplexity=3 + 1 / b,
            hallucination_rate=0.5 / b,
            decode_tps=1000 / b,
            roofline_decode_tps=900 / b,
        )
    groups = [
        [
            fake_runs(
                "mobile-llm-profiling",
                name,
                (s,),
                metrics={k: v * (1 + 0.01 * rng.random()) for k, v in m.items()},
            )[0]
            for s in (0, 1, 2)
        ]
        for name, m in per_seed.items()
    ]
    verdict, measured = judge_trends(groups)
    assert verdict == "reproduced", measured
    reversed_speed = [
        [
            fake_runs(
                "mobile-llm-profiling", name, (s,), metrics={**m, "decode_tps": 10 * m["bits_per_weight"] + s}
            )[0]
            for s in (0, 1, 2)
        ]
        for name, m in per_seed.items()
    ]
    assert judge_trends(reversed_speed)[0] == "not_reproduced"


def test_roofline_judge() -> None:
    def groups(ratio: float) -> list:
        return [
            fake_runs(
                "mobile-llm-profiling",
                name,
                (0, 1, 2),
                metrics={"bits_per_weight": b, "decode_tps": ratio * 100 / b, "roofline_decode_tps": 100 / b},
            )
            for name, (_, b) in zip(LLAMA_NAMES, LLAMA_TYPES.values(), strict=True)
        ]

    assert judge_roofline(groups(0.9))[0] == "reproduced"
    assert judge_roofline(groups(0.4))[0] == "not_reproduced"


@pytest.mark.parametrize("ratio", [0.4, 0.9])
def test_the_roofline_claim_is_not_judged_on_the_tiny_model(ratio: float) -> None:
    """Its decode is bound by per-token overheads, not weight reads: whatever was timed, no verdict."""
    groups = [
        fake_runs(
            "mobile-llm-profiling",
            name,
            (0, 1, 2),
            metrics={"bits_per_weight": b, "decode_tps": ratio * 100 / b, "roofline_decode_tps": 100 / b},
            config={"model": "tiny"},
        )
        for name, (_, b) in zip(LLAMA_NAMES, LLAMA_TYPES.values(), strict=True)
    ]
    verdict, measured = judge_roofline(groups)
    assert verdict == "inconclusive" and "tiny model" in measured["reason"], measured


def _trend_groups(perplexity: dict[str, list[float]]) -> list:
    """Three seeds of the 8 llama.cpp configurations, decode falling with bits as the roofline says, and
    the given perplexity per configuration and seed."""
    return [
        [
            fake_runs(
                "mobile-llm-profiling",
                name,
                (s,),
                metrics=_metrics(
                    b,
                    perplexity=perplexity[name][s],
                    hallucination_rate=0.5 / b,
                    decode_tps=1000 / b + s,
                    roofline_decode_tps=900 / b,
                ),
            )[0]
            for s in (0, 1, 2)
        ]
        for name, (_, b) in zip(LLAMA_NAMES, LLAMA_TYPES.values(), strict=True)
    ]


@given(st.lists(st.floats(-1.0, 1.0), min_size=24, max_size=24), st.floats(1.5, 200.0))
@settings(max_examples=40, deadline=None)
def test_perplexities_within_the_resolution_carry_no_order(jitter: list[float], level: float) -> None:
    """Whatever order perplexities spanning under the resolution take (the tiny model's quantisations
    spanned 0.7-1.4% a seed, in an order of each copy's own), the perplexity part is inconclusive: it
    neither holds nor fails."""
    from iclrbench.benchmarks.mobile_llm_profiling.judges import PERPLEXITY_RESOLUTION

    scale = level * PERPLEXITY_RESOLUTION * 0.45  # +-0.45 of it: a span below it, relative to the smallest
    values = iter(jitter)
    ppl = {name: [level + scale * next(values) for _ in range(3)] for name in LLAMA_NAMES}
    verdict, measured = judge_trends(_trend_groups(ppl))
    assert measured["spearman(bits, perplexity) < 0"]["verdict"] == "inconclusive", measured
    assert verdict == "inconclusive"
    assert all(s < PERPLEXITY_RESOLUTION for s in measured["perplexity_span"]["per_seed"].values())


def test_perplexities_beyond_the_resolution_are_judged_either_way() -> None:
    """Spanning 8%, the same judge reads the order: falling with bits holds, rising with bits fails."""
    falling = {n: [100 * (1 + 0.08 * i / 7)] * 3 for i, n in enumerate(LLAMA_NAMES)}  # F16 first
    rising = {n: [100 * (1 + 0.08 * i / 7)] * 3 for i, n in enumerate(reversed(LLAMA_NAMES))}
    assert judge_trends(_trend_groups(falling))[0] == "reproduced"
    assert judge_trends(_trend_groups(rising))[0] == "not_reproduced"


def test_a_constant_series_leaves_the_trend_claim_to_its_other_parts() -> None:
    """A hallucination rate of 0 everywhere defines no order: that part is inconclusive, so the claim is
    inconclusive while the other parts hold, and not reproduced as soon as one of them fails (the README
    and the stored verdict then say the same)."""

    def groups(decode_sign: float) -> list:
        return [
            fake_runs(
                "mobile-llm-profiling",
                name,
                (s,),
                metrics=_metrics(
                    b,
                    perplexity=3 + 1 / b,
                    hallucination_rate=0.0,
                    decode_tps=100 + decode_sign * 10 * b + s,
                    roofline_decode_tps=100 + decode_sign * 9 * b,
                ),
            )[0]
            for name, (_, b) in zip(LLAMA_NAMES, LLAMA_TYPES.values(), strict=True)
            for s in (0,)
        ]

    def per_seed(decode_sign: float) -> list:
        by_name: dict[str, list] = {}
        for s in (0, 1, 2):
            for run in groups(decode_sign):
                by_name.setdefault(run.algorithm, []).append(dataclasses.replace(run, seed=s))
        return list(by_name.values())

    verdict, measured = judge_trends(per_seed(-1.0))
    assert verdict == "inconclusive"
    assert measured["spearman(bits, hallucination) < 0"]["verdict"] == "inconclusive"
    assert measured["spearman(bits, perplexity) < 0"]["verdict"] == "reproduced"
    assert judge_trends(per_seed(+1.0))[0] == "not_reproduced"  # decode rises with bits
