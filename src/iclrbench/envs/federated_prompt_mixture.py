"""federated-prompt-mixture's data: a seeded procedural image set and its federated client splits (Luo,
Chen, Wu, "Mixture of experts made personalized: federated prompt learning for vision-language models",
ICLR 2025; the splits as in the authors' code, ljaiverson/pFedMoAP: Dassl's
``generate_federated_fewshot_dataset`` for the pathological split, ``utils/datasplit.py`` for Dirichlet).

Images are 24 x 24 RGB pictures of one coloured shape on a background: the class is the colour and the
shape (``"red circle"``, ...); size, position, hue jitter, background texture and pixel noise are
nuisances, drawn per image. Two class sets (``classes``): ``wide``, 5 colours x 4 shapes = 20 classes of
which the frozen image tower was pre-trained on 12 (:data:`~iclrbench.models.shapes.WIDE_CLASS_NAMES`), so
that it knows 8 of them only partly, as CLIP knows a fine-grained data set's classes; and ``tower``, those
12 alone, which it knows (zero-shot 0.985). Every image is a pure function of its class and its own
seed, so a client regenerates exactly its own partition from the run seed and its partition id: no file
moves, as on a real federation.

Splits of a pool of ``examples_per_class`` images per class over ``clients`` clients:

- ``pathological``: Dassl's disjoint class blocks: the classes in a seeded order, client i holding the
  block [i b, (i + 1) b) with b = round(C / N), the last client the rest, each class wholly its holder's.
- ``dirichlet``: each class's images shared by Dirichlet(``alpha``) proportions (redrawn until every
  client has at least ``min_examples``), the usual label-skew split.
- ``shift``: the Dirichlet label split plus a feature shift: each client's images pass through its own
  transform (contrast, brightness, blur, noise level, a colour cast), as if taken with its own camera.

Each client's images are split into ``shots`` training images per class it holds (few-shot, as the paper's
16 shots) and a test set of the rest (at most ``test_per_client``). Every client classifies over all C
classes, as the public code (its prompt learner is built on the data set's every class name).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from iclrbench.core.config import param
from iclrbench.core.seeding import rng_for, seed_for
from iclrbench.models.shapes import CLASS_NAMES, SIDE, WIDE_CLASS_NAMES, render

CLASS_SETS = {"wide": WIDE_CLASS_NAMES, "tower": CLASS_NAMES}

TASK_ID = "federated-prompt-mixture"


@dataclasses.dataclass(frozen=True)
class FederatedPromptConfig:
    """One instance of the task: the split, the federation and the shared prompt-learning schedule."""

    split: Literal["pathological", "dirichlet", "shift"] = param(
        "pathological", "client split: few classes each, Dirichlet label skew, or label + feature shift"
    )
    clients: int = param(10, "number of clients N (paper: 10; 100 at the paper budget)", low=2, high=1000)
    participation: float = param(1.0, "fraction of clients sampled each round, in (0, 1]")
    rounds: int = param(10, "communication rounds (paper: 10)", low=0, high=1000)
    local_epochs: int = param(5, "local epochs per round (paper: 5)", low=1, high=200)
    lr: float = param(
        0.0078,
        "SGD learning rate of the prompt, cosine over the local epochs (paper: train.sh's LR=0.001, which "
        "federated_main.py passes over the yaml's 0.002, in CLIP's token space; scaled by (0.056 / 0.02)^2 "
        "for MiniLM's word embeddings, docs/tasks/federated_prompt_mixture.md)",
        low=1e-6,
        high=10.0,
    )
    momentum: float = param(
        0.9, "SGD momentum of the prompt and the gate (Dassl's default)", low=0.0, high=0.999
    )
    weight_decay: float = param(
        5e-4, "SGD weight decay of prompt and gate (Dassl's default)", low=0.0, high=1.0
    )
    batch_size: int = param(16, "training batch size (paper: 16, the number of shots)", low=1, high=4096)
    n_ctx: int = param(16, "learned context vectors of the prompt (paper: 16)", low=1, high=64)
    precision: Literal["bf16", "fp32"] = param(
        "bf16",
        "the frozen text tower's precision (the public code runs CLIP in fp16, PREC = 'fp16'; bf16 is the "
        "CPU's half type, 3x faster a step with bfloat16 units); the prompt itself trains in float32",
    )
    shots: int = param(16, "training images per class a client holds (paper: 16-shot)", low=1, high=1000)
    test_per_client: int = param(64, "most test images per client", low=1, high=100000)
    examples_per_class: int = param(120, "images per class in the pool shared out to clients", low=2)
    classes: Literal["wide", "tower"] = param(
        "wide",
        "class set: 5 colours x 4 shapes (20, 8 of them unseen by the image tower), or the tower's 12",
    )
    alpha: float = param(0.5, "Dirichlet concentration of the label skew (paper: 0.5)", low=1e-3, high=1e3)
    min_examples: int = param(8, "dirichlet / shift: fewest images a client may hold", low=2)

    def __post_init__(self) -> None:
        if not 0.0 < self.participation <= 1.0:
            raise ValueError(f"participation: {self.participation} is outside (0, 1]")
        n_classes = len(self.class_names)
        if self.split == "pathological":
            block = self.class_block
            if block == 0 or (self.clients - 1) * block >= n_classes:
                raise ValueError(
                    f"clients: the pathological split deals each client a block of round(C / N) = {block} "
                    f"of the {n_classes} classes ({self.classes!r}), and {self.clients} such blocks leave "
                    "a client none; choose another number of clients"
                )
        elif self.clients * self.min_examples > self.examples_per_class * n_classes:
            raise ValueError(
                f"clients: {self.clients} clients x min_examples={self.min_examples} are more than the "
                f"{self.examples_per_class * n_classes} examples of the pool"
            )

    @property
    def class_names(self) -> tuple[str, ...]:
        """The classes every client classifies over, as the text tower reads them."""
        return CLASS_SETS[self.classes]

    @property
    def class_block(self) -> int:
        """Classes per client of the pathological split: Dassl's ``int(round(class_num / num_users))``."""
        return round(len(self.class_names) / self.clients)

    @property
    def per_round(self) -> int:
        """Clients sampled each round: max(1, int(participation x N)), as the reference code."""
        return max(1, int(self.participation * self.clients))


