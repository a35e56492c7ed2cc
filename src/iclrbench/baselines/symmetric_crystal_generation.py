"""Baselines for symmetric-crystal-generation (Levy et al., ICLR 2025, Sec. 5).

- ``wyckoff-template``: SymmCD's ablation without learned coordinates: a training crystal's Wyckoff
  template (space group, species on Wyckoff letters) and lattice, free coordinates placed at random by
  pyxtal.
- ``diffcsp-p1``: the same joint diffusion over full unit cells -- every atom's species and fractional
  coordinates, the lattice -- with no symmetry (DiffCSP-like, Jiao et al. 2023, for de novo generation).
- ``random-cell``: a random lattice (lengths 3-10 A, angles 60-120 degrees) and uniformly random positions,
  with a training crystal's composition.
- ``pyxtal-random``: pyxtal's random symmetric crystals: a training composition placed in a space group
  drawn from the training distribution (pyxtal chooses Wyckoff positions and coordinates).

Oracles of calibration: ``train-replay`` (training crystals themselves), ``reference-generator`` (fresh
crystals from the reference set's own generator: a perfect generator, whose d_sg is one draw of the floor)
and ``random-positions`` (training lattices and species, atoms placed uniformly at random: the chance level
of structural validity).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING

import numpy as np

from iclrbench.algorithms.symmetric_crystal_generation import (
    TASK,
    CrystalGenerator,
    DiffusionGenerator,
    DiffusionParams,
)
from iclrbench.core.algorithm import register_algorithm
from iclrbench.core.config import param
from iclrbench.envs.symmetric_crystal_generation import (
    AsymmetricUnit,
    asymmetric_unit,
    checked_lattice,
    shipped_structures,
    spacegroup_of,
    valid_crystal,
)

if TYPE_CHECKING:
    from pymatgen.core import Structure


@register_algorithm(task=TASK, name="wyckoff-template", role="baseline")
class WyckoffTemplateSampler(CrystalGenerator):
    """Ablation: a Wyckoff template (group, species on Wyckoff letters) and a lattice from the training set;
    free coordinates placed at random by pyxtal (no learned coordinates)."""

    def fit(self, train: list[Structure]) -> None:
        self.units = [u for u in (asymmetric_unit(s) for s in train) if u is not None]
        if not self.units:
            raise ValueError("no training crystal has a usable asymmetric unit")

    def sample(self, n: int) -> list[Structure | None]:
        return [self._one(self.units[int(self.rng.integers(len(self.units)))]) for _ in range(n)]

    def _one(self, unit: AsymmetricUnit) -> Structure | None:
        from pymatgen.core import Lattice
        from pyxtal import pyxtal
        from pyxtal.lattice import Lattice as PyxtalLattice

        by_species: dict[str, list[str]] = {}
        for site in unit.sites:
            by_species.setdefault(site.species, []).append(f"{site.multiplicity}{site.letter}")
        names = list(by_species)
        counts = [sum(int(s[:-1]) for s in by_species[name]) for name in names]
        crystal = pyxtal()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                params = Lattice.from_parameters(*unit.lattice)
                # seeded too: pyxtal's Lattice otherwise draws its own perturbations unseeded, so reruns
                # placed atoms differently (seen once a metric read the positions: nn_distance_ratio)
                lattice = PyxtalLattice.from_matrix(
                    params.matrix,
                    ltype=crystal_system(unit.spacegroup),
                    random_state=int(self.rng.integers(2**31)),
                )
                crystal.from_random(
                    3,
                    unit.spacegroup,
                    names,
                    counts,
                    sites=[by_species[s] for s in names],
                    lattice=lattice,
                    random_state=int(self.rng.integers(2**31)),  # pyxtal: `seed` is for molecules only
                )
                return crystal.to_pymatgen() if crystal.valid else None
            except Exception:
                return None


def crystal_system(spacegroup: int) -> str:
    """The crystal system of a space group (1-230), as pyxtal's lattice types name it."""
    bounds = (
        (2, "triclinic"),
        (15, "monoclinic"),
        (74, "orthorhombic"),
        (142, "tetragonal"),
        (167, "trigonal"),
        (194, "hexagonal"),
        (230, "cubic"),
    )
    return next(name for top, name in bounds if spacegroup <= top)


@dataclasses.dataclass(frozen=True)
class DiffCSPParams(DiffusionParams):
    max_atoms: int = param(32, "atoms per cell (larger training cells are skipped)", low=1)


