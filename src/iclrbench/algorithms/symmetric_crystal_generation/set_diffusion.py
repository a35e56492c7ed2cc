"""A small joint diffusion model over sets of sites, the shared substrate of the crystal generators.

Each crystal is a padded set of sites with categorical channels (e.g. species, site symmetry), fractional
coordinates on the 3-torus and a global lattice vector, optionally conditioned on a label (the space group):

- categorical channels: discrete diffusion (D3PM, Austin et al. 2021) towards the data's marginal,
  Q_bar_t = alpha_bar_t I + (1 - alpha_bar_t) 1 p^T, as SymmCD (Levy et al. 2025, Sec. 3.4, its
  ``prior: marginal``): p the tokens' frequencies in training, per label for the channels named in
  ``label_marginals`` (a space group's own site symmetries); alpha_bar_t the cosine schedule (Nichol &
  Dhariwal 2021), normalised to 1 at t = 0, as SymmCD's and DiffCSP's ``BetaScheduler``, so a token
  settles early enough for the coordinates to follow it; the network predicts x_0;
- coordinates: wrapped-normal score matching (DiffCSP, Jiao et al. 2023), sigma_t 0.005 to 0.5, 5 images;
- lattice: DDPM (Ho et al. 2020), cosine schedule, epsilon prediction;
- the denoiser: a 2-layer transformer over the sites with time, label and noisy-lattice embeddings
  (float32); optionally (``score_head="force"``, the generators' default) a pairwise force head as CDVAE's
  decoder (Xie et al. 2022, Sec. 3.3): invariant messages on minimum-image distances under the predicted
  lattice within a smooth cutoff, s_i = sum_j w_ij (x_j - f_i), x_j the other sites' images under the
  space group for asymmetric units (``orbits``). The transformer alone reads absolute coordinates only and
  cannot keep atoms apart (docs/tasks/symmetric_crystal_generation.md).

Sampling: D3PM posteriors, a reverse VE SDE predictor step on the torus, DDPM ancestral steps, jointly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

SIGMA_MIN, SIGMA_MAX, IMAGES = 0.005, 0.5, 2
#: the seed of the fixed noise every network's :meth:`SetDiffusion.denoising_quality` is measured on
QUALITY_SEED = 20250
#: standardised lattice features lie within a few standard deviations; predicted l_0 is clipped there
LATTICE_CLIP = 5.0


def _torch() -> Any:
    import torch

    return torch


#: radial basis of the force head: Gaussians centred from 0 to its cutoff
RADIAL_CENTRES, RADIAL_WIDTH = 24, 0.125


def lattice_matrix(params: Any) -> Any:
    """(n, 6) tensor of (a, b, c, alpha, beta, gamma in degrees) -> (n, 3, 3) row lattice vectors (a along
    x, b in the xy plane), differentiable; distances do not depend on the orientation chosen."""
    torch = _torch()
    a, b, c = params[:, 0], params[:, 1], params[:, 2]
    cos_al, cos_be, cos_ga = (torch.cos(torch.deg2rad(params[:, i])) for i in (3, 4, 5))
    sin_ga = torch.sin(torch.deg2rad(params[:, 5])).clamp(min=1e-3)
    cy = (cos_al - cos_be * cos_ga) / sin_ga
    cz = (1 - cos_be**2 - cy**2).clamp(min=1e-6).sqrt()
    zero = torch.zeros_like(a)
    return torch.stack(
        [
            torch.stack([a, zero, zero], -1),
            torch.stack([b * cos_ga, b * sin_ga, zero], -1),
            torch.stack([c * cos_be, c * cy, c * cz], -1),
        ],
        1,
    )


#: the force head's neighbourhood: pairs farther apart than this (A) exert no force, through a smooth
#: cosine envelope, so the edge list stays short in large cells
CUTOFF = 6.0
#: the cutoff between symmetry images: it holds the first shell of neighbours (the training crystals'
#: median nearest-neighbour distance is 1.75 A) and keeps a high-symmetry cell's edge list short
ORBIT_CUTOFF = 4.5


def cell_images(coords: Any, mask: Any, ops: tuple[Any, Any, Any] | None) -> tuple[Any, Any, Any, Any]:
    """The atoms of each set's cell as (images (b, A, 3), the site each is an image of (b, A), whether it is
    the identity image (b, A), real (b, A)), padded to the largest cell. P1 sets (``ops`` None) are their
    own cells; an asymmetric unit's cell holds the images g(f_j) that ``ops`` marks real (one per orbit
    member), so the pairs cost as many as the cell's atoms, not |G| x sites."""
    torch = _torch()
    b, k = mask.shape
    if ops is None:
        site = torch.arange(k).expand(b, k)
        return coords, site, torch.ones((b, k), dtype=torch.bool), mask
    rotations, translations, chosen = ops
    chosen = chosen & mask[:, None, :]
    batch, g, j = chosen.nonzero(as_tuple=True)  # ordered by set
    counts = chosen.sum((1, 2))
    slot = torch.arange(len(batch)) - (torch.cumsum(counts, 0) - counts)[batch]
    size = max(int(counts.max()), 1) if len(counts) else 1
    images = torch.zeros((b, size, 3), dtype=coords.dtype)
    images[batch, slot] = (rotations[batch, g] @ coords[batch, j][..., None])[..., 0] + translations[batch, g]
    site = torch.zeros((b, size), dtype=torch.long)
    site[batch, slot] = j
    identity, real = torch.zeros((b, size), dtype=torch.bool), torch.zeros((b, size), dtype=torch.bool)
    identity[batch, slot], real[batch, slot] = g == 0, True
    return images, site, identity, real


