"""The guardrail's two encodings and its pruning, on untrained networks (they are properties of the
architecture, not of training): PEPE's verdicts follow the policies wherever they stand, sequential ones do
not; the masks say who sees whom; pruning keeps every policy token and exactly M video tokens, each policy's
most attended among them; the counted FLOPs fall with the tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclrbench.algorithms.video_guardrail import (
    ANSWER,
    CHUNK,
    VIDEO,
    _build,
    attention_mask,
    kept_video_tokens,
    layout,
    prefill_flops,
)
from iclrbench.envs.video_guardrail import PATCH_DIM, VideoGuardrailConfig

CONFIG = VideoGuardrailConfig(frames=2, d_model=32, layers=3, policies=4, policy_tokens=2, keep=0.25)


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    video = torch.rand(3, CONFIG.video_tokens, PATCH_DIM, generator=g)
    policies = torch.nn.functional.normalize(torch.randn(3, CONFIG.policies, 384, generator=g), dim=-1)
    return video, policies


@pytest.mark.parametrize("prune", ["none", "policy"])
def test_pepe_verdicts_move_with_their_policies(prune: str) -> None:
    torch.manual_seed(0)
    model = _build(CONFIG, "parallel").eval()
    video, policies = _inputs()
    order = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        base = model(video, policies, prune)
        moved = model(video, policies[:, order], prune)
    torch.testing.assert_close(moved, base[:, order], atol=1e-5, rtol=1e-5)


def test_sequential_verdicts_change_with_the_order() -> None:
    """The control: the same weights under sequential encoding are not order-equivariant."""
    torch.manual_seed(0)
    model = _build(CONFIG, "sequential").eval()
    video, policies = _inputs()
    order = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        gap = (model(video, policies[:, order]) - model(video, policies)[:, order]).abs().max()
    assert gap > 1e-3


def test_pepe_mask_keeps_chunks_apart_and_lets_the_video_read_them_all() -> None:
    lay = {k: torch.from_numpy(v)[None] for k, v in layout(CONFIG, "parallel").items()}
    mask = attention_mask(lay, "parallel", frame_local=False)[0]
    kind, policy = lay["kind"][0], lay["policy"][0]
    chunk, video, answer = kind == CHUNK, kind == VIDEO, kind == ANSWER
    same = policy[:, None] == policy[None, :]
    assert (mask[chunk][:, chunk] == same[chunk][:, chunk]).all()  # a chunk sees its own chunk only
    assert not mask[chunk][:, video].any() and not mask[video][:, answer].any()
    assert mask[video][:, chunk].all() and mask[video][:, video].all()
    assert (mask[answer][:, chunk] == same[answer][:, chunk]).all() and mask[answer][:, video].all()
    positions = lay["position"][0]
    assert len(set(positions[chunk].tolist())) == CONFIG.policy_tokens  # every chunk at the same positions
    assert len(set(positions[answer].tolist())) == 1
    sequential = layout(CONFIG, "sequential")["position"]
    assert len(set(sequential.tolist())) == len(sequential)
    # before pruning a video token reads its own frame only (the vision encoder's view), no text
    local = attention_mask(lay, "parallel", frame_local=True)[0]
    frame = lay["frame"][0]
    assert (local[video][:, video] == (frame[video][:, None] == frame[video][None, :])).all()
    assert local[video][:, chunk].all() and not local[answer][:, video].any()
    assert (local[answer][:, chunk] == mask[answer][:, chunk]).all()


@pytest.mark.parametrize("prune", ["policy", "random"])
def test_pruning_keeps_every_policy_token_and_m_video_tokens(prune: str) -> None:
    torch.manual_seed(0)
    model = _build(CONFIG, "parallel").eval()
    p, v = CONFIG.policies, CONFIG.video_tokens
    lay = {k: t[None] for k, t in model.layout.items()}
    s = lay["kind"].shape[1]
    weights = torch.rand(2, s, s)
    kept = model._kept(weights, lay, prune, torch.Generator().manual_seed(0))
    m = kept_video_tokens(CONFIG)
    assert kept.shape == (2, s - v + m)
    kinds = lay["kind"][0][kept]
    assert ((kinds == VIDEO).sum(1) == m).all() and (
        (kinds == CHUNK).sum(1) == p * CONFIG.policy_tokens
    ).all()
    if prune == "policy":  # the video token attending most to each policy's chunk is among the kept
        kind, policy = lay["kind"][0], lay["policy"][0]
        videos = torch.nonzero(kind == VIDEO).squeeze(-1)
        to_chunk = torch.stack(
            [weights[:, videos][:, :, (kind == CHUNK) & (policy == j)].sum(-1) for j in range(p)], 1
        )  # (2, P, V)
        best = videos[to_chunk.argmax(-1)]
        for row in range(2):
            assert set(best[row].tolist()) <= set(kept[row].tolist())


def test_pruning_cuts_the_counted_flops_and_keeping_all_cuts_nothing() -> None:
    assert prefill_flops(CONFIG, pruned=True) < prefill_flops(CONFIG, pruned=False)
    whole = VideoGuardrailConfig(frames=2, d_model=32, layers=3, keep=1.0)
    assert prefill_flops(whole, pruned=True) == prefill_flops(whole, pruned=False)
    assert kept_video_tokens(VideoGuardrailConfig(keep=0.1, frames=8)) == round(0.1 * 128)
    assert np.isfinite(prefill_flops(CONFIG, pruned=False))


@pytest.mark.parametrize("jointly", [False, True])
def test_the_explanation_trains_the_trunk_only_when_asked_to(jointly: bool) -> None:
    """By default the explanation heads learn from the answer states with the gradient stopped, so the
    verdict network is the one verdicts alone train; ``explain_jointly`` lets it through."""
    import dataclasses

    from iclrbench.algorithms.video_guardrail import explanation_loss

    torch.manual_seed(0)
    model = _build(dataclasses.replace(CONFIG, explain_jointly=jointly), "parallel")
    video, policies = _inputs()
    _, explained = model(video, policies, explain=True)
    when = torch.tensor([[0, -1, 1, -1]] * 3)
    explanation_loss(explained, when, when.clamp_min(0) * 3, CONFIG.frames).backward()
    assert model.explain.weight.grad.abs().sum() > 0
    trunk = model.blocks[-1].mlp[0].weight.grad
    assert bool(trunk is not None and trunk.abs().sum() > 0) is jointly
