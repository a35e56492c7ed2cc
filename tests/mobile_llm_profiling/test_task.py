"""mobile-llm-profiling end to end at smoke: real configurations of the tiny llama profiled and probed;
the oracle agrees with itself, fewer bits mean fewer bytes, every metric is declared and in range, and
bad input is one line with exit code 2."""

from __future__ import annotations

import numpy as np
import pytest

from iclrbench.benchmarks.mobile_llm_profiling import MobileLLMTask
from iclrbench.core import catalog
from iclrbench.core import config as cfg
from iclrbench.core.task import Outcome
from tests.conftest import BenchRunner

TASK = "mobile-llm-profiling"
if MobileLLMTask.unavailable():
    pytest.skip(MobileLLMTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in MobileLLMTask.metrics}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    task = MobileLLMTask()
    config = task.make_config("smoke")
    task.prepare(config)
    out = {}
    for name in ("torch-fp32", "llamacpp-q8-0", "llamacpp-q2-k", "torch-rtn-w2"):
        cls = catalog.get_algorithm(TASK, name)
        out[name] = task.evaluate(cls(cfg.build(cls.Params, {}), config, np.random.default_rng(0)), config, 0)
    return out


def test_runs_report_every_declared_metric_in_range(outcomes: dict[str, Outcome]) -> None:
    for name, outcome in outcomes.items():
        m = outcome.metrics
        assert set(m) == DECLARED, name
        assert 0 <= m["agreement_em"] <= m["agreement_f1"] + 1e-12 <= 1 + 1e-12
        assert m["perplexity"] >= 1 and 0 <= m["toxicity_rate"] <= 1
        assert m["decode_tps"] > 0 and m["prefill_tps"] > 0 and m["ttft_ms"] > 0
        assert m["peak_rss_mb"] > m["weight_memory_mb"] >= 0 and m["energy_mj_per_token"] > 0
        assert "energy modelled" in outcome.notes or "energy rapl" in outcome.notes


def test_the_full_model_agrees_with_itself(outcomes: dict[str, Outcome]) -> None:
    full = outcomes["torch-fp32"].metrics
    assert full["agreement_em"] == 1.0 and full["agreement_f1"] == 1.0 and full["hallucination_rate"] == 0.0


def test_fewer_bits_are_fewer_bytes(outcomes: dict[str, Outcome]) -> None:
    m = {name: o.metrics for name, o in outcomes.items()}
    assert m["llamacpp-q2-k"]["model_mb"] < m["llamacpp-q8-0"]["model_mb"] < m["torch-fp32"]["model_mb"]
    assert m["llamacpp-q2-k"]["bits_per_weight"] < m["llamacpp-q8-0"]["bits_per_weight"] < 32
    assert m["torch-rtn-w2"]["bits_per_weight"] == 2.25  # 2 bits + a float16 scale and zero per 128


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["torch-fp32", "--set", "model=gpt2"], "model"),
        (["torch-fp32", "--set", "prompt_tokens=200"], "n_ctx"),
        (["torch-rtn-w4", "--set", "group=100"], "group"),
        (["llamacpp-q4km"], "llamacpp-q4-k-m"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    bench: BenchRunner, db: object, args: list[str], needle: str
) -> None:
    code, _, err = bench("run", TASK, *args, "--budget", "smoke", "--db", db)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_file_that_is_not_gguf_is_one_line_and_exit_2(bench: BenchRunner, db: object, tmp_path) -> None:  # type: ignore[no-untyped-def]
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 a zip file, not a model")
    for value, needle in (
        (fake, "not a GGUF"),
        (tmp_path / "absent.gguf", "no model file"),
        ("m.bin", "gguf"),
    ):
        code, _, err = bench(
            "run", TASK, "torch-fp32", "--set", f"model={value}", "--budget", "smoke", "--db", db
        )
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_gguf_file_of_ones_own_is_probed_by_completion_without_a_chat_template() -> None:
    """``--set model=PATH``: the tiny model's own file, which has no chat template, is asked the capitals
    as completions; the run reports every metric, and the file as stored is its full model."""
    task = MobileLLMTask()
    smoke = task.make_config("smoke")
    from iclrbench.benchmarks.mobile_llm_profiling import subject_path

    own = task.make_config("smoke", {"model": str(subject_path(smoke))})
    from iclrbench.envs.mobile_llm_profiling import probes

    asked = probes(own, 0)
    assert not asked.chat and asked.questions[0].prompt.startswith("The capital of")
    cls = catalog.get_algorithm(TASK, "torch-fp32")
    outcome = task.evaluate(cls(cfg.build(cls.Params, {}), own, np.random.default_rng(0)), own, 0)
    assert set(outcome.metrics) == DECLARED and outcome.metrics["agreement_em"] == 1.0
