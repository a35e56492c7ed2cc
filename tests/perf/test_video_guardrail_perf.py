"""Speed of video-guardrail's hot path, the guardrail's prefill over 64 videos at the small budget's shape (6
frames, 96 video tokens, 6 policies, 3 blocks of d = 64): with PAP pruning 90% of the video tokens after the
first block, against the same network unpruned (the peer). ``make perf`` prints both; the note gives the
ratio, beside the counted FLOPs' ratio (0.51)."""

from __future__ import annotations

import pytest
import torch

from iclrbench.algorithms.video_guardrail import _build
from iclrbench.benchmarks.video_guardrail import VideoGuardrailTask
from iclrbench.envs.video_guardrail import PATCH_DIM

pytestmark = pytest.mark.usefixtures("single_thread")
CONFIG = VideoGuardrailTask().make_config("small")


@pytest.fixture(scope="module")
def guardrail() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = _build(CONFIG, "parallel").eval()
    g = torch.Generator().manual_seed(0)
    video = torch.rand(64, CONFIG.video_tokens, PATCH_DIM, generator=g)
    policies = torch.randn(64, CONFIG.policies, 384, generator=g)
    return model, video, policies


@pytest.mark.parametrize("prune", ["policy", "none"])
def test_prefill_of_64_videos(benchmark, guardrail, prune: str) -> None:  # type: ignore[no-untyped-def]
    model, video, policies = guardrail

    def prefill() -> torch.Tensor:
        with torch.no_grad():
            return model(video, policies, prune, torch.Generator().manual_seed(1))

    benchmark.group = "video-guardrail prefill, 64 videos, 96 video tokens"
    logits = benchmark.pedantic(prefill, rounds=10, iterations=1, warmup_rounds=1)
    assert logits.shape == (64, CONFIG.policies) and torch.isfinite(logits).all()