def build_force_head(
    in_width: int,
    width: int | None = None,
    rounds: int = 2,
    cutoff: float = CUTOFF,
    own_images: bool = True,
) -> Any:
    """Invariant messages on radial features of pair distances, then a weight per pair: score_i =
    sum_j w_ij * (x_j - f_i) over the edges (i, j) within ``cutoff`` (:data:`CUTOFF`; SymmCD's
    :data:`ORBIT_CUTOFF`), x_j the minimum image of f_j, or, for sets that are asymmetric units
    (``ops``), the minimum image of each symmetry image g(f_j).
    ``own_images=False`` leaves out a site's own images g(f_i): those of a special position lie at its
    noisy representative's feet and pull it back there, which is what the Wyckoff projection after
    sampling does anyway, and a weight learned on them (seen only at short range) would also pull other
    sites' images together.

    Pairs are an edge list (as a GNN's), so the cost follows the real pairs within the cutoff, not the
    padded k^2; the first layer of each pair MLP is split into a source, a neighbour and a radial part, so
    the per-edge work is one ``width x width`` product per round."""
    torch = _torch()
    nn = torch.nn
    width = width or in_width

    class ForceHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rounds = rounds
            self.inp = nn.Linear(in_width, width)
            self.radial = nn.Linear(RADIAL_CENTRES, width * (rounds + 1))
            self.source = nn.ModuleList([nn.Linear(width, width) for _ in range(rounds + 1)])
            self.neighbour = nn.ModuleList([nn.Linear(width, width, bias=False) for _ in range(rounds + 1)])
            self.messages = nn.ModuleList([nn.Linear(width, width) for _ in range(rounds)])
            self.updates = nn.ModuleList(
                [
                    nn.Sequential(nn.Linear(2 * width, width), nn.SiLU(), nn.Linear(width, width))
                    for _ in range(rounds)
                ]
            )
            self.weight = nn.Linear(width, 1)

        def forward(
            self, h: Any, coords: Any, cell: Any, mask: Any, ops: tuple[Any, Any, Any] | None = None
        ) -> Any:
            """``ops``: per set the group's operations, identity first (rotations (b, G, 3, 3), translations
            (b, G, 3)), and which images g(f_j) count (b, G, k): one per orbit member of each site, padded
            operations none; None for P1 cells (the identity alone)."""
            b, k = mask.shape
            with torch.no_grad():
                images, site, identity, real = cell_images(coords, mask, ops)
                offset = images[:, None] - coords[:, :, None]  # [b, i, a] = image a - f_i
                offset = (offset + 0.5) % 1.0 - 0.5  # the nearest periodic image
                # one batched product per set (b, N, 3) @ (b, 3, 3), not N tiny ones
                distance = torch.linalg.norm((offset.reshape(b, -1, 3) @ cell).reshape(offset.shape), dim=-1)
                own = site[:, None, :] == torch.arange(k)[None, :, None]  # image a is of site i
                if own_images:
                    own &= identity[:, None, :]
                keep = mask[:, :, None] & real[:, None, :] & ~own & (distance < cutoff)
                batch, i, a = keep.nonzero(as_tuple=True)
                offset, distance = offset[keep], distance[keep]
                target, source = batch * k + i, batch * k + site[batch, a]
                envelope = (0.5 * (torch.cos(math.pi * distance / cutoff) + 1.0))[:, None].to(h.dtype)
                centres = torch.linspace(0.0, cutoff, RADIAL_CENTRES, dtype=h.dtype)
                radial = torch.exp(-((distance[:, None] - centres) ** 2) / RADIAL_WIDTH) * envelope
                count = torch.zeros(b * k, dtype=h.dtype).index_add_(0, target, envelope[:, 0]).clamp(min=1)
            radial = self.radial(radial).split(width, -1)
            node = self.inp(h).reshape(b * k, width)

            def edge(r: int) -> Any:
                return torch.nn.functional.silu(
                    self.source[r](node)[target] + self.neighbour[r](node)[source] + radial[r]
                )

            for r in range(self.rounds):
                message = torch.nn.functional.silu(self.messages[r](edge(r))) * envelope
                pooled = torch.zeros_like(node).index_add_(0, target, message) / count[:, None]
                node = node + self.updates[r](torch.cat([node, pooled], -1))
            force = self.weight(edge(self.rounds)) * envelope * offset.to(h.dtype)
            return torch.zeros((b * k, 3), dtype=h.dtype).index_add_(0, target, force).reshape(b, k, 3)

    return ForceHead()


