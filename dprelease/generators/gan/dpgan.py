"""DP-GAN (Xie et al. 2018) and DP-CGAN (Torkzadehmahani et al. 2019) on the encoded table.

One implementation; DP-CGAN is the conditional variant. The networks are in
`gan.nets` (torch is imported only when a GAN is fitted, sampled, saved or loaded;
constructing one imports Opacus' accountant for the calibration).

Model. A generator G maps latent noise (and, for DP-CGAN, a one-hot label of the schema's
`target`) to an encoded row: one-hot categorical blocks, numeric values in [0, 1] (see
`gan.nets`; numeric columns are generated and discriminated through their public cells).
A discriminator D outputs D(x) = sigmoid(f(x)) = P(real | x) and is trained with the binary
cross-entropy; G with the non-saturating loss -log D(G(z)). Deviation from Xie et al., who
train a Wasserstein critic with weight clipping: a critic has no probability, and the
`discriminator` weights need logit D(x) = log w(x) + const (docs/privacy-model.md section 5; paper
section 3.5). DP-CGAN's D sees the label inside the encoded row (the target's one-hot block),
which is the concatenation of Torkzadehmahani et al. Synthetic rows come from an exponential
moving average of G's weights over the training steps (Yazici et al. 2019), which steadies
short DP runs; D was trained against the current G of each step, so logit D(x) estimates the
log density ratio against G's recent outputs, which the average tracks.

Privacy (docs/privacy-model.md sections 4, 6). Only D reads real rows, and only D's updates are
privatised; G is trained from D's DP outputs and public noise (post-processing). Each of the
T = `steps` discriminator steps (Abadi et al. 2016, with Opacus parts):

1. Poisson-samples every real row independently with probability q (Opacus `DPDataLoader`);
2. draws a fake batch of L = `batch_size` rows from the current G (public: it depends only
   on earlier DP outputs and fresh randomness);
3. runs D once on the concatenation [real; fake] and takes the summed BCE loss: label 1 for
   real rows, 0 for fake ones. Opacus' `GradSampleModule` gives every row's gradient, each is
   clipped to L2 norm C = `max_grad_norm`, they are summed, ONE draw of N(0, sigma^2 C^2 I) is
   added, and the result is divided by the public constant 2L (expected real lot L plus L fake
   rows), `DPOptimizer` with `expected_batch_size=2L`.

Adding or removing one real row adds or removes one clipped term of norm <= C (the fake rows
do not depend on it), so each step is the Poisson-subsampled Gaussian mechanism with
(q, sigma) and the whole training is T compositions of it. Clipping the public fake rows'
gradients too is harmless (it only changes the update, not the sensitivity).

Every quantity is public. q is `sample_rate`, or by default L / `max_rows` of the schema
(expected lot L for a table of max_rows rows); without either the generator refuses: the
real row count is private, and Opacus' `PrivacyEngine.make_private` cannot be used because it
derives q = 1 / len(loader) and the averaging lot size len(dataset) * q from the dataset size,
i.e. from N_D. We therefore assemble the same Opacus parts (`DPDataLoader`,
`GradSampleModule`, `DPOptimizer`, `RDPAccountant`) with our public q and L. sigma is
calibrated at construction with `dpsgd_noise_multiplier` (Opacus' RDP accountant) for the
DP-SGD share of (epsilon, delta) and the fixed T; there is no early stopping and no model
selection; epsilon is not tuned. The accountant is hooked to the optimizer and every step is
counted; after training its history must be exactly [(sigma, q, T)] and the reported epsilon
(same accountant, `dpsgd_epsilon`) in [0.98 target, target], else the run fails (having
spent). Opacus' `ModuleValidator` checks D has no batch normalisation.

DP-CGAN (`cgan.py`) also releases a DP label distribution: a second ledger entry.

Randomness (docs/privacy-model.md section 9). Poisson sampling, the gradient noise and the fake
batches use torch generators seeded with 63 bits of OS entropy (`secrets`), never a user seed.
`NoiseSource(secure=True)` turns on `DPOptimizer`'s secure mode (sums of 2n = 4 Gaussian
draws against floating-point attacks, Holohan and Braghin 2021); Opacus' cryptographic RNG
needs torchcsprng, not a dependency. The actual spends record each noise's real source
(`noise_source`): the `NoiseSource` for DP-CGAN's label histogram (OpenDP in secure mode),
Opacus' optimizer for DP-SGD (never OpenDP). The user `seed` fixes only the initial weights, inside
`torch.random.fork_rng` so the caller's global RNG is untouched; training uses no global RNG.
Sampling is post-processing: `sample(n, rng)` derives a torch generator from `rng`, so it is
reproducible given the seed.

Saving: `save(fitted, directory)` writes the two state dicts (`torch.save` of tensors only;
read back with `weights_only=True`) and a small JSON of the architecture, budget, options and
the DP label distribution; `load(directory, encoder)` rebuilds the `FittedGenerator`. No
pickle.
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dprelease.encoding import EncodedColumn, Encoder
from dprelease.errors import InputError
from dprelease.generators.base import Discriminator, FittedGenerator, Generator
from dprelease.generators.gan.steps import default_steps
from dprelease.privacy.accounting import NEIGHBOURING, PlannedSpend
from dprelease.privacy.calibration import (
    DPSGD_ACCOUNTANT,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
)
from dprelease.privacy.mechanisms import PoissonSubsampledGaussian
from dprelease.privacy.noise import NoiseSource

if TYPE_CHECKING:
    import torch

    from dprelease.generators.gan.nets import FeatureMap, TabularGenerator

ACCOUNTANT_TOLERANCE = 0.02  # reported epsilon in [(1 - tol) target, target]
STATE_FILE = "gan_state.pt"
ARCHITECTURE_FILE = "gan.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class GANState:
    """A fitted DP-GAN: the averaged generator network, the DP-trained discriminator and
    DP-CGAN's DP label distribution (None for DP-GAN)."""

    generator: TabularGenerator
    discriminator: torch.nn.Module
    labels: np.ndarray | None


