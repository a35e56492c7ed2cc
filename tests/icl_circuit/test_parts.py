"""icl-circuit's parts without a trained model: episodes in the paper's layout, the masks as the paper's
``util/ablation_study.py`` defines them, the random control, the maskable transformer (a cut link carries
exactly zero attention), the read-outs on known inputs, and the text prompts' roles."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclrbench.algorithms.icl_circuit import ABLATIONS
from iclrbench.baselines.icl_circuit import RandomControl, RandomControlParams
from iclrbench.envs import icl_circuit as env
from iclrbench.envs.icl_circuit import analysis as read
from iclrbench.envs.icl_circuit import data
from iclrbench.envs.icl_circuit.data import TEXT_SETS, load_set
from iclrbench.envs.icl_circuit.prompts import draw_items, label_tokens, text_episodes

torch = pytest.importorskip("torch")

configs = st.builds(
    env.IclCircuitConfig,
    k=st.integers(1, 8),
    classes=st.integers(2, 4),
    topics=st.integers(4, 12),
    topic_words=st.integers(1, 6),
    label_words=st.integers(4, 8),
    x_len=st.integers(1, 5),
)


@settings(max_examples=40, deadline=None)
@given(config=configs, seed=st.integers(0, 2**16))
def test_episodes_follow_the_paper_layout(config: env.IclCircuitConfig, seed: int) -> None:
    ep = env.sample_episodes(config, 16, np.random.default_rng(seed))
    roles, n = ep.roles, 16
    assert ep.ids.shape == (n, config.seq_len) and roles.shared
    assert (ep.ids[:, roles.s[0]] == config.forerunner).all() and (
        ep.ids[:, roles.sq] == config.forerunner
    ).all()
    rows = np.arange(n)[:, None]
    assert (ep.ids[rows, roles.y] == np.take_along_axis(ep.label_tokens, ep.demo_classes, 1)).all()
    # the query's class is one a demonstration shows, and every episode names its classes afresh
    assert (ep.demo_classes == ep.query_class[:, None]).any(1).all()
    assert all(len(set(row)) == config.classes for row in ep.label_tokens)
    for j in range(config.k + 1):  # every input token belongs to its input's topic
        span = ep.ids[:, roles.x_start[0, j] : roles.x_end[0, j]]
        assert (span // config.topic_words == ep.topic[:, j : j + 1]).all()
    assert int(roles.sq[0]) == config.seq_len - 1


@settings(max_examples=40, deadline=None)
@given(config=configs)
def test_masks_cut_causal_links_of_the_papers_roles(config: env.IclCircuitConfig) -> None:
    roles, k, x = env.layout(config, 1), config.k, config.x_len
    counts = {
        "xi_to_si": (k + 1) * x,
        "xq_to_sq": x + 1,
        "si_to_yi": k,
        "yi_to_sq": k,
        "si_to_si": (k + 1) * (k + 2) // 2,
        "none": 0,
    }
    for name, count in counts.items():
        links = env.mask_links(name, roles)
        assert len(set(links)) == len(links) == count, name
        assert all(key <= query for query, key in links), name  # only links a causal model has
    sq = int(roles.sq[0])
    assert {q for q, _ in env.mask_links("yi_to_sq", roles)} == {sq}
    assert {kk for _, kk in env.mask_links("yi_to_sq", roles)} == set(map(int, roles.y[0]))
    with pytest.raises(ValueError, match="mask"):
        env.mask_links("yi_to_xq", roles)


@settings(max_examples=30, deadline=None)
@given(config=configs, count=st.integers(0, 60), seed=st.integers(0, 1000))
def test_random_control_cuts_as_many_causal_links_and_leaves_no_row_empty(
    config: env.IclCircuitConfig, count: int, seed: int
) -> None:
    t = config.seq_len
    links = env.random_links(count, t, np.random.default_rng(seed))
    assert len(set(links)) == len(links) == min(count, t * (t + 1) // 2 - 1)
    assert all(0 <= kk <= q < t for q, kk in links)
    assert links == env.random_links(count, t, np.random.default_rng(seed))
    blocked = env.blocked_matrix(links, t)
    open_links = np.tril(~blocked)
    assert (open_links.sum(1) >= 1).all()


def test_layer_ranges_and_their_errors() -> None:
    tiny = env.IclCircuitConfig()
    assert env.layer_range(tiny) == (2, 3)
    assert env.layer_range(dataclasses.replace(tiny, layers="lower")) == (0, 1)
    assert env.layer_range(dataclasses.replace(tiny, layers="1-2")) == (1, 2)
    smol = env.IclCircuitConfig(subject="smollm2")
    assert env.layer_range(smol) == tuple(range(15, 30))
    for bad, needle in (("0-4", "layers 0-3"), ("3-1", "layers 0-3"), ("top", "lower, upper, q1")):
        with pytest.raises(ValueError, match=needle):
            env.IclCircuitConfig(layers=bad)
    with pytest.raises(ValueError, match="multiple of heads"):
        env.IclCircuitConfig(d_model=100, heads=3)


def _model_and_episodes(n: int = 12) -> tuple[env.IclCircuitConfig, object, env.Episodes]:
    config = env.IclCircuitConfig(d_model=32, heads=2, n_layers=4, layers="upper", batch=5)
    torch.manual_seed(0)
    return config, env.make_model(config).eval(), env.sample_episodes(config, n, np.random.default_rng(0))


@pytest.mark.parametrize("mask", [m for m in env.MASKS if m != "none"])
def test_a_cut_link_carries_no_attention_and_earlier_layers_are_untouched(mask: str) -> None:
    config, model, ep = _model_and_episodes()
    ablation = ABLATIONS[mask](None, config, np.random.default_rng(0))
    masks = ablation.masks(ep)
    assert sorted(masks) == [2, 3]
    ids = torch.from_numpy(ep.ids)
    with torch.no_grad():
        _, plain_hidden, _ = model(ids)
        _, hidden, attention = model(ids, {i: torch.from_numpy(m) for i, m in masks.items()})
    for layer in (2, 3):
        cut = torch.from_numpy(masks[layer])
        assert attention[layer][:, :, cut].abs().max() == 0.0
        assert torch.allclose(attention[layer].sum(-1), torch.ones(()))  # rows still sum to 1
    for layer in (0, 1):
        assert torch.equal(hidden[layer], plain_hidden[layer])
    assert not torch.equal(hidden[3], plain_hidden[3])


def test_the_random_control_draws_per_episode_and_layer_and_matches_the_link_count() -> None:
    config, _, ep = _model_and_episodes()
    control = RandomControl(RandomControlParams(like="xi_to_si"), config, np.random.default_rng(1))
    masks = control.masks(ep)
    count = len(env.mask_links("xi_to_si", ep.roles))
    for m in masks.values():
        assert m.shape == (len(ep), config.seq_len, config.seq_len)
        sums = m.sum((1, 2))
        # a row left with nothing to attend keeps its own token: at most one link back per row
        assert ((sums <= count) & (sums >= count - config.seq_len)).all() and (sums == count).any()
        assert len({m[i].tobytes() for i in range(len(ep))}) == len(ep)  # a fresh draw per episode
    assert not np.array_equal(masks[2], masks[3])


def test_batches_slice_per_episode_masks_and_share_common_ones() -> None:
    from iclrbench.envs.icl_circuit.subjects import batches

    config, _, ep = _model_and_episodes(10)
    per_episode = np.random.default_rng(0).random((10, config.seq_len, config.seq_len)) < 0.1
    shared = per_episode[0]
    parts = list(batches(ep, {1: per_episode, 2: shared}, 4))
    assert [len(p) for p, _ in parts] == [4, 4, 2]
    np.testing.assert_array_equal(np.concatenate([m[1] for _, m in parts]), per_episode)
    assert all(m[2] is shared for _, m in parts)
    np.testing.assert_array_equal(np.concatenate([p.ids for p, _ in parts]), ep.ids)


def test_a_batched_pass_equals_one_episode_at_a_time() -> None:
    from iclrbench.envs.icl_circuit.subjects import batches

    config, model, ep = _model_and_episodes()
    masks = ABLATIONS["yi_to_sq"](None, config, np.random.default_rng(0)).masks(ep)

    def trace(size: int) -> read.Trace:
        parts = []
        with torch.no_grad():
            for part, extra in batches(ep, masks, size):
                out = model(torch.from_numpy(part.ids), {i: torch.from_numpy(m) for i, m in extra.items()})
                parts.append(read.gather(*out, part))
        return read.Trace.join(parts)

    whole, single = trace(len(ep)), trace(1)
    for a, b in zip(dataclasses.astuple(whole), dataclasses.astuple(single), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_read_outs_on_known_inputs() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5))
    assert read.kernel_alignment(x, x, 5) == 1.0
    assert read.kernel_alignment(x, 3 * x, 5) == 1.0  # cosine: scale does not matter
    labels = np.tile([0, 1], 20)
    separable = labels[:, None] * 10.0 + rng.normal(size=(40, 3))
    assert read.centroid_accuracy(separable, labels) == 1.0
    # correct induction: all of s_q's attention on the demonstrations of the query's class scores +1
    _, _, ep = _model_and_episodes(4)
    same = ep.demo_classes == ep.query_class[:, None]
    retrieve = (same / same.sum(1, keepdims=True))[None, :, None, :]  # (L=1, B, H=1, k)
    trace = read.Trace(
        np.zeros((4, 3)), np.zeros((1, 4, 2)), np.zeros_like(retrieve), retrieve, np.zeros((1, 4, 1))
    )
    assert read.step3(trace, ep) == [pytest.approx(1.0)]
    # uniform attention over the k labels scores (same - other) / k, averaged over episodes
    uniform = np.full_like(retrieve, 1 / config_k(ep))
    expected = ((2 * same.sum(1) - same.shape[1]) / same.shape[1]).mean()
    assert read.step3(dataclasses.replace(trace, retrieve=uniform), ep) == [pytest.approx(expected)]


def test_step1_keeps_the_papers_share_of_neighbours_so_few_episodes_do_not_align_whatever_they_are() -> None:
    """60 episodes: noise features align with the inputs at about chance (k / n), the inputs' own bag of
    words at 1; a neighbourhood of 59 of 60 would give 1 for both."""
    config = env.IclCircuitConfig()
    ep = env.sample_episodes(config, 60, np.random.default_rng(0))
    words = read.bag_of_words(ep)
    noise = np.random.default_rng(1).normal(size=(1, 60, words.shape[1]))
    hidden = np.concatenate([noise, words[None]], axis=0)
    trace = read.Trace(
        np.zeros((60, 3)), hidden, np.zeros((2, 60, 1, 4)), np.zeros((2, 60, 1, 4)), np.zeros((2, 60, 1))
    )
    alignment, centroid = read.step1(trace, ep)
    assert alignment[0] < 0.4 and alignment[1] == 1.0, alignment
    assert centroid[1] > centroid[0]


def test_the_merge_read_out_is_label_to_forerunner_attention_above_previous_token_attention() -> None:
    """A head that attends every token's previous token fully (a previous-token head) reads s_i from y_i
    as it reads any previous token: no merge. A head whose labels attend their forerunners while the
    other tokens spread their attention shows the excess."""
    _, _, ep = _model_and_episodes(4)
    t = ep.ids.shape[1]
    previous_head = torch.zeros(4, 1, t, t)
    previous_head[:, 0, 0, 0] = 1.0
    previous_head[:, 0, torch.arange(1, t), torch.arange(t - 1)] = 1.0
    merge, retrieve, previous = read.attention_parts(previous_head, ep)
    assert (merge == 1.0).all() and (previous == 1.0).all() and retrieve.shape == (4, 1, ep.roles.y.shape[1])
    merging = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]  # uniform over the past
    merging = merging.expand(4, 1, t, t).clone()
    for i in range(4):
        for s, y in zip(ep.roles.s[i], ep.roles.y[i], strict=True):
            merging[i, 0, y] = 0.0
            merging[i, 0, y, s] = 1.0
    parts = [np.stack([a]) for a in read.attention_parts(merging, ep)]
    trace = read.Trace(np.zeros((4, 3)), np.zeros((1, 4, 2)), *parts)
    ordinary = [1 / (t_ + 1) for t_ in range(1, t) if t_ not in set(map(int, ep.roles.y[0]))]
    assert read.merge_excess(trace) == [pytest.approx(1.0 - np.mean(ordinary), abs=1e-6)]
    trace = read.Trace(np.zeros((4, 3)), np.zeros((1, 4, 2)), *(np.stack([a]) for a in read.attention_parts(
        previous_head, ep
    )))  # fmt: skip
    assert read.merge_excess(trace) == [pytest.approx(0.0)]
    empty = dataclasses.replace(trace, merge=trace.merge[..., :0], retrieve=trace.retrieve[..., :0])
    assert read.merge_excess(empty) == read.step2(empty) == [0.0]


def config_k(ep: env.Episodes) -> int:
    return ep.demo_classes.shape[1]


def _word_tokenizer() -> tuple[dict[str, int], object]:
    """One id per word (with its leading space), per ':', per newline and per lone space, with offsets."""
    vocab: dict[str, int] = {}

    def tokenize(text: str) -> tuple[list[int], list[tuple[int, int]]]:
        pieces = list(re.finditer(r"\n| ?[^\s:]+|:| ", text))
        assert "".join(m.group() for m in pieces) == text
        return [vocab.setdefault(m.group(), len(vocab)) for m in pieces], [m.span() for m in pieces]

    return vocab, tokenize


@pytest.mark.skipif(importlib.util.find_spec("StaICC") is None, reason="staicc is not installed")
@pytest.mark.parametrize("dataset", ["sst2", "trec"])
def test_text_prompts_put_every_role_where_the_roles_say(dataset: str) -> None:
    vocab, tokenize = _word_tokenizer()
    config = env.IclCircuitConfig(subject="smollm2", dataset=dataset, k=3)
    tests, demos = draw_items(config, 20, np.random.default_rng(0))
    ep = text_episodes(dataset, tests, demos, tokenize, pad=-1)
    zero = text_episodes(dataset, tests, demos[:, :0], tokenize, pad=-1)
    words = {v: w for w, v in vocab.items()}
    texts, labels = load_set(dataset)
    spec = TEXT_SETS[dataset]
    assert not ep.roles.shared and ep.label_tokens.shape == (20, len(spec.labels))
    np.testing.assert_array_equal(ep.query_class, labels[tests])
    np.testing.assert_array_equal(zero.query_class, ep.query_class)
    assert zero.roles.s.shape == (20, 0) and (zero.roles.sq == zero.roles.length - 1).all()

    def span(e: env.Episodes, i: int, a: int, b: int) -> str:
        return "".join(words[int(t)] for t in e.ids[i, a:b])

    for i in range(20):
        r = ep.roles
        assert r.sq[i] == r.length[i] - 1 and (ep.ids[i, r.length[i] :] == -1).all()
        assert span(ep, i, 0, r.length[i]).endswith(f"{spec.label_prefix.strip()}")
        assert words[int(ep.ids[i, r.sq[i]])] == ":"
        for j in range(3):
            assert words[int(ep.ids[i, r.s[i, j]])] == ":"
            assert words[int(ep.ids[i, r.y[i, j]])] == " " + spec.labels[ep.demo_classes[i, j]]
            assert r.y[i, j] == r.s[i, j] + 1 and r.x_end[i, j] < r.s[i, j]
            assert span(ep, i, r.x_start[i, j], r.x_end[i, j]).strip() == texts[demos[i, j]].strip()
        assert span(ep, i, r.x_start[i, 3], r.x_end[i, 3]).strip() == texts[tests[i]].strip()
        assert span(zero, i, 0, zero.roles.length[i]) == data.query_line(spec, texts[tests[i]])
        # the paper's segments: xi_to_si cuts s_i from every token since the previous label
        starts = [0, *(int(v) + 1 for v in r.y[i])]
        links = env.mask_links("xi_to_si", r, i)
        for j, f in enumerate([*map(int, r.s[i]), int(r.sq[i])]):
            assert {kk for q, kk in links if q == f} == set(range(starts[j], f))
        assert set(env.mask_links("xq_to_sq", r, i)) == {
            (int(r.sq[i]), kk) for kk in range(starts[-1], int(r.sq[i]) + 1)
        }


def test_a_label_word_that_splits_is_refused() -> None:
    def tokenize(text: str) -> tuple[list[int], list[tuple[int, int]]]:
        return list(range(len(text))), [(i, i + 1) for i in range(len(text))]  # one token per character

    with pytest.raises(ValueError, match="'negative' is 9 tokens"):
        label_tokens("sst2", tokenize)


def test_quarters_are_the_notebooks() -> None:
    """int(maskstart * L) to int(maskend * L), end excluded: SmolLM2's 30 layers give 7, 8, 7, 8."""
    assert [env.quarter(30, q) for q in range(1, 5)] == [
        tuple(range(0, 7)), tuple(range(7, 15)), tuple(range(15, 22)), tuple(range(22, 30)),
    ]  # fmt: skip
    assert [env.quarter(4, q) for q in range(1, 5)] == [(0,), (1,), (2,), (3,)]
    assert [env.quarter_of(30, layer) for layer in (0, 6, 7, 14, 15, 21, 22, 29)] == [1, 1, 2, 2, 3, 3, 4, 4]
    smol = env.IclCircuitConfig(subject="smollm2", layers="q3")
    assert env.layer_range(smol) == tuple(range(15, 22))
    induction = dataclasses.replace(smol, layers="induction")
    assert env.layer_range(induction, 23) == tuple(range(22, 30))
    with pytest.raises(ValueError, match="measured on the unablated pass"):
        env.layer_range(induction)