def predicted_cell(lattice: Any, eps_hat: Any, t: Any, atoms: Any, decoding: tuple[Any, Any] | None) -> Any:
    """Lattice vectors of the clean lattice the model predicts at time t (l_0 from l_t and its epsilon, as
    the sampler's DDPM step), decoded as ``iclrbench.algorithms.symmetric_crystal_generation.decode_lattice``
    does for cells of ``atoms`` atoms; the force head's distances are measured in it."""
    torch = _torch()
    if decoding is None:
        raise ValueError(
            "the force head needs the lattice features' (mean, std): SetDiffusion(lattice_stats=...)"
        )
    ab = lattice_alpha_bar(t)[:, None]
    clean = ((lattice - (1 - ab).sqrt() * eps_hat) / ab.sqrt()).clamp(-LATTICE_CLIP, LATTICE_CLIP)
    features = clean * decoding[1] + decoding[0]
    scale = atoms[:, None].clamp(min=1).to(features.dtype) ** (1.0 / 3.0)
    lengths = torch.exp(features[:, :3].clamp(math.log(0.5), math.log(40.0))) * scale
    angles = (90.0 + 30.0 * features[:, 3:]).clamp(30.0, 150.0)
    return lattice_matrix(torch.cat([lengths, angles], 1))


@dataclasses.dataclass(frozen=True)
class Orbits:
    """How sets that are asymmetric units become cells, for the force head: per label (space group) its
    operations, identity first (``rotations`` (L, G, 3, 3), ``translations`` (L, G, 3)); ``distinct``
    (L, V, G): the operations that give a site with token v of channel ``channel`` (the site symmetry)
    each of its orbit's members once; and ``multiplicities`` (L, V): the atoms such a site stands for."""

    rotations: np.ndarray
    translations: np.ndarray
    distinct: np.ndarray
    multiplicities: np.ndarray
    channel: int


