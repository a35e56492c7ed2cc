"""mobile-llm-profiling end to end at smoke: real configurations of the tiny llama profiled and probed;
the oracle agrees with itself, fewer bits mean fewer bytes, every metric is declared and in range, and
models it cannot load or prompts longer than its context are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from iclrbench.benchmarks.mobile_llm_profiling import MobileLLMTask
from iclrbench.core.result import RunResult
from iclrbench.testing import evaluate_once
from tests.conftest import Refused

TASK = "mobile-llm-profiling"
if MobileLLMTask.unavailable():
    pytest.skip(MobileLLMTask.unavailable() or "", allow_module_level=True)
DECLARED = {m.name for m in MobileLLMTask.metrics}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, RunResult]:
    names = ("torch-fp32", "llamacpp-q8-0", "llamacpp-q2-k", "torch-rtn-w2")
    return {name: evaluate_once(TASK, name) for name in names}


def test_runs_report_every_declared_metric_in_range(outcomes: dict[str, RunResult]) -> None:
    for name, outcome in outcomes.items():
        m = outcome.metrics
        assert set(m) == DECLARED, name
        assert 0 <= m["agreement_em"] <= m["agreement_f1"] + 1e-12 <= 1 + 1e-12
        assert m["perplexity"] >= 1 and 0 <= m["toxicity_rate"] <= 1
        assert m["decode_tps"] > 0 and m["prefill_tps"] > 0 and m["ttft_ms"] > 0
        assert m["peak_rss_mb"] > m["weight_memory_mb"] >= 0 and m["energy_mj_per_token"] > 0
        assert m["weight_memory_net_mb"] < m["weight_memory_mb"]  # a KV cache is always subtracted
        assert "energy modelled" in outcome.notes or "energy rapl" in outcome.notes


def test_the_full_model_agrees_with_itself(outcomes: dict[str, RunResult]) -> None:
    full = outcomes["torch-fp32"].metrics
    assert full["agreement_em"] == 1.0 and full["agreement_f1"] == 1.0 and full["hallucination_rate"] == 0.0


def test_fewer_bits_are_fewer_bytes(outcomes: dict[str, RunResult]) -> None:
    m = {name: o.metrics for name, o in outcomes.items()}
    assert m["llamacpp-q2-k"]["model_mb"] < m["llamacpp-q8-0"]["model_mb"] < m["torch-fp32"]["model_mb"]
    assert m["llamacpp-q2-k"]["bits_per_weight"] < m["llamacpp-q8-0"]["bits_per_weight"] < 32
    assert m["torch-rtn-w2"]["nominal_bits"] == 2.25  # 2 bits + a float16 scale and zero per 128
    assert 2.25 < m["torch-rtn-w2"]["bits_per_weight"] < 32  # the embedding and norms stay float32


@pytest.mark.parametrize(("setting", "needle"), [("model=gpt2", "model"), ("prompt_tokens=200", "n_ctx")])
def test_a_model_it_does_not_know_or_a_prompt_past_its_context_is_refused(
    refused: Refused, setting: str, needle: str
) -> None:
    assert needle in refused("run", TASK, "torch-fp32", "--set", setting, "--budget", "smoke")


def test_a_file_that_is_not_gguf_is_refused(refused: Refused, tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 a zip file, not a model")
    for value, needle in (
        (fake, "not a GGUF"),
        (tmp_path / "absent.gguf", "no model file"),
        ("m.bin", "gguf"),
    ):
        assert needle in refused("run", TASK, "torch-fp32", "--set", f"model={value}", "--budget", "smoke")


def _own_file() -> str:
    """The path of the tiny model's own GGUF file (``--set model=PATH`` of one's own model)."""
    from iclrbench.benchmarks.mobile_llm_profiling import subject_path

    return str(subject_path(MobileLLMTask().make_config("smoke")))


def test_a_gguf_file_of_ones_own_is_probed_by_completion_without_a_chat_template() -> None:
    """``--set model=PATH``: the tiny model's own file, which has no chat template, is asked the capitals
    as completions."""
    from iclrbench.envs.mobile_llm_profiling import probes

    asked = probes(MobileLLMTask().make_config("smoke", {"model": _own_file()}), 0)
    assert not asked.chat and asked.questions[0].prompt.startswith("The capital of")


@pytest.mark.xfail(
    strict=True,
    reason="the tiny model asked by completion knows 0/12 facts, so hallucination_rate is NaN and the "
    "runner fails the run (NonFiniteMetric): bench run ... --set model=<its own file> stores a failure",
)
def test_a_run_on_ones_own_gguf_file_reports_every_metric() -> None:
    """The run reports every metric, and the file as stored is its full model."""
    outcome = evaluate_once(TASK, "torch-fp32", model=_own_file())
    assert set(outcome.metrics) == DECLARED and outcome.metrics["agreement_em"] == 1.0
