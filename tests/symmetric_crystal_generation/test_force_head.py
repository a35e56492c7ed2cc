"""The pairwise force head of the set diffusion (``score_head="force"``): its symmetries, its lattice
geometry, and a learning check: it must learn to push apart atoms that noise brought too close."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from iclrbench import runner
from iclrbench.algorithms.symmetric_crystal_generation.set_diffusion import (
    SetDiffusion,
    build_force_head,
    lattice_matrix,
)


def _inputs(seed: int, n: int = 3, k: int = 5) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    h = torch.randn((n, k, 16), generator=g)
    coords = torch.rand((n, k, 3), generator=g)
    cell = torch.eye(3).expand(n, 3, 3) * 5.0 + 0.3 * torch.randn((n, 3, 3), generator=g)
    mask = torch.ones((n, k), dtype=torch.bool)
    mask[0, 3:] = False  # a set with padding
    return h, coords, cell, mask


def test_the_force_head_is_translation_invariant_and_permutation_equivariant() -> None:
    torch.manual_seed(0)
    head = build_force_head(16)
    h, coords, cell, mask = _inputs(1)
    score = head(h, coords, cell, mask)
    shifted = head(h, (coords + torch.tensor([0.37, 0.81, 0.05])) % 1.0, cell, mask)
    torch.testing.assert_close(shifted, score, atol=1e-5, rtol=1e-4)
    order = torch.tensor([2, 0, 1, 4, 3])  # set 0 keeps its padding last: only sets 1, 2 are all real
    permuted = head(h[1:, order], coords[1:, order], cell[1:], mask[1:, order])
    torch.testing.assert_close(permuted, score[1:, order], atol=1e-5, rtol=1e-4)


def test_padded_sites_do_not_move_the_real_ones() -> None:
    torch.manual_seed(0)
    head = build_force_head(16)
    h, coords, cell, mask = _inputs(2)
    score = head(h, coords, cell, mask)
    moved = coords.clone()
    moved[0, 3:] = torch.rand((2, 3))
    h2 = h.clone()
    h2[0, 3:] = 5.0
    torch.testing.assert_close(head(h2, moved, cell, mask)[0, :3], score[0, :3])


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.tuples(*[st.floats(2.0, 12.0)] * 3),
    angles=st.tuples(*[st.floats(60.0, 120.0)] * 3),
)
def test_lattice_matrix_has_the_volume_and_lengths_of_its_parameters(lengths, angles) -> None:
    from pymatgen.core import Lattice

    cos = [math.cos(math.radians(a)) for a in angles]
    assume(1 - sum(c * c for c in cos) + 2 * cos[0] * cos[1] * cos[2] > 1e-3)  # a cell has these angles
    reference = Lattice.from_parameters(*lengths, *angles)
    matrix = lattice_matrix(torch.tensor([[*lengths, *angles]], dtype=torch.float64))[0].numpy()
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), lengths, rtol=1e-6)
    np.testing.assert_allclose(abs(np.linalg.det(matrix)), reference.volume, rtol=1e-5)
    np.testing.assert_allclose(matrix @ matrix.T, reference.matrix @ reference.matrix.T, rtol=1e-5, atol=1e-6)


def test_the_force_head_needs_the_lattice_statistics() -> None:
    with pytest.raises(ValueError, match="lattice_stats"):
        SetDiffusion([2], 1, seed=0, score_head="force")
    with pytest.raises(ValueError, match="unknown score head"):
        SetDiffusion([2], 1, seed=0, score_head="egnn")


def _pairs(n: int, rng: np.random.Generator) -> np.ndarray:
    """Two atoms per cubic cell of edge 4 A, 1.6-2.0 A apart along a random direction."""
    first = rng.random((n, 3))
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    second = first + direction * rng.uniform(1.6, 2.0, (n, 1)) / 4.0
    return np.stack([first, second], 1) % 1.0


def test_the_force_head_learns_to_separate_close_atoms() -> None:
    """Data: pairs of atoms 1.6-2.0 A apart. At a noise level where noise brings them within ~1 A, the
    learned score must push them apart (the exact score does: the pair came from farther), which the
    zero score, and a score of absolute positions alone, cannot."""
    rng = np.random.default_rng(0)
    n = 256
    cell = np.array([[4.0, 4.0, 4.0, 90.0, 90.0, 90.0]])
    features = np.concatenate([np.log(cell[:, :3] / np.cbrt(2)), (cell[:, 3:] - 90) / 30], 1)
    stats = (features[0], np.full(6, 1e-3))
    data = ([np.zeros((n, 2), dtype=np.int64)], _pairs(n, rng), np.zeros((n, 6)), np.zeros(n, dtype=np.int64))
    model = SetDiffusion([1], 1, seed=0, score_head="force", lattice_stats=stats)
    model.fit(*data, np.ones((n, 2), dtype=bool), train_steps=300, batch_size=64, lr=3e-3)
    # two atoms 0.6 A apart along x at t where sigma ~ 0.05 (0.2 A): the score must point them apart
    coords = torch.tensor([[[0.5, 0.5, 0.5], [0.65, 0.5, 0.5]]])
    t = torch.tensor([0.5])
    with torch.no_grad():
        _, score, _ = model.net(
            [torch.zeros((1, 2), dtype=torch.long)],
            coords,
            torch.zeros((1, 6)),
            t,
            torch.zeros(1, dtype=torch.long),
            torch.ones((1, 2), dtype=torch.bool),
        )
    assert score[0, 0, 0] < 0 < score[0, 1, 0]


@pytest.mark.parametrize(
    ("spacegroup", "params"),
    [(2, (4.1, 5.3, 6.2, 80.0, 95.0, 105.0)), (14, (5.0, 6.5, 7.1, 90.0, 104.0, 90.0))],
)
def test_forces_over_symmetry_images_are_those_of_the_replicated_cell(spacegroup, params) -> None:
    """An asymmetric unit's forces (``ops``: every image g(f_j) of every site) equal the forces on the same
    atoms in the cell replicated by the group, taken as a P1 set whose images carry their site's features:
    the group's operations are isometries of a cell of its crystal system, so every image sees its site's
    neighbourhood."""
    from iclrbench.envs.symmetric_crystal_generation import group_operations

    torch.manual_seed(0)
    head = build_force_head(8, rounds=2)
    rotations, translations = (torch.as_tensor(a, dtype=torch.float32) for a in group_operations(spacegroup))
    g, k = len(rotations), 3
    gen = torch.Generator().manual_seed(spacegroup)
    coords = torch.rand((1, k, 3), generator=gen)  # general positions (almost surely)
    h = torch.randn((1, k, 8), generator=gen)
    cell = lattice_matrix(torch.tensor([params]))
    ops = (rotations[None], translations[None], torch.ones((1, g, k), dtype=torch.bool))
    unit = head(h, coords, cell, torch.ones((1, k), dtype=torch.bool), ops)
    images = (torch.einsum("gxy,jy->gjx", rotations, coords[0]) + translations[:, None]) % 1.0  # (g, j, 3)
    replicated = head(
        h[0].expand(g, -1, -1).reshape(1, g * k, 8),
        images.reshape(1, g * k, 3),
        cell,
        torch.ones((1, g * k), dtype=torch.bool),
    )
    torch.testing.assert_close(unit, replicated[:, :k], atol=1e-5, rtol=1e-4)


def test_without_own_images_a_lone_site_feels_no_force() -> None:
    """``own_images=False`` (SymmCD's head): a site's own symmetry images exert nothing, so an asymmetric
    unit of one site has zero score from the head, while with them its images push or pull it."""
    from iclrbench.envs.symmetric_crystal_generation import group_operations

    torch.manual_seed(0)
    rotations, translations = (torch.as_tensor(a, dtype=torch.float32) for a in group_operations(2))
    ops = (rotations[None], translations[None], torch.ones((1, 2, 1), dtype=torch.bool))
    h, coords = torch.randn((1, 1, 8)), torch.tensor([[[0.1, 0.05, 0.02]]])  # 1 A or so from its inverse
    cell, mask = (
        lattice_matrix(torch.tensor([[5.0, 5.0, 5.0, 90.0, 90.0, 90.0]])),
        torch.ones((1, 1), dtype=torch.bool),
    )
    alone = build_force_head(8, rounds=1, own_images=False)(h, coords, cell, mask, ops)
    assert torch.count_nonzero(alone) == 0
    torch.manual_seed(0)
    with_images = build_force_head(8, rounds=1, own_images=True)(h, coords, cell, mask, ops)
    assert torch.count_nonzero(with_images) == 3


def test_orbit_tables_hold_each_groups_operations_and_multiplicities() -> None:
    from iclrbench.algorithms.symmetric_crystal_generation import orbit_tables
    from iclrbench.envs.symmetric_crystal_generation import group_operations, multiplicity

    tables = orbit_tables([2, 225], ["-1", "1", "m-3m"])
    assert tables.rotations.shape == (231, 192, 3, 3) and tables.channel == 1
    np.testing.assert_array_equal(tables.rotations[2, :2], group_operations(2)[0])
    np.testing.assert_array_equal(tables.rotations[2, 0], np.eye(3))  # the identity first
    assert tables.multiplicities[225, 2] == multiplicity(225, "m-3m") == 4
    assert tables.multiplicities[2, 0] == 1 and tables.multiplicities[2, 1] == 2
    # one image per orbit member: as many operations as the multiplicity, none past the group's order
    assert (tables.distinct.sum(-1)[[2, 225]] >= tables.multiplicities[[2, 225]]).all()
    np.testing.assert_array_equal(tables.distinct.sum(-1)[2], tables.multiplicities[2])
    assert not tables.distinct[2, :, 2:].any() and tables.distinct[5].sum() == 3  # identity alone


@settings(max_examples=60, deadline=None)
@given(spacegroup=st.integers(1, 230), data=st.data())
def test_distinct_operations_give_each_orbit_member(spacegroup: int, data) -> None:
    """Applied to a generic point of any Wyckoff position with the site symmetry, the chosen operations
    give its whole orbit (as all of G does, up to repeats); where one position has the symbol, each member
    exactly once. Positions sharing a symbol may have other stabilisers (F-43m's 4a, 4b): covering them
    all repeats some members."""
    from iclrbench.envs.symmetric_crystal_generation import (
        distinct_operations,
        group,
        group_operations,
        wyckoff_symbols,
    )

    symbol = data.draw(st.sampled_from(sorted(set(wyckoff_symbols(spacegroup)))))
    positions = [
        w
        for w, s in zip(group(spacegroup).Wyckoff_positions, wyckoff_symbols(spacegroup), strict=True)
        if s == symbol
    ]
    which = data.draw(st.integers(0, len(positions) - 1))
    wp = positions[which]
    point = np.asarray(wp.ops[0].operate(np.array(data.draw(st.tuples(*[st.floats(0.0, 1.0)] * 3)))), float)
    rotations, translations = group_operations(spacegroup)
    chosen = distinct_operations(spacegroup, symbol)
    assert chosen[0] == 0 and len(chosen) >= wp.multiplicity

    def members(images: np.ndarray) -> set[tuple[float, ...]]:
        return {tuple(p) for p in np.round(images % 1.0, 6) % 1.0}

    orbit = members(rotations @ point + translations)
    assume(len(orbit) == wp.multiplicity)  # not a point of higher symmetry, e.g. (x, -x, 0) at x = 0
    assert members(rotations[chosen] @ point + translations[chosen]) == orbit
    if len(positions) == 1:  # no other position's members to cover: one operation per member
        assert len(chosen) == wp.multiplicity


@pytest.mark.parametrize(("spacegroup", "symbol"), [(216, "-43m"), (15, "-1")])
def test_positions_sharing_a_symbol_with_other_stabilisers_lose_no_member(
    spacegroup: int, symbol: str
) -> None:
    """F-43m's 4a (0, 0, 0) and 4b (1/2, 1/2, 1/2), C2/c's 4a and 4b: the operations chosen for the first
    position alone gave a site on the second 1 and 2 of its 4 members."""
    from iclrbench.envs.symmetric_crystal_generation import (
        distinct_operations,
        group,
        group_operations,
        wyckoff_symbols,
    )

    rotations, translations = group_operations(spacegroup)
    chosen = distinct_operations(spacegroup, symbol)
    for wp, name in zip(group(spacegroup).Wyckoff_positions, wyckoff_symbols(spacegroup), strict=True):
        if name == symbol:
            point = np.asarray(wp.ops[0].operate(np.array([0.1234, 0.2345, 0.3456])), float)
            images = np.round((rotations[chosen] @ point + translations[chosen]) % 1.0, 6) % 1.0
            assert len({tuple(p) for p in images}) == wp.multiplicity == 4


def test_symmcd_with_the_force_head_runs_through_the_task() -> None:
    spec = runner.plan(
        "symmetric-crystal-generation",
        ["symmcd"],
        [0],
        "smoke",
        {"train_steps": "5", "diffusion_steps": "5", "coverage_samples": "0", "score_head": "force"},
    )[0]
    result = runner.execute(spec)
    assert result.status == "ok", result.error
    assert 0.0 <= result.metrics["structural_validity"] <= 1.0