def build_network(
    vocab_sizes: list[int],
    n_labels: int,
    width: int = 64,
    force: bool = False,
    force_width: int = 32,
    force_rounds: int = 1,
    orbits: bool = False,
) -> Any:
    """The denoiser; ``orbits``: its sets are asymmetric units, and the force head looks at the images of
    the other sites within :data:`ORBIT_CUTOFF`."""
    torch = _torch()
    nn = torch.nn

    class Denoiser(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.ModuleList([nn.Embedding(v, width) for v in vocab_sizes])
            self.coords = nn.Linear(6, width)
            self.time = nn.Sequential(nn.Linear(16, width), nn.SiLU(), nn.Linear(width, width))
            self.label = nn.Embedding(max(n_labels, 1), width)
            self.lattice_in = nn.Linear(6, width)
            layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.token_heads = nn.ModuleList([nn.Linear(width, v) for v in vocab_sizes])
            self.score_head = nn.Linear(width, 3)
            self.lattice_head = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, 6))
            self.force = None
            if force:
                cutoff, own = (ORBIT_CUTOFF, False) if orbits else (CUTOFF, True)
                self.force = build_force_head(width, force_width, force_rounds, cutoff, own_images=own)
            #: (mean, std) of the standardised lattice features, set by SetDiffusion for the force head
            self.lattice_decoding: tuple[Any, Any] | None = None
            #: the sets' orbits as tensors (SetDiffusion(orbits=...)); None: sets are P1 cells
            self.orbits: tuple[Any, Any, Any, Any, int] | None = None

        def forward(self, tokens: list[Any], coords: Any, lattice: Any, t: Any, label: Any, mask: Any) -> Any:
            frequencies = torch.arange(8, dtype=coords.dtype) + 1.0
            time = torch.cat([torch.sin(t[:, None] * frequencies), torch.cos(t[:, None] * frequencies)], -1)
            angle = 2 * math.pi * coords
            h = self.coords(torch.cat([torch.sin(angle), torch.cos(angle)], -1))
            for emb, tok in zip(self.tokens, tokens, strict=True):
                h = h + emb(tok)
            glob = self.time(time) + self.label(label) + self.lattice_in(lattice)
            h = self.encoder(h + glob[:, None, :], src_key_padding_mask=~mask)
            pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
            # heads in this order: autograd sums the gradients reaching h in it, and the transformer-only
            # model keeps the exact training trajectory of earlier versions
            logits = [head(h) for head in self.token_heads]
            score = self.score_head(h)
            eps_hat = self.lattice_head(pooled + glob)
            if self.force is not None:
                if self.orbits is None:
                    atoms, ops = mask.sum(1), None
                else:
                    rotations, translations, distinct, multiplicities, channel = self.orbits
                    atoms = (multiplicities[label].gather(1, tokens[channel]) * mask).sum(1)
                    # (b, k, G) -> (b, G, k): the images of each site, one per orbit member
                    images = distinct[label[:, None], tokens[channel]].transpose(1, 2)
                    ops = (rotations[label], translations[label], images)
                cell = predicted_cell(lattice, eps_hat.detach(), t, atoms, self.lattice_decoding)
                score = score + self.force(h, coords, cell, mask, ops)
            return logits, score, eps_hat

    return Denoiser()


def sigmas(t: Any) -> Any:
    return SIGMA_MIN * (SIGMA_MAX / SIGMA_MIN) ** t


def wrapped_normal_score(diff: Any, sigma: Any) -> Any:
    """d/dx log sum_k N(x + k; 0, sigma^2) at x = diff (wrapped into [-0.5, 0.5))."""
    torch = _torch()
    diff = (diff + 0.5) % 1.0 - 0.5
    k = torch.arange(-IMAGES, IMAGES + 1, dtype=diff.dtype)
    shifted = diff[..., None] + k
    weights = torch.softmax(-(shifted**2) / (2 * sigma[..., None] ** 2), dim=-1)
    return -(weights * shifted).sum(-1) / sigma**2


def token_alpha_bar(t: Any) -> Any:
    """alpha_bar of the categorical channels: the cosine schedule divided by its value at t = 0, so a
    token at t = 0 is its x_0 (DiffCSP's and SymmCD's ``alphas_cumprod / alphas_cumprod[0]``)."""
    return lattice_alpha_bar(t) / lattice_alpha_bar(0.0)