@dataclass(frozen=True)
class GANOptions:
    """Public options of the DP-GANs.

    steps: T, the fixed number of discriminator (DP-SGD) steps, each followed by one generator
    step (None: `default_steps`, from public quantities); batch_size: L, the expected real
    lot (q = L / max_rows by default), the fake batch size, and half the averaging
    denominator; sample_rate: q (overrides the default);
    max_grad_norm: C; hidden: widths of the hidden layers of G and D; latent_dim: size of z;
    learning_rate_d, learning_rate_g: Adam's (betas 0.5, 0.9) for D and G; average_decay: of
    the moving average of G's weights that is sampled from (0: the last weights); bins: public
    cells of numeric columns in G's heads and D's features; seed: initial weights only;
    progress: show a progress bar over the training steps.
    """

    steps: int | None = None
    batch_size: int = 256
    sample_rate: float | None = None
    max_grad_norm: float = 1.0
    hidden: tuple[int, ...] = (64, 64)
    latent_dim: int = 64
    learning_rate_d: float = 2e-3
    learning_rate_g: float = 2e-3
    average_decay: float = 0.99
    bins: int = 16
    seed: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(int(width) for width in self.hidden))
        for name in ("steps", "batch_size", "latent_dim", "bins"):
            value = getattr(self, name)
            if value is None and name == "steps":
                continue
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer")
            object.__setattr__(self, name, int(value))
        if not self.hidden or min(self.hidden) < 1:
            raise ValueError("hidden must be a non-empty list of positive widths")
        if self.sample_rate is not None and not 0 < self.sample_rate <= 1:
            raise ValueError("sample_rate must be in (0, 1]")
        if not (self.max_grad_norm > 0 and math.isfinite(self.max_grad_norm)):
            raise ValueError("max_grad_norm must be a positive number")
        for name in ("learning_rate_d", "learning_rate_g"):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be a positive number")
        if not 0 <= self.average_decay < 1:
            raise ValueError("average_decay must be in [0, 1)")


