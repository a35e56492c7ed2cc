"""MaxCutPool's ScoreNets are the public configuration's (NGMLGroup/MaxCutPool): the layer lists are derived
here from the config files' text the way the public code derives them -- YAML, then its ``listmult``
resolver (``source/utils/hydra.py``: the list repeated ``times`` times) -- and compared with the task's
constants and with the modules it builds."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import torch
import yaml

from iclrbench.algorithms import heterophilic_graph_pooling as mcp

#: config/pooler/maxcutpool-cut.yaml of the public code (the MAXCUT experiment), verbatim
CUT_YAML = """
pooler:
  name: maxcutpool
  hparams:
    beta: 1
    just_cut: true
  aux_net:
    delta: 2
    mp_units: '${listmult: [4], 32}'
    mp_act: ReLU
    mlp_units: '${listmult: [4], 8}'
    mlp_act: ReLU
"""
#: config/pooler/maxcutpool.yaml (graph classification), its aux_net block verbatim
CLASSIFY_YAML = """
pooler:
  aux_net:
    delta: 2.0
    mp_units: [32, 32, 32, 32, 16, 16, 16, 16, 8, 8, 8, 8]
    mp_act: tanh
    mlp_units: '${listmult: [16], 2}'
    mlp_act: relu
"""
LISTMULT = re.compile(r"^\$\{listmult:\s*(\[[^\]]*\])\s*,\s*(\d+)\s*\}$")


def resolve(value: Any) -> Any:
    """An OmegaConf ``${listmult: LIST, TIMES}`` interpolation resolved as the public resolver does
    (``list_value * times``); anything else as YAML gave it."""
    if isinstance(value, str):
        match = LISTMULT.match(value.strip())
        if match:
            return json.loads(match.group(1)) * int(match.group(2))
    return value


def aux_net(text: str) -> dict[str, Any]:
    return {k: resolve(v) for k, v in yaml.safe_load(text)["pooler"]["aux_net"].items()}


def test_the_resolver_repeats_the_list() -> None:
    assert resolve("${listmult: [4], 3}") == [4, 4, 4]
    assert resolve("${listmult: [16, 8], 2}") == [16, 8, 16, 8]
    assert mcp.listmult([4], 3) == (4, 4, 4) and mcp.listmult([16, 8], 2) == (16, 8, 16, 8)
    with pytest.raises(ValueError):
        mcp.listmult([4], -1)


def test_cut_scorenet_is_the_public_maxcut_config() -> None:
    public = aux_net(CUT_YAML)
    assert public["mp_units"] == [4] * 32 and public["mlp_units"] == [4] * 8  # 32 layers of 4, not 4 of 32
    assert mcp.CUT_SCORENET["mp_units"] == tuple(public["mp_units"])
    assert mcp.CUT_SCORENET["mlp_units"] == tuple(public["mlp_units"])
    assert mcp.CUT_SCORENET["mp_act"] == public["mp_act"].lower() == "relu"
    assert mcp.CUT_SCORENET["mlp_act"] == public["mlp_act"].lower() == "relu"
    assert mcp.MaxCutPoolParams().delta == public["delta"]


def test_classification_scorenet_is_the_public_config() -> None:
    public = aux_net(CLASSIFY_YAML)
    for key in ("mp_units", "mlp_units"):
        assert mcp.CLASSIFY_SCORENET[key] == tuple(public[key])
    assert mcp.CLASSIFY_SCORENET["mp_act"] == public["mp_act"] and public["mlp_units"] == [16, 16]


def _widths(pool: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    mp = [(layer.lin.in_features, layer.lin.out_features) for layer in pool.score_net.mp]
    mlp = [(layer.in_features, layer.out_features) for layer in pool.score_net.mlp]
    return mp, mlp


def test_the_built_maxcut_scorenet_has_the_public_layers() -> None:
    """The module the MAXCUT solver trains: 32 HetMP layers 32 -> 4 -> ... -> 4, an MLP of 8 layers 4 -> 4,
    then the score (one unit)."""
    torch.manual_seed(0)
    pool = mcp.maxcutpool_class()(32, just_cut=True, **mcp.CUT_SCORENET)
    mp, mlp = _widths(pool)
    assert mp == [(32, 4)] + [(4, 4)] * 31
    assert mlp == [(4, 4)] * 8
    assert (pool.score_net.out.in_features, pool.score_net.out.out_features) == (4, 1)


def _public_scorenet_from_pyg(pool: Any, edge_index: torch.Tensor, n: int) -> Any:
    """The public ScoreNet's forward (``source/layers/maxcutpool/modules.py`` and ``utils.py``) from PyG's
    own layers: ``GCNConv(normalize=False)`` on the propagation matrix -delta L_sym + I (``get_laplacian``
    with the sym normalisation, then the identity summed in), PyG ``Linear`` for the MLP and the output,
    tanh; the weights copied from ``pool``."""
    from torch_geometric.nn import GCNConv
    from torch_geometric.nn import Linear as PygLinear
    from torch_geometric.utils import coalesce, get_laplacian

    sn = pool.score_net
    convs, lins = [], []
    with torch.no_grad():
        for layer in sn.mp:
            conv = GCNConv(layer.lin.in_features, layer.lin.out_features, normalize=False)
            conv.lin.weight.copy_(layer.lin.weight)
            conv.bias.copy_(layer.bias)
            convs.append(conv)
        for layer in [*sn.mlp, sn.out]:
            lin = PygLinear(layer.in_features, layer.out_features)
            lin.weight.copy_(layer.weight)
            lin.bias.copy_(layer.bias)
            lins.append(lin)
    index, weight = get_laplacian(edge_index, None, normalization="sym", num_nodes=n)
    eye = torch.arange(n)
    index, weight = coalesce(
        torch.cat([index, torch.stack([eye, eye])], 1), torch.cat([-sn.delta * weight, torch.ones(n)]), n
    )

    def forward(x: torch.Tensor) -> torch.Tensor:
        for conv in convs:
            x = torch.relu(conv(x, index, weight))
        for lin in lins[:-1]:
            x = torch.relu(lin(x))
        return torch.tanh(lins[-1](x)).view(-1)

    return forward


@pytest.mark.parametrize("seed", [0, 1])
def test_the_maxcut_scorenet_computes_what_the_public_one_computes(seed: int) -> None:
    """Our MAXCUT ScoreNet and one built from PyG's layers as the public code builds it, with the same
    weights, give the same scores on the 8 x 12 grid (so the collapse of some initialisations, docs, is
    the public configuration's, not a departure of ours)."""
    from iclrbench.envs.heterophilic_graph_pooling import grid_graph

    data = grid_graph(8, 12).to_data()
    torch.manual_seed(seed)
    pool = mcp.maxcutpool_class()(2, just_cut=True, **mcp.CUT_SCORENET)
    x = pool.embedding(data.x)
    ours = pool(data.x, data.edge_index, data.edge_attr, torch.zeros(data.num_nodes, dtype=torch.long))[5]
    public = _public_scorenet_from_pyg(pool, data.edge_index, data.num_nodes)(x)
    scale = max(float(ours.detach().abs().max()), 1e-6)
    assert torch.allclose(ours, public, atol=1e-6 * scale + 1e-8, rtol=1e-4)