# ------------------------------------------------------------------------------------------- feature shift
@dataclasses.dataclass(frozen=True)
class CameraShift:
    """One client's image transform under the ``shift`` split (identity for the other splits)."""

    contrast: float = 1.0
    brightness: float = 0.0
    blur: int = 0
    noise: float = 0.0
    cast: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @classmethod
    def draw(cls, rng: np.random.Generator) -> CameraShift:
        return cls(
            contrast=float(rng.uniform(0.45, 1.3)),
            brightness=float(rng.uniform(-0.2, 0.2)),
            blur=int(rng.integers(0, 3)),
            noise=float(rng.uniform(0.0, 0.15)),
            cast=tuple(float(v) for v in rng.uniform(-0.15, 0.15, size=3)),  # type: ignore[arg-type]
        )

    def apply(self, images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self == CameraShift():  # no camera: the images exactly (no float round trip)
            return images
        x = (images - 0.5) * self.contrast + 0.5 + self.brightness
        x = x + np.asarray(self.cast, dtype=np.float32)[None, :, None, None]
        for _ in range(self.blur):  # a 3 x 3 box blur per step
            padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
            x = sum(padded[:, :, i : i + SIDE, j : j + SIDE] for i in range(3) for j in range(3)) / 9.0
        if self.noise:
            x = x + self.noise * rng.standard_normal(x.shape).astype(np.float32)
        return np.clip(x, 0.0, 1.0).astype(np.float32)


# ------------------------------------------------------------------------------------------------- splits
@dataclasses.dataclass(frozen=True)
class ClientData:
    """One client's partition: image seeds and labels of its training and test images, and its camera."""

    client: int
    train_labels: np.ndarray
    train_seeds: np.ndarray
    test_labels: np.ndarray
    test_seeds: np.ndarray
    camera: CameraShift

    @property
    def classes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in np.unique(self.train_labels))


