"""Black-box protein-like sequence design: an ask/tell oracle over sequences in a 20-letter alphabet.

Landscapes (each drawn from a seed):

- :class:`EhrlichLandscape`: the Ehrlich closed-form test functions of Stanton et al. (2024), from
  ``pytorch-holo`` (``holo.test_functions.closed_form.Ehrlich``): a feasible region given by a banded
  transition matrix, spaced motifs whose quantised presence multiplies into f in [0, 1], optimum 1.0.
  Infeasible sequences score 0 here (the paper's definition; holo returns -inf).
- :class:`NKLandscape`: Kauffman's NK model over 20 states: f(x) = mean_i f_i(x_i, x_{i+1}, ..., x_{i+K}),
  each f_i a random table in [0, 1]; tunable ruggedness, optimum unknown for long sequences.
- :class:`EpistaticFourSiteLandscape`: an enumerable 20^4 landscape shaped like GB1's four sites (Wu et al.
  2016): a Potts energy with fields and pairwise couplings of equal scale (strong epistasis), fitness
  exp(E - E_max) in units of the energy's standard deviation, so most variants are near 0, a few near 1,
  and the optimum (1.0) is known by exhaustive enumeration.

Sequences are integer arrays of shape (n, L) with letters 0..19 (``ALPHABET`` maps them to amino acids).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

from iclrbench.core.config import param

ALPHABET = "ACDEFGHIKLMNPQRSTVWY"
N_LETTERS = len(ALPHABET)
ENUMERABLE_LIMIT = 200_000


@dataclasses.dataclass(frozen=True)
class ProteinConfig:
    """One instance of the sequence design problem."""

    landscape: str = param("gb1-4", "fitness landscape", choices=("gb1-4", "ehrlich", "nk"))
    length: int = param(32, "sequence length L (gb1-4 is always 4)", low=2, high=512)
    batch_size: int = param(8, "sequences per round B", low=1, high=1024)
    rounds: int = param(10, "rounds of the ask/tell loop", low=1, high=10_000)
    n_init: int = param(16, "initial sequences shown to every algorithm", low=2, high=10_000)
    noise_std: float = param(0.0, "std of Gaussian observation noise (0 = exact)", low=0.0, high=1.0)
    motifs: int = param(2, "Ehrlich: number of motifs", low=1, high=16)
    motif_length: int = param(4, "Ehrlich: motif length", low=2, high=16)
    quantization: int = param(4, "Ehrlich: quantisation of motif presence", low=1, high=16)
    nk_k: int = param(2, "NK: epistatic neighbours per site", low=0, high=4)

    @property
    def sequence_length(self) -> int:
        return 4 if self.landscape == "gb1-4" else self.length

    def __post_init__(self) -> None:
        if self.landscape == "ehrlich" and self.motifs * self.motif_length > self.length:
            needed = self.motifs * self.motif_length
            raise ValueError(f"ehrlich: motifs x motif_length = {needed} exceeds length {self.length}")


class Landscape:
    """A fitness function over integer sequences; ``optimum`` is the best value when it is known."""

    name: str = ""
    length: int = 0
    optimum: float | None = None

    def fitness(self, sequences: np.ndarray) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} must define fitness()")

    def initial_design(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The starting sequences every algorithm is shown (uniform by default)."""
        return rng.integers(0, N_LETTERS, size=(n, self.length))


class EpistaticFourSiteLandscape(Landscape):
    name, length = "gb1-4", 4

    def __init__(self, rng: np.random.Generator) -> None:
        fields = rng.normal(size=(4, N_LETTERS))
        couplings = rng.normal(size=(4, 4, N_LETTERS, N_LETTERS))
        grid = np.indices((N_LETTERS,) * 4).reshape(4, -1).T  # all 160,000 variants
        energy = fields[np.arange(4), grid].sum(axis=1)
        for i in range(4):
            for j in range(i + 1, 4):
                energy += couplings[i, j][grid[:, i], grid[:, j]]
        log_fitness = (energy - energy.max()) / energy.std()
        self.table = np.exp(log_fitness).reshape((N_LETTERS,) * 4)
        self.optimum = float(self.table.max())  # 1.0 by construction
        self.argmax = np.array(np.unravel_index(int(self.table.argmax()), self.table.shape))

    def fitness(self, sequences: np.ndarray) -> np.ndarray:
        return self.table[tuple(sequences.T)]


class NKLandscape(Landscape):
    name = "nk"

    def __init__(self, length: int, k: int, rng: np.random.Generator) -> None:
        self.length, self.k = length, k
        self.tables = rng.random(size=(length, N_LETTERS ** (k + 1)))
        self.strides = N_LETTERS ** np.arange(k, -1, -1)
        if N_LETTERS**length <= ENUMERABLE_LIMIT:
            self.optimum = float(self.fitness(np.indices((N_LETTERS,) * length).reshape(length, -1).T).max())

    def fitness(self, sequences: np.ndarray) -> np.ndarray:
        sites = (np.arange(self.length)[:, None] + np.arange(self.k + 1)[None, :]) % self.length
        codes = (sequences[:, sites] * self.strides).sum(axis=-1)  # (n, L)
        return self.tables[np.arange(self.length), codes].mean(axis=1)