class DPGAN(Generator):
    """GAN whose BCE discriminator is trained with DP-SGD; (epsilon, delta)-DP."""

    name = "dpgan"
    has_discriminator = True
    shows_progress = True
    extra = "torch"
    label_fraction: float = 0.0

    def __init__(self, encoder: Encoder, epsilon: float, delta: float = 0.0, **options: Any):
        super().__init__(encoder, epsilon, delta)
        if not 0 < delta < 1:
            raise InputError(f"{self.name}: DP-SGD needs 0 < delta < 1 (got delta={delta})")
        self.options = GANOptions(**options)
        self.target = self._condition_column()
        self.label_epsilon = self.epsilon * self.label_fraction
        self.dpsgd_target = self.epsilon - self.label_epsilon
        self.sample_rate = self._sample_rate()
        steps = self.options.steps
        if steps is None:
            steps = default_steps(
                self.dpsgd_target, delta, self.sample_rate, self.options.batch_size
            )
            self.options = replace(self.options, steps=steps)
        self.steps = steps
        self.noise_multiplier = dpsgd_noise_multiplier(
            self.dpsgd_target, delta, self.sample_rate, steps
        )
        self.epsilon_reported = dpsgd_epsilon(self.noise_multiplier, delta, self.sample_rate, steps)
        _check_reported(self.epsilon_reported, self.dpsgd_target)

    def _condition_column(self) -> EncodedColumn | None:
        return None

    def _sample_rate(self) -> float:
        if self.options.sample_rate is not None:
            return float(self.options.sample_rate)
        max_rows = self.encoder.schema.max_rows
        if max_rows is None:
            raise InputError(
                f"{self.name}: the Poisson sampling rate must come from public quantities (the "
                "real row count is private); set the option sample_rate, or max_rows in the "
                "schema (then sample_rate = batch_size / max_rows)"
            )
        return min(1.0, self.options.batch_size / max_rows)

    def public_options(self) -> dict[str, Any]:
        """The constructor's options (JSON-able), to rebuild this generator."""
        return {**asdict(self.options), "hidden": list(self.options.hidden)}

    def config(self) -> dict:
        return {"generator": self.name, **self.public_options()}

    def planned_spends(self) -> list[PlannedSpend]:
        clip = self.options.max_grad_norm
        dpsgd = self.spend(
            "dpsgd-poisson-subsampled-gaussian",
            PoissonSubsampledGaussian(self.noise_multiplier, self.sample_rate, self.steps),
            self.epsilon_reported,
            self.delta,
            neighbouring=NEIGHBOURING,
            accountant=DPSGD_ACCOUNTANT,
            noise_multiplier=self.noise_multiplier,
            sample_rate=self.sample_rate,
            steps=self.steps,
            max_grad_norm=clip,
            sensitivity=clip,
            noise_scale=self.noise_multiplier * clip,
            expected_batch_size=2 * self.options.batch_size,
            fake_batch_size=self.options.batch_size,
            epsilon_target=self.dpsgd_target,
            epsilon_reported=self.epsilon_reported,
        )
        return [*self._label_spends(), dpsgd]

    def _label_spends(self) -> list[PlannedSpend]:
        return []

    def _fit(self, real: np.ndarray, noise: NoiseSource) -> tuple[GANState, list[PlannedSpend]]:
        from dprelease.generators.gan.nets import DPSGDPlan, train_dpsgd

        labels = self._noisy_labels(real, noise)
        generator, discriminator = self.build_networks()
        plan = DPSGDPlan(
            noise_multiplier=self.noise_multiplier,
            sample_rate=self.sample_rate,
            steps=self.steps,
            delta=self.delta,
            max_grad_norm=self.options.max_grad_norm,
            batch_size=self.options.batch_size,
            learning_rate_d=self.options.learning_rate_d,
            learning_rate_g=self.options.learning_rate_g,
            average_decay=self.options.average_decay,
            secure=noise.secure,
            progress=self.options.progress,
            label=f"{self.name} DP-SGD",
        )
        features = self.feature_map()(real)
        averaged, fit_record = train_dpsgd(
            generator, discriminator, features, partial(self.conditions, labels), plan
        )
        _check_reported(fit_record["opacus_epsilon"], self.dpsgd_target)
        # What was really drawn: the label histogram's Laplace noise from `noise`, DP-SGD's
        # from Opacus' optimizer (`fit_record["noise_source"]`).
        *label_spends, dpsgd = self.planned_spends()
        source = {"noise_source": noise.kind}
        spends = [
            *(replace(spend, params=spend.params | source) for spend in label_spends),
            replace(dpsgd, params=dpsgd.params | fit_record),
        ]
        return GANState(averaged, discriminator, labels), spends

    def _noisy_labels(self, real: np.ndarray, noise: NoiseSource) -> np.ndarray | None:
        return None

    def feature_map(self) -> FeatureMap:
        from dprelease.generators.gan.nets import FeatureMap

        return FeatureMap(self.encoder, self.options.bins)

    def build_networks(self) -> tuple[TabularGenerator, torch.nn.Module]:
        import torch

        import dprelease.generators.gan.nets as nets

        seed = secrets.randbits(63) if self.options.seed is None else self.options.seed
        features = self.feature_map()
        hidden, latent = self.options.hidden, self.options.latent_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            generator = nets.TabularGenerator(self.encoder, features, latent, hidden, self.target)
            discriminator = nets.discriminator_net(features, hidden)
        return generator, discriminator

    @staticmethod
    def conditions(
        labels: np.ndarray | None, n: int, generator: torch.Generator
    ) -> torch.Tensor | None:
        """One-hot labels drawn from the DP label distribution `labels` (None when
        unconditional)."""
        import torch

        if labels is None:
            return None
        probabilities = torch.as_tensor(labels, dtype=torch.float32)
        drawn = torch.multinomial(probabilities, n, replacement=True, generator=generator)
        return torch.nn.functional.one_hot(drawn, len(probabilities)).float()

    def _sample(self, state: GANState, n: int, rng: np.random.Generator) -> np.ndarray:
        import torch

        generator = torch.Generator().manual_seed(int(rng.integers(2**63)))
        state.generator.eval()
        with torch.no_grad():
            rows = state.generator.sample(n, self.conditions(state.labels, n, generator), generator)
        return self.encoder.snap_to_codebooks(rows[:, : self.encoder.width].double().numpy())

    def discriminator_of(self, state: GANState) -> Discriminator:
        from dprelease.generators.gan.nets import DiscriminatorLogit

        return DiscriminatorLogit(state.discriminator, self.feature_map())

    def save(self, fitted: FittedGenerator, directory: str | Path) -> None:
        """Write a fitted state: torch state dicts plus a JSON of the architecture."""
        import torch

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {
            "generator": fitted.state.generator.state_dict(),
            "discriminator": fitted.state.discriminator.state_dict(),
        }
        torch.save(state, directory / STATE_FILE)
        labels = fitted.state.labels
        architecture = {
            "format": FORMAT_VERSION,
            "generator": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "options": self.public_options(),
            "features": self.encoder.feature_names,
            "label_probabilities": None if labels is None else labels.tolist(),
        }
        (directory / ARCHITECTURE_FILE).write_text(json.dumps(architecture, indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path, encoder: Encoder) -> FittedGenerator:
        """Rebuild a fitted generator saved by `save` (for the same schema encoding); it
        carries the plan's spends, not what the original fit recorded."""
        import torch

        directory = Path(directory)
        try:
            architecture = json.loads((directory / ARCHITECTURE_FILE).read_text())
        except FileNotFoundError:
            raise InputError(f"{directory}: no saved {cls.name} ({ARCHITECTURE_FILE})") from None
        if architecture.get("format") != FORMAT_VERSION or architecture["generator"] != cls.name:
            raise InputError(f"{directory}: not a saved {cls.name} of format {FORMAT_VERSION}")
        if architecture["features"] != encoder.feature_names:
            raise InputError(f"{directory}: saved for a different schema encoding")
        options = architecture["options"]
        gan = cls(encoder, architecture["epsilon"], architecture["delta"], **options)
        state = torch.load(directory / STATE_FILE, weights_only=True)
        generator, discriminator = gan.build_networks()
        generator.load_state_dict(state["generator"])
        discriminator.load_state_dict(state["discriminator"])
        labels = architecture["label_probabilities"]
        labels = None if labels is None else np.asarray(labels, dtype=float)
        return FittedGenerator(
            gan, GANState(generator, discriminator, labels), tuple(gan.planned_spends())
        )


def _check_reported(reported: float, target: float) -> None:
    if not (1 - ACCOUNTANT_TOLERANCE) * target <= reported <= target:
        raise RuntimeError(
            f"the DP-SGD accountant reports epsilon {reported:.6g}, not within "
            f"{ACCOUNTANT_TOLERANCE:.0%} below the target {target:.6g}"
        )