def _pathological(config: FederatedPromptConfig, rng: np.random.Generator) -> list[list[np.ndarray]]:
    """Per client, per class, the pool indices it holds: Dassl's ``generate_federated_fewshot_dataset``
    (the classes shuffled, then client i takes the block [i b, (i + 1) b), the last client the rest). Dassl
    shuffles with one fixed seed (2023) for every run; here the order is drawn from the run's seed."""
    n_classes, block = len(config.class_names), config.class_block
    order = rng.permutation(n_classes)
    parts: list[list[np.ndarray]] = []
    for client in range(config.clients):
        end = n_classes if client == config.clients - 1 else (client + 1) * block
        parts.append(
            [
                int(c) * config.examples_per_class + rng.permutation(config.examples_per_class)
                for c in order[client * block : end]
            ]
        )
    return parts


def _dirichlet(config: FederatedPromptConfig, rng: np.random.Generator) -> list[list[np.ndarray]]:
    """Per client, per class, pool indices drawn by Dirichlet(alpha) proportions (the usual label skew:
    each class's images shared by p ~ Dir(alpha 1_N), redrawn until every client holds min_examples)."""
    n_classes = len(config.class_names)
    for _ in range(1000):
        parts: list[list[np.ndarray]] = [[] for _ in range(config.clients)]
        for c in range(n_classes):
            pool = c * config.examples_per_class + rng.permutation(config.examples_per_class)
            shares = rng.dirichlet(np.full(config.clients, config.alpha))
            cuts = (np.cumsum(shares)[:-1] * len(pool)).astype(int)
            for client, chunk in enumerate(np.split(pool, cuts)):
                if len(chunk):
                    parts[client].append(chunk)
        if min(sum(len(c) for c in p) for p in parts) >= config.min_examples:
            return parts
    raise ValueError(
        f"clients: no Dirichlet({config.alpha}) split gives each of {config.clients} clients "
        f"{config.min_examples} examples; lower clients or raise examples_per_class"
    )


def client_split(config: FederatedPromptConfig, seed: int) -> list[ClientData]:
    """Every client's partition for run ``seed``: a pure function of (config, seed), so each client (or a
    SuperNode of a real federation) computes its own without any data leaving it."""
    rng = rng_for(seed, TASK_ID, "split", config.split)
    parts = _pathological(config, rng) if config.split == "pathological" else _dirichlet(config, rng)
    out = []
    for client, chunks in enumerate(parts):
        train, test = [], []
        for chunk in chunks:  # the first `shots` of each class train (kept >= 1 test image), the rest test
            take = min(config.shots, max(len(chunk) - 1, 1) if len(chunk) > 1 else len(chunk))
            train.append(chunk[:take])
            test.append(chunk[take:])
        if not any(len(t) for t in test):  # every class a single image: the largest class gives one up
            largest = max(range(len(train)), key=lambda k: len(train[k]))
            train[largest], test[largest] = train[largest][:-1], train[largest][-1:]
        test_idx = np.concatenate(test) if test else np.zeros(0, dtype=np.int64)
        if len(test_idx) > config.test_per_client:
            test_idx = np.sort(rng.choice(test_idx, config.test_per_client, replace=False))
        train_idx = np.concatenate(train)
        camera_rng = rng_for(seed, TASK_ID, "camera", str(client))
        camera = CameraShift.draw(camera_rng) if config.split == "shift" else CameraShift()
        out.append(
            ClientData(
                client=client,
                train_labels=train_idx // config.examples_per_class,
                train_seeds=_image_seeds(seed, train_idx),
                test_labels=test_idx // config.examples_per_class,
                test_seeds=_image_seeds(seed, test_idx),
                camera=camera,
            )
        )
    return out


def _image_seeds(seed: int, indices: np.ndarray) -> np.ndarray:
    base = seed_for(seed, TASK_ID, "images") % 2**40  # small enough that base + 7919 i fits in int64
    return base + np.asarray(indices, dtype=np.int64) * 7919


def client_images(data: ClientData, seed: int, classes: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(train images, test images) of one client (labels index ``classes``, the config's
    ``class_names``), after its camera transform."""
    rng = rng_for(seed, TASK_ID, "camera-noise", str(data.client))
    train = data.camera.apply(render(data.train_labels, data.train_seeds, classes), rng)
    test = data.camera.apply(render(data.test_labels, data.test_seeds, classes), rng)
    return train, test