@register_algorithm(task=TASK, name="diffcsp-p1", role="baseline")
class DiffCSPUnconstrained(DiffusionGenerator):
    """The same diffusion over full unit cells, without symmetry (DiffCSP-like)."""

    Params = DiffCSPParams

    def fit(self, train: list[Structure]) -> None:
        cells = [s for s in train if len(s) <= self.params.max_atoms]
        self.species = sorted({str(site.specie) for s in cells for site in s})
        self.sizes = np.array([len(s) for s in cells])
        k, n = int(self.sizes.max()), len(cells)
        tokens = np.zeros((n, k), dtype=np.int64)
        coords, mask = np.zeros((n, k, 3)), np.zeros((n, k), dtype=bool)
        for i, s in enumerate(cells):
            for j, site in enumerate(s):
                tokens[i, j] = self.species.index(str(site.specie))
                coords[i, j], mask[i, j] = site.frac_coords % 1.0, True
        lattice = np.stack([np.array(s.lattice.parameters) for s in cells])
        self.train_diffusion(
            [len(self.species)], [tokens], coords, lattice, self.sizes, np.zeros(n, dtype=np.int64), mask, 1
        )

    def sample(self, n: int) -> list[Structure | None]:
        from pymatgen.core import Structure

        sizes = self.sizes[self.rng.integers(len(self.sizes), size=n)]
        mask = np.arange(sizes.max())[None, :] < sizes[:, None]
        tokens, coords, lattice = self.sample_diffusion(np.zeros(n, dtype=np.int64), mask, lambda _: sizes)
        out: list[Structure | None] = []
        for i, size in enumerate(sizes):
            cell = checked_lattice(lattice[i])
            species = [self.species[t] for t in tokens[0][i, :size]]
            out.append(None if cell is None else Structure(cell, species, coords[i, :size]))
        return out


class _CompositionSampler(CrystalGenerator):
    def fit(self, train: list[Structure]) -> None:
        self.compositions = [s.composition for s in train]
        self.groups = np.array([spacegroup_of(s) for s in train])

    def composition(self) -> tuple[list[str], list[int]]:
        comp = self.compositions[int(self.rng.integers(len(self.compositions)))]
        return [str(e) for e in comp.elements], [round(comp[e]) for e in comp.elements]


@register_algorithm(task=TASK, name="random-cell", role="baseline")
class RandomCell(_CompositionSampler):
    """A random lattice and uniformly random positions for a training composition."""

    def sample(self, n: int) -> list[Structure | None]:
        from pymatgen.core import Structure

        out: list[Structure | None] = []
        for _ in range(n):
            names, counts = self.composition()
            species = [name for name, c in zip(names, counts, strict=True) for _ in range(c)]
            lengths, angles = self.rng.uniform(3.0, 10.0, 3), self.rng.uniform(60.0, 120.0, 3)
            cell = checked_lattice(np.concatenate([lengths, angles]))
            positions = self.rng.random((len(species), 3))
            out.append(None if cell is None else Structure(cell, species, positions))
        return out


@register_algorithm(task=TASK, name="pyxtal-random", role="baseline")
class PyxtalRandom(_CompositionSampler):
    """pyxtal's random symmetric crystals: a training composition in a training-distributed space group."""

    def sample(self, n: int) -> list[Structure | None]:
        from pyxtal import pyxtal

        out: list[Structure | None] = []
        for _ in range(n):
            names, counts = self.composition()
            crystal = pyxtal()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    g = int(self.groups[int(self.rng.integers(len(self.groups)))])
                    seed = int(self.rng.integers(2**31))
                    crystal.from_random(3, max(g, 1), names, counts, random_state=seed)
                    out.append(crystal.to_pymatgen() if crystal.valid else None)
                except Exception:
                    out.append(None)
        return out


@register_algorithm(task=TASK, name="train-replay", role="oracle")
class TrainReplay(CrystalGenerator):
    """Oracle of calibration: returns training crystals themselves. Its d_sg sits above the data's floor
    (``d_sg_floor``, two independent draws of the population): its histogram carries the training set's
    own sampling noise on top of the test set's."""

    def fit(self, train: list[Structure]) -> None:
        self.train = list(train)

    def sample(self, n: int) -> list[Structure | None]:
        return [self.train[i] for i in self.rng.integers(len(self.train), size=n)]


@register_algorithm(task=TASK, name="random-positions", role="oracle")
class RandomPositions(CrystalGenerator):
    """Oracle of calibration, the chance level of structural validity: a training crystal's lattice and
    species with every atom moved to a uniformly random fractional position. A generator that learned the
    lattices and compositions perfectly but atom placement not at all scores this; a learned generator's
    validity is worth what it gains over it."""

    def fit(self, train: list[Structure]) -> None:
        self.train = list(train)

    def sample(self, n: int) -> list[Structure | None]:
        from pymatgen.core import Structure

        out: list[Structure | None] = []
        for i in self.rng.integers(len(self.train), size=n):
            crystal = self.train[i]
            positions = self.rng.random((len(crystal), 3))
            # per-site compositions, not .species: a shipped structure may be disordered
            out.append(Structure(crystal.lattice, [site.species for site in crystal], positions))
        return out


@register_algorithm(task=TASK, name="reference-generator", role="oracle")
class ReferenceGenerator(CrystalGenerator):
    """Oracle of calibration: fresh crystals from the process the reference set itself was drawn from
    (:func:`~iclrbench.envs.symmetric_crystal_generation.reference_set`: a shipped structure at its share of
    the set, else :func:`~iclrbench.envs.symmetric_crystal_generation.generate_crystal`), so a perfect
    generator. Its d_sg is one draw of what ``d_sg_floor`` averages: its ``d_sg_excess`` should lie within the
    floor's range."""

    def fit(self, train: list[Structure]) -> None:
        self.shipped = shipped_structures()

    def sample(self, n: int) -> list[Structure | None]:
        share = min(len(self.shipped) / self.config.n_reference, 1.0)
        out: list[Structure | None] = []
        while len(out) < n:
            if self.rng.random() < share:
                out.append(self.shipped[int(self.rng.integers(len(self.shipped)))])
                continue
            out.append(valid_crystal(self.rng, self.config.max_atoms))
        return out
