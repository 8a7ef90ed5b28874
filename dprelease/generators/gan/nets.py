"""Torch side of the tabular DP-GANs; imported only when a GAN is fitted, sampled or loaded.

Public cells. Every numeric column is also seen through its public cells
(`domain.public_cells`: `bins` equal-width bins of the scaled value, one cell per value for
small integer ranges, plus "missing" for a nullable column). The discriminator's input is the
feature map phi(x) = [x, one-hot cell of every numeric column]: a fixed, public function of
one encoded row, so per-example DP-SGD is unaffected. It lets D compare numeric marginals cell
by cell, as it compares categorical ones, instead of through one scalar. With the matching
cell heads of the generator (below), in a non-private run of this GAN on the census demo table
(1,000 steps) it brings the numeric columns' 1-way total variation from 0.3 - 0.6 down to
0.1 - 0.2 (docs/decisions/0023-other-generators-defaults.md).

Generator. An MLP from latent noise z (and, for the conditional GAN, the one-hot label) to
logits, then one output head per schema column:

- categorical column: a one-hot sample from softmax(logits), by the Gumbel-max trick
  argmax_j (l_j + G_j);
- numeric column: a one-hot sample of its public cell in the same way, and a value in that
  cell: the cell's point (integer cells), or low + sigmoid(offset logit) * (high - low); a
  "missing" cell sets the missing indicator and the value 0 (the encoder's convention).
  Outputs are in [0, 1] like the encoded real values.

In training the hard one-hot samples pass the gradient of the tempered softmax (the
straight-through Gumbel estimator, Jang et al. 2017), so D sees exact one-hot rows as in the
real table and G still gets a gradient. Gumbel-max gives exact categorical samples, so training
and sampling share the forward pass; all randomness comes from an explicit torch.Generator.
The conditional generator's label block is the given one-hot condition. G returns phi of its
rows; the encoded row is its first `encoder.width` features.

Discriminator. An MLP on phi(x) with LeakyReLU activations and no normalisation layers (batch
normalisation mixes examples, which per-example DP-SGD forbids), ending in one logit:
D(x) = sigmoid(logit) = P(real | x).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from dprelease.encoding import EncodedColumn, Encoder
from dprelease.generators.domain import ColumnCells, cell_index, public_cells
from dprelease.privacy.dpsgd import entropy_generator, private_training
from dprelease.progress import stage_progress

ADAM_BETAS = (0.5, 0.9)
GUMBEL_TEMPERATURE = 0.5  # of the straight-through gradient only; samples do not depend on it
LEAKY_SLOPE = 0.2
LOGIT_BATCH_ROWS = 100_000
OFFSET_MAX = 1.0 - 2.0**-20  # keeps a value strictly inside its bin in float32


class FeatureMap:
    """phi(x) = [x, one-hot public cell of every numeric column], from encoded rows."""

    def __init__(self, encoder: Encoder, bins: int) -> None:
        self.encoder = encoder
        self.cells = [public_cells(c, bins) for c in encoder.columns if not c.is_categorical]
        self.width = encoder.width + sum(c.size for c in self.cells)

    def __call__(self, encoded: np.ndarray, dtype: type = np.float32) -> np.ndarray:
        blocks = [encoded] + [np.eye(c.size)[cell_index(c, encoded)] for c in self.cells]
        return np.hstack(blocks).astype(dtype)


def mlp(
    width_in: int, hidden: tuple[int, ...], width_out: int, activation: Callable[[], nn.Module]
) -> nn.Module:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(width_in, width), activation()]
        width_in = width
    layers.append(nn.Linear(width_in, width_out))
    return nn.Sequential(*layers)


def _float32_at_or_above(edges: np.ndarray) -> np.ndarray:
    """The smallest float32 at or above each edge: a value written at a cell's lower edge
    then lies in that cell for `cell_index` (float64), also where the edge is not a float32
    (an integer column's bound cells end half an integer in, `domain.bound_split_edges`)."""
    rounded = np.asarray(edges, dtype=np.float32)
    below = rounded < np.asarray(edges)
    rounded[below] = np.nextafter(rounded[below], np.float32(np.inf))
    return rounded


class _NumericHead(nn.Module):
    """Cell one-hot and value of one numeric column (buffers: the public cell geometry)."""

    low: torch.Tensor
    width: torch.Tensor

    def __init__(self, cells: ColumnCells) -> None:
        super().__init__()
        assert cells.edges is not None
        self.size = cells.size
        self.nullable = cells.column.missing_index is not None
        self.has_offset = cells.points is None
        edges = torch.as_tensor(_float32_at_or_above(cells.edges))
        low = edges[:-1] if cells.points is None else torch.as_tensor(cells.points).float()
        width = edges[1:] - edges[:-1] if cells.points is None else torch.zeros_like(low)
        self.register_buffer("low", low, persistent=False)
        self.register_buffer("width", width, persistent=False)

    @property
    def n_logits(self) -> int:
        return self.size + int(self.has_offset)

    def forward(
        self, logits: torch.Tensor, generator: torch.Generator
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        one_hot = _gumbel_one_hot(logits[:, : self.size], generator)
        in_bin = one_hot[:, : len(self.low)]  # all zero for the "missing" cell
        value = in_bin @ self.low
        if self.has_offset:
            offset = torch.sigmoid(logits[:, self.size]) * OFFSET_MAX
            value = value + offset * (in_bin @ self.width)
        encoded = [value.unsqueeze(1)]
        if self.nullable:
            encoded.insert(0, one_hot[:, -1:])
        return encoded, one_hot


class TabularGenerator(nn.Module):
    """z (and a one-hot condition) -> phi(encoded row), through per-column output heads."""

    def __init__(
        self,
        encoder: Encoder,
        features: FeatureMap,
        latent_dim: int,
        hidden: tuple[int, ...],
        condition: EncodedColumn | None,
    ) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self.columns = encoder.columns
        self.condition = None if condition is None else condition.name
        # Heads in a ModuleList by position, not a ModuleDict by column name: a column may be
        # called like a Module attribute ("children", "training") or contain a ".".
        self.numeric = nn.ModuleList([_NumericHead(cells) for cells in features.cells])
        numeric_names = [c.name for c in self.columns if not c.is_categorical]
        self.numeric_position = {name: i for i, name in enumerate(numeric_names)}
        n_logits = sum(
            self._head(c.name).n_logits if c.name in self.numeric_position else c.width
            for c in self.columns
            if c.name != self.condition
        )
        condition_width = 0 if condition is None else condition.width
        self.body = mlp(latent_dim + condition_width, hidden, n_logits, nn.ReLU)

    def _head(self, name: str) -> _NumericHead:
        return cast(_NumericHead, self.numeric[self.numeric_position[name]])

    def forward(
        self, z: torch.Tensor, condition: torch.Tensor | None, generator: torch.Generator
    ) -> torch.Tensor:
        inputs = z if condition is None else torch.cat([z, condition], dim=1)
        logits = self.body(inputs)
        encoded: list[torch.Tensor] = []
        cells: list[torch.Tensor] = []
        start = 0
        for column in self.columns:
            if column.name == self.condition:
                assert condition is not None
                encoded.append(condition)
            elif column.name in self.numeric_position:
                head = self._head(column.name)
                blocks, one_hot = head(logits[:, start : start + head.n_logits], generator)
                encoded += blocks
                cells.append(one_hot)
                start += head.n_logits
            else:
                encoded.append(_gumbel_one_hot(logits[:, start : start + column.width], generator))
                start += column.width
        return torch.cat(encoded + cells, dim=1)

    def sample(
        self, n: int, condition: torch.Tensor | None, generator: torch.Generator
    ) -> torch.Tensor:
        """phi of n generated rows."""
        z = torch.randn(n, self.latent_dim, generator=generator)
        return self(z, condition, generator)


def _gumbel_one_hot(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype)
    u = u.clamp(torch.finfo(logits.dtype).tiny, 1.0 - torch.finfo(logits.dtype).eps)
    perturbed = logits - torch.log(-torch.log(u))
    soft = torch.softmax(perturbed / GUMBEL_TEMPERATURE, dim=1)
    hard = nn.functional.one_hot(perturbed.argmax(dim=1), logits.shape[1]).to(logits.dtype)
    return hard - soft.detach() + soft


def discriminator_net(features: FeatureMap, hidden: tuple[int, ...]) -> nn.Module:
    """phi(x) -> logit of P(real | x); no normalisation layers."""
    return mlp(features.width, hidden, 1, lambda: nn.LeakyReLU(LEAKY_SLOPE))


class DiscriminatorLogit:
    """The fitted discriminator as the `Discriminator` protocol: logit D(x) per encoded row.

    The log weights are the pre-sigmoid output itself, never recovered from a probability
    (sigmoid rounds to exactly 1 from a logit of about 17 in float32, 37 in float64), and are
    evaluated in float64 with a float64 copy of the trained network: a saturated
    discriminator has large logits, where float32's resolution (about 5e-4 at 5,000) would tie
    rows whose log weights differ, and tied tails defeat the PSIS fit.
    """

    def __init__(self, net: nn.Module, features: FeatureMap) -> None:
        self._net = copy.deepcopy(net).double().eval()
        self._features = features

    def logit(self, encoded: np.ndarray) -> np.ndarray:
        encoded = np.asarray(encoded, dtype=float)
        out = [np.zeros(0)]
        with torch.no_grad():
            for start in range(0, len(encoded), LOGIT_BATCH_ROWS):
                phi = self._features(encoded[start : start + LOGIT_BATCH_ROWS], np.float64)
                out.append(self._net(torch.from_numpy(phi)).squeeze(-1).numpy())
        return np.concatenate(out)


@dataclass(frozen=True)
class DPSGDPlan:
    """The calibrated, public parameters of one DP-SGD training run."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    max_grad_norm: float
    batch_size: int
    learning_rate_d: float
    learning_rate_g: float
    average_decay: float
    secure: bool
    progress: bool
    label: str


class _MovingAverage:
    """Exponential moving average of G's weights, decay_t = min(decay, (1 + t) / (10 + t))."""

    def __init__(self, generator: TabularGenerator, decay: float) -> None:
        self.average = copy.deepcopy(generator).requires_grad_(False)
        self.decay = decay
        self.updates = 0

    def update(self, generator: TabularGenerator) -> None:
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        with torch.no_grad():
            for average, current in zip(
                self.average.parameters(), generator.parameters(), strict=True
            ):
                average.lerp_(current, 1.0 - decay)


def train_dpsgd(
    generator: TabularGenerator,
    discriminator: nn.Module,
    real_features: np.ndarray,
    conditions: Callable[[int, torch.Generator], torch.Tensor | None],
    plan: DPSGDPlan,
) -> tuple[TabularGenerator, dict[str, Any]]:
    """T discriminator DP-SGD steps, each followed by one generator step (see `gan`).

    Returns the moving average of G's weights (Yazici et al. 2019; post-processing of the DP
    trajectory) and the accountant's record. Raises if Opacus ran any other mechanism than the
    calibrated (sigma, q, T) or the number of private steps differs from T.
    """
    from opacus.validators import ModuleValidator
    from torch.utils.data import TensorDataset

    ModuleValidator.validate(discriminator, strict=True)
    training = private_training(
        discriminator,
        TensorDataset(torch.from_numpy(real_features)),
        sample_rate=plan.sample_rate,
        noise_multiplier=plan.noise_multiplier,
        max_grad_norm=plan.max_grad_norm,
        expected_batch_size=2 * plan.batch_size,
        make_optimizer=lambda parameters: torch.optim.Adam(
            parameters, lr=plan.learning_rate_d, betas=ADAM_BETAS
        ),
        secure=plan.secure,
    )
    loader, d_model, d_optimizer = training.loader, training.model, training.optimizer
    g_optimizer = torch.optim.Adam(
        generator.parameters(), lr=plan.learning_rate_g, betas=ADAM_BETAS
    )
    average = _MovingAverage(generator, plan.average_decay)
    fakes = entropy_generator()
    bce_sum = nn.BCEWithLogitsLoss(reduction="sum")
    bce_mean = nn.BCEWithLogitsLoss()
    n_fake = plan.batch_size
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    bar = stage_progress(plan.label, "step", enabled=plan.progress, total=plan.steps)
    try:
        generator.train()
        d_model.train()
        batches = _cycle(loader)
        for _ in range(plan.steps):
            # Discriminator: one DP-SGD step on [Poisson batch of real rows; fake rows].
            (real_rows,) = next(batches)
            with torch.no_grad():
                fake = generator.sample(n_fake, conditions(n_fake, fakes), fakes)
            labels = torch.cat([torch.ones(len(real_rows)), torch.zeros(n_fake)])
            d_optimizer.zero_grad(set_to_none=True)
            bce_sum(d_model(torch.cat([real_rows, fake])).squeeze(-1), labels).backward()
            d_optimizer.step()
            # Generator: non-saturating loss through the (frozen, hook-free) D.
            d_model.disable_hooks()
            d_model.requires_grad_(False)
            g_optimizer.zero_grad(set_to_none=True)
            fake = generator.sample(n_fake, conditions(n_fake, fakes), fakes)
            bce_mean(d_model(fake).squeeze(-1), torch.ones(n_fake)).backward()
            g_optimizer.step()
            average.update(generator)
            d_model.requires_grad_(True)
            d_model.enable_hooks()
            bar.update()
    finally:
        bar.close()
        torch.set_num_threads(threads)
        d_optimizer.zero_grad(set_to_none=True)
        d_model.remove_hooks()
    record = {
        **training.record(),
        "opacus_epsilon": training.verify(
            plan.noise_multiplier, plan.sample_rate, plan.steps, plan.delta
        ),
        "secure_noise": plan.secure,
    }
    return average.average.eval(), record


def _cycle(loader: Iterable[Any]) -> Iterator[Any]:
    while True:
        yield from loader