def marginals(
    tokens: np.ndarray, mask: np.ndarray, vocab: int, labels: np.ndarray | None, n_labels: int
) -> Any:
    """The limit distribution of one categorical channel: token frequencies over the real sites, (1, V)
    for all sets or (n_labels, V) per label (``labels`` given); a label without sites gets the overall
    frequencies."""
    torch = _torch()
    overall = np.bincount(tokens[mask], minlength=vocab).astype(float)
    overall = overall / max(overall.sum(), 1.0)
    if labels is None:
        return torch.as_tensor(overall[None], dtype=torch.float32)
    table = np.zeros((max(n_labels, 1), vocab))
    np.add.at(table, (np.broadcast_to(labels[:, None], mask.shape)[mask], tokens[mask]), 1.0)
    totals = table.sum(1, keepdims=True)
    table = np.where(totals > 0, table / np.maximum(totals, 1.0), overall)
    return torch.as_tensor(table, dtype=torch.float32)


def lattice_alpha_bar(t: Any) -> Any:
    torch = _torch()
    return torch.cos((torch.as_tensor(t, dtype=torch.float32) + 0.008) / 1.008 * math.pi / 2) ** 2


class SetDiffusion:
    """Train and sample the joint diffusion; data as numpy arrays (padded sets)."""

    def __init__(
        self,
        vocab_sizes: list[int],
        n_labels: int,
        seed: int,
        steps: int = 100,
        score_head: str = "transformer",
        lattice_stats: tuple[np.ndarray, np.ndarray] | None = None,
        orbits: Orbits | None = None,
        force_width: int = 32,
        force_rounds: int = 1,
        label_marginals: Sequence[bool] | None = None,
    ) -> None:
        """``score_head="force"`` adds the pairwise force head (``force_rounds`` message rounds of width
        ``force_width``); it needs ``lattice_stats``, the (mean, std) of the standardised lattice
        features, and either sets whose sites are the cell's atoms or ``orbits``, which replicate each
        site into the cell. ``label_marginals[c]``: channel c's limit distribution is its marginal per
        label (SymmCD's site symmetries per space group) rather than over all sets."""
        torch = _torch()
        if score_head not in ("transformer", "force"):
            raise ValueError(f"unknown score head {score_head!r}: 'transformer' or 'force'")
        self.vocab_sizes, self.n_labels, self.steps = vocab_sizes, n_labels, steps
        self.label_marginals = list(label_marginals or [False] * len(vocab_sizes))
        #: each channel's limit distribution, (1 or n_labels, V): uniform until fit() counts the data
        self.priors = [torch.full((1, v), 1.0 / v) for v in vocab_sizes]
        self.generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)  # the network's initial weights
        force = score_head == "force"
        self.net = build_network(
            vocab_sizes,
            n_labels,
            force=force,
            force_width=force_width,
            force_rounds=force_rounds,
            orbits=orbits is not None,
        ).float()
        if force:
            if lattice_stats is None:
                raise ValueError("score_head='force' needs lattice_stats=(mean, std)")
            self.net.lattice_decoding = tuple(torch.as_tensor(v, dtype=torch.float32) for v in lattice_stats)
            if orbits is not None:
                self.net.orbits = (
                    torch.as_tensor(orbits.rotations, dtype=torch.float32),
                    torch.as_tensor(orbits.translations, dtype=torch.float32),
                    torch.as_tensor(orbits.distinct, dtype=torch.bool),
                    torch.as_tensor(orbits.multiplicities, dtype=torch.float32),
                    orbits.channel,
                )
        self.net.train()

    def fit(
        self,
        tokens: list[np.ndarray],
        coords: np.ndarray,
        lattice: np.ndarray,
        labels: np.ndarray,
        mask: np.ndarray,
        train_steps: int,
        batch_size: int = 64,
        lr: float = 1e-3,
    ) -> list[float]:
        """Denoising training: D3PM x_0 cross-entropy + wrapped-normal score matching + DDPM epsilon MSE.
        Returns the loss of every step; :attr:`quality` then holds the network's quality
        (:meth:`denoising_quality` before and after training, on the same noise)."""
        torch = _torch()
        self.priors = [
            marginals(
                np.asarray(tok), np.asarray(mask), v, np.asarray(labels) if per_label else None, self.n_labels
            )
            for tok, v, per_label in zip(tokens, self.vocab_sizes, self.label_marginals, strict=True)
        ]
        toks = [torch.as_tensor(t, dtype=torch.long) for t in tokens]
        f0 = torch.as_tensor(coords, dtype=torch.float32)
        l0 = torch.as_tensor(lattice, dtype=torch.float32)
        y, m = torch.as_tensor(labels, dtype=torch.long), torch.as_tensor(mask)
        data = (toks, f0, l0, y, m)
        # its own noise, drawn from its own generator: measuring draws nothing from the training stream
        initial = self.denoising_quality(*data)
        late = initial  # at three quarters of training: the last quarter's drop says whether it plateaued
        optimiser = torch.optim.Adam(self.net.parameters(), lr=lr)
        losses = []
        n = len(y)
        for step in range(train_steps):
            if step and step == (3 * train_steps) // 4:
                late = self.denoising_quality(*data)
            idx = torch.randint(0, n, (min(batch_size, n),), generator=self.generator)
            t = torch.rand(len(idx), generator=self.generator, dtype=torch.float32).clamp(min=1e-3)
            score, cross_entropies, lattice_loss, _ = self._losses(data, idx, t, self.generator)
            loss = score
            for ce in cross_entropies:
                loss = loss + ce
            loss = loss + lattice_loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(float(loss.detach()))
        final = self.denoising_quality(*data)
        #: the network's quality (:meth:`denoising_quality`): ``denoising_loss`` and ``score_ratio`` after
        #: training, and the denoising loss on the same noise untrained (``initial_denoising_loss``) and at
        #: three quarters of the steps (``late_denoising_loss``)
        self.quality = {
            **final,
            "initial_denoising_loss": initial["denoising_loss"],
            "late_denoising_loss": late["denoising_loss"],
        }
        return losses

    def _losses(self, data: tuple[Any, ...], idx: Any, t: Any, g: Any) -> tuple[Any, list[Any], Any, Any]:
        """The denoising losses of the sets ``idx`` at times ``t``, noised with draws from ``g`` (in the
        order training has always drawn them): (score matching, each channel's x_0 cross-entropy, the
        lattice's epsilon MSE, the zero score's score-matching loss on the same noise)."""
        torch = _torch()
        toks, f0, l0, y, m = data
        # the force head's geometry is padded to the batch's sites: a batch is cut to its largest set
        # (sites come first in every set); the transformer alone keeps the full padding, so its draws
        # are those of earlier versions
        k = int(m[idx].sum(1).max()) if self.net.force is not None else f0.shape[1]
        batch_tokens = [tok[idx][:, :k] for tok in toks]
        batch_f0, mi = f0[idx][:, :k], m[idx][:, :k]
        keep = token_alpha_bar(t)
        noisy_tokens = []
        for x0, prior in zip(batch_tokens, self.priors, strict=True):
            resample = torch.rand(x0.shape, generator=g, dtype=torch.float32) > keep[:, None]
            drawn = torch.multinomial(self._rows(prior, y[idx]), x0.shape[1], replacement=True, generator=g)
            noisy_tokens.append(torch.where(resample, drawn, x0))
        sigma = sigmas(t)[:, None, None]
        noise = torch.randn(batch_f0.shape, generator=g, dtype=torch.float32)
        ft = (batch_f0 + sigma * noise) % 1.0
        target = sigma * wrapped_normal_score(ft - batch_f0, sigma.expand_as(ft))
        ab = lattice_alpha_bar(t)[:, None]
        eps = torch.randn(l0[idx].shape, generator=g, dtype=torch.float32)
        lt = ab.sqrt() * l0[idx] + (1 - ab).sqrt() * eps
        logits, score, eps_hat = self.net(noisy_tokens, ft, lt, t, y[idx], mi)
        # the network predicts the normalised score sigma * grad log p (DiffCSP's parameterisation);
        # the sampler divides by sigma
        score_loss = ((score - target) ** 2).sum(-1)[mi].mean()
        cross_entropies = [
            torch.nn.functional.cross_entropy(lg[mi], x0[mi])
            for lg, x0 in zip(logits, batch_tokens, strict=True)
        ]
        return score_loss, cross_entropies, ((eps_hat - eps) ** 2).mean(), (target**2).sum(-1)[mi].mean()

    def denoising_quality(
        self, toks: list[Any], f0: Any, l0: Any, y: Any, m: Any, sets: int = 256, levels: int = 8
    ) -> dict[str, float]:
        """The training objective on fixed noise (the first ``sets`` sets at ``levels`` times, noise of its
        own): ``denoising_loss``, its mean over times; ``score_ratio``, its score part over the zero score's
        (1: nothing learnt about where sites go)."""
        torch = _torch()
        g = torch.Generator().manual_seed(QUALITY_SEED)
        idx = torch.arange(min(sets, len(y)))
        total, score_total, zero_total = 0.0, 0.0, 0.0
        with torch.no_grad():
            for i in range(levels):
                t = torch.full((len(idx),), (i + 0.5) / levels, dtype=torch.float32)
                score, cross_entropies, lattice_loss, zero = self._losses((toks, f0, l0, y, m), idx, t, g)
                total += float(score + sum(cross_entropies) + lattice_loss)
                score_total, zero_total = score_total + float(score), zero_total + float(zero)
        return {"denoising_loss": total / levels, "score_ratio": score_total / max(zero_total, 1e-12)}

    @staticmethod
    def _rows(prior: Any, labels: Any) -> Any:
        """Each set's limit distribution: (n, V) from a (1, V) or (n_labels, V) table."""
        return prior.expand(len(labels), -1) if len(prior) == 1 else prior[labels]

    def _draw(self, prior: Any, labels: Any, k: int) -> Any:
        """k tokens per set from its limit distribution, (n, k)."""
        return _torch().multinomial(self._rows(prior, labels), k, replacement=True, generator=self.generator)

    def sample(
        self,
        labels: np.ndarray,
        mask: np.ndarray,
        allowed: Sequence[np.ndarray | None] | None = None,
        step_lr: float = 0.0,
        each_step: Callable[[list[Any], Any, float], Any] | None = None,
    ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Reverse diffusion for len(labels) sets with the given site masks: (tokens, coords, lattice).

        ``allowed[c]``, a boolean (len(labels), vocab) array or None, restricts channel c's predicted x_0
        to the allowed tokens of each set (e.g. the site symmetries its space group has), so the final
        tokens are always allowed ones: the model's most probable valid choice.

        ``step_lr`` > 0 samples the coordinates as DiffCSP and SymmCD do (predictor-corrector, Song et al.
        2021, Alg. 2-3): before each predictor step a Langevin corrector step of size
        step_lr * (sigma_t / sigma_min)^2, then the ancestral predictor, whose noise is
        sigma_{t-1} sqrt(sigma_t^2 - sigma_{t-1}^2) / sigma_t; the network runs twice a step. 0: the
        predictor alone, with the reverse SDE's noise sqrt(sigma_t^2 - sigma_{t-1}^2) (more than the
        ancestral predictor's, so a tiny ``step_lr`` and 0 differ).

        ``each_step(tokens, coords, t)``, called after every step with the tensors reached at time t,
        returns the coordinates to go on from: to watch the trajectory, or to project the coordinates
        (onto Wyckoff positions, as DiffCSP++ does; SymmCD projects once, after sampling).
        """
        torch = _torch()
        g = self.generator
        n, k = mask.shape
        y, m = torch.as_tensor(labels, dtype=torch.long), torch.as_tensor(mask)
        masks = [
            None if a is None else torch.as_tensor(np.asarray(a, dtype=bool))[:, None, :]
            for a in (allowed if allowed is not None else [None] * len(self.vocab_sizes))
        ]
        toks = [self._draw(prior, y, k) for prior in self.priors]
        f = torch.rand((n, k, 3), generator=g, dtype=torch.float32)
        lat = torch.randn((n, 6), generator=g, dtype=torch.float32)
        grid = torch.linspace(1.0, 0.0, self.steps + 1, dtype=torch.float32)
        with torch.no_grad():
            for i in range(self.steps):
                t_now, t_next = float(grid[i]), float(grid[i + 1])
                t = torch.full((n,), t_now, dtype=torch.float32)
                s_now = float(sigmas(t_now))
                s_next = float(sigmas(t_next)) if i < self.steps - 1 else 0.0
                last = i == self.steps - 1
                if step_lr > 0:
                    _, score, _ = self.net(toks, f, lat, t, y, m)
                    step = step_lr * (s_now / SIGMA_MIN) ** 2
                    # the network predicts sigma * grad log p; the last step adds no noise (as DiffCSP)
                    f = f + step * score / s_now
                    if not last:
                        f = f + math.sqrt(2 * step) * torch.randn(f.shape, generator=g, dtype=torch.float32)
                    f = f % 1.0
                logits, score, eps_hat = self.net(toks, f, lat, t, y, m)
                # categorical channels: the D3PM posterior q(x_{t-1} | x_t, x_0) with x_0 ~ softmax(logits)
                keep_now, keep_next = float(token_alpha_bar(t_now)), float(token_alpha_bar(t_next))
                beta = 1.0 - keep_now / keep_next
                new_tokens = []
                for lg, tok, v, allow, prior in zip(
                    logits, toks, self.vocab_sizes, masks, self.priors, strict=True
                ):
                    x0 = torch.softmax(lg if allow is None else lg.masked_fill(~allow, -torch.inf), -1)
                    p = self._rows(prior, y)[:, None, :]  # (n, 1, V)
                    p_xt = p.expand(-1, k, -1).gather(2, tok[..., None])  # p(x_t), (n, k, 1)
                    # p(x_{t-1} | x_t) = sum_i q(x_{t-1} | x_t, x_0 = i) p(x_0 = i | x_t), the network's
                    # x_0 standing for p(x_0 | x_t) (it is trained by cross-entropy on x_0), as SymmCD's
                    # and DiGress's samplers: q(x_{t-1} | x_t, x_0) = q(x_t | x_{t-1}) q(x_{t-1} | x_0) /
                    # q(x_t | x_0). Leaving out the division (D3PM's eq. 4 with this x_0) drew the tokens
                    # towards the limit distribution: (.46, .33, .21) for data (.6, .3, .1) with the exact x_0
                    current = torch.nn.functional.one_hot(tok, v).float()
                    from_xt = (1 - beta) * current + beta * p_xt
                    given_x0 = keep_now * current + (1 - keep_now) * p_xt
                    weight = torch.where(given_x0 > 0, x0 / given_x0.clamp(min=1e-30), torch.zeros_like(x0))
                    probs = from_xt * (
                        keep_next * weight + (1 - keep_next) * p * weight.sum(-1, keepdim=True)
                    )
                    total = probs.sum(-1, keepdim=True)
                    # a token the limit distribution never holds can leave no mass: then x_0 alone
                    probs = torch.where(total > 0, probs / total.clamp(min=1e-30), x0)
                    new_tokens.append(torch.multinomial(probs.reshape(-1, v), 1, generator=g).reshape(n, k))
                toks = new_tokens
                # coordinates: a predictor step of the reverse VE SDE, wrapped onto the torus
                step = s_now**2 - s_next**2
                z = torch.randn(f.shape, generator=g, dtype=torch.float32)
                noise = s_next / s_now * math.sqrt(step) if step_lr > 0 else math.sqrt(step)
                f = (f + step * score / s_now + noise * z) % 1.0
                if each_step is not None:
                    f = each_step(toks, f, t_next) % 1.0
                # lattice: a DDPM ancestral step through the posterior q(l_{t-1} | l_t, l_0) at the
                # predicted l_0, clipped to the data range (Ho et al. 2020): dividing by sqrt(alpha_t)
                # directly blows up near t = 1, where the cosine schedule's alpha_bar is ~0
                ab_now, ab_next = lattice_alpha_bar(t_now), lattice_alpha_bar(t_next)
                a_t = ab_now / ab_next
                l0 = ((lat - (1 - ab_now).sqrt() * eps_hat) / ab_now.sqrt()).clamp(
                    -LATTICE_CLIP, LATTICE_CLIP
                )
                mean = (ab_next.sqrt() * (1 - a_t) * l0 + a_t.sqrt() * (1 - ab_next) * lat) / (1 - ab_now)
                if i < self.steps - 1:
                    var = ((1 - ab_next) / (1 - ab_now) * (1 - a_t)).clamp(min=0)
                    lat = mean + var.sqrt() * torch.randn(lat.shape, generator=g, dtype=torch.float32)
                else:
                    lat = mean
        return [t.numpy() for t in toks], f.double().numpy(), lat.double().numpy()