@functools.lru_cache(maxsize=1)
def _ehrlich_class() -> type:
    """holo's Ehrlich, loaded without ``holo.test_functions/__init__`` (which imports lookup benchmarks
    needing ``pooch`` and network downloads): the package is registered as a bare namespace first."""
    import holo

    package = "holo.test_functions"
    if package not in sys.modules:
        namespace = types.ModuleType(package)
        namespace.__path__ = [str(Path(holo.__file__).parent / "test_functions")]
        sys.modules[package] = namespace
    from holo.test_functions.closed_form._ehrlich import Ehrlich

    return Ehrlich


class EhrlichLandscape(Landscape):
    name, optimum = "ehrlich", 1.0

    def __init__(self, config: ProteinConfig, seed: int) -> None:
        import torch

        self.length = config.length
        self._torch = torch
        self.function = _ehrlich_class()(
            num_states=N_LETTERS,
            dim=config.length,
            num_motifs=config.motifs,
            motif_length=config.motif_length,
            quantization=config.quantization,
            random_seed=seed,
        )

    def fitness(self, sequences: np.ndarray) -> np.ndarray:
        with self._torch.no_grad():
            values = self.function.evaluate_true(self._torch.as_tensor(sequences, dtype=self._torch.long))
        values = values.double().numpy()
        return np.where(np.isfinite(values), values, 0.0)

    def initial_design(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Feasible starts drawn from the Ehrlich function's own Markov process (holo-bench's protocol)."""
        fn = self.function
        generator = self._torch.Generator().manual_seed(int(rng.integers(2**31)))
        state = self._torch.multinomial(fn.stationary_dist.squeeze(-1).float(), n, True, generator=generator)
        rows = [state]
        for _ in range(self.length - 1):
            state = self._torch.multinomial(fn.transition_matrix[state].float(), 1, generator=generator)[:, 0]
            rows.append(state)
        return self._torch.stack(rows, dim=1).numpy().astype(np.int64)


def make_landscape(config: ProteinConfig, rng: np.random.Generator) -> Landscape:
    if config.landscape == "gb1-4":
        return EpistaticFourSiteLandscape(rng)
    if config.landscape == "nk":
        return NKLandscape(config.length, config.nk_k, rng)
    return EhrlichLandscape(config, int(rng.integers(2**31)))


class SequenceBlackBox:
    """The ask/tell oracle: checks every query, returns (noisy) observations, records true fitness."""

    def __init__(self, config: ProteinConfig, rng: np.random.Generator) -> None:
        self.config = config
        self.landscape = make_landscape(config, rng)
        self.length = self.landscape.length
        self._noise_rng = np.random.default_rng(rng.integers(2**63))
        self.queried: list[np.ndarray] = []
        self.true_values: list[np.ndarray] = []

    def validate(self, sequences: Any) -> np.ndarray:
        """An (n, L) integer array with letters in 0..19, or a ValueError saying what is wrong."""
        x = np.asarray(sequences)
        if x.ndim != 2 or x.shape[1] != self.length:
            raise ValueError(f"sequences must have shape (n, {self.length}); got {x.shape}")
        if not np.issubdtype(x.dtype, np.integer):
            raise ValueError(
                f"sequences must be integer letter codes 0..{N_LETTERS - 1}; got dtype {x.dtype}"
            )
        if x.size and (x.min() < 0 or x.max() >= N_LETTERS):
            raise ValueError(f"letters must lie in 0..{N_LETTERS - 1} ({ALPHABET}); got {x.min()}..{x.max()}")
        return x.astype(np.int64)

    def observe(self, sequences: Any) -> np.ndarray:
        x = self.validate(sequences)
        truth = self.landscape.fitness(x)
        self.queried.append(x)
        self.true_values.append(truth)
        if self.config.noise_std > 0:
            return truth + self._noise_rng.normal(0.0, self.config.noise_std, size=truth.shape)
        return truth.copy()


def encode(text: str) -> np.ndarray:
    """'ACDE' -> array([0, 1, 2, 3]); unknown letters are refused."""
    bad = sorted(set(text) - set(ALPHABET))
    if bad:
        raise ValueError(f"letters {''.join(bad)!r} are not amino acids of {ALPHABET}")
    return np.array([ALPHABET.index(c) for c in text], dtype=np.int64)


def decode(sequence: np.ndarray) -> str:
    return "".join(ALPHABET[i] for i in sequence)
