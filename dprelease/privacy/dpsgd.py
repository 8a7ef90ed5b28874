"""DP-SGD from Opacus' parts, with a public sampling rate and lot size (docs/privacy-model.md
sections 4 and 6; Abadi et al. 2016).

Why not `PrivacyEngine.make_private`: with Poisson sampling it sets the sampling rate to
1 / len(data_loader) and the averaging lot size to len(dataset) * q, both functions of the
private real row count. `private_training` assembles the same Opacus parts with public
quantities instead: `DPDataLoader` (Poisson sampling at the public rate q), a
`GradSampleModule` (per-example gradients), a `DPOptimizer` (clip each per-example gradient to
C, sum, add ONE draw of N(0, sigma^2 C^2 I), divide by the public expected lot size) and an
RDP accountant hooked to every optimizer step, which also counts the private steps.
`verify` then checks that the accountant saw exactly the calibrated mechanism (sigma, q, T)
and returns its epsilon with the same RDP orders the calibration used.

Randomness of the mechanism (Poisson sampling and noise) comes from torch generators seeded
with 63 bits of OS entropy, never a user seed. Opacus' cryptographic `secure_mode` on the
privacy engine needs torchcsprng (not installed); `secure=True` turns on the DPOptimizer's
secure mode (its floating-point-attack mitigation) instead.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dprelease.privacy.calibration import RDP_ORDERS

# torch warns that Opacus' per-sample gradient hooks fire on a network whose inputs (the data)
# need no gradient: expected here. A process-wide filter, because `warnings.catch_warnings`
# is not thread-safe: the evaluation fits in two threads, and one thread's exit from the
# context restored the filters under the other, which then printed the warning every step.
warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)

if TYPE_CHECKING:
    import torch


def dpsgd_noise_source(secure: bool) -> str:
    """The public description of where DP-SGD's noise comes from: Opacus' `DPOptimizer` with a
    torch generator seeded from OS entropy, in its secure mode (2n = 4 Gaussian draws per
    coordinate) when `secure`. Never OpenDP: `NoiseSource(secure=True)` only switches the
    optimizer's mode here."""
    mode = "secure-mode " if secure else ""
    return f"opacus DPOptimizer {mode}gaussian, torch generator seeded from OS entropy"


def entropy_generator() -> torch.Generator:
    """A torch generator seeded from OS entropy (for DP sampling and noise)."""
    import torch

    return torch.Generator().manual_seed(secrets.randbits(63))


@dataclass
class PrivateTraining:
    """The Opacus parts of one DP-SGD run and the count of private steps taken."""

    loader: Any
    model: Any
    optimizer: Any
    accountant: Any
    account: Callable[[Any], None] = field(repr=False)
    steps: int = 0

    def count_step(self, optimizer: Any) -> None:
        """Optimizer step hook: feed the accountant and count the private step."""
        self.account(optimizer)
        self.steps += 1

    def verify(
        self, noise_multiplier: float, sample_rate: float, steps: int, delta: float
    ) -> float:
        """Check the accountant saw exactly (sigma, q, T); return its epsilon at delta."""
        expected = [(noise_multiplier, sample_rate, steps)]
        if self.accountant.history != expected or self.steps != steps:
            raise RuntimeError("Opacus ran a different mechanism than the one calibrated")
        return float(self.accountant.get_epsilon(delta=delta, alphas=list(RDP_ORDERS)))

    def record(self) -> dict:
        """What the run did, for the ledger entry's parameters (with the noise it drew)."""
        return {
            "noise_source": dpsgd_noise_source(bool(self.optimizer.secure_mode)),
            "private_steps": self.steps,
            "opacus_history": [list(entry) for entry in self.accountant.history],
            "opacus_noise_multiplier": float(self.optimizer.noise_multiplier),
            "opacus_max_grad_norm": float(self.optimizer.max_grad_norm),
            "opacus_expected_batch_size": int(self.optimizer.expected_batch_size),
            "opacus_sample_rate": float(self.loader.sample_rate),
        }


@dataclass(frozen=True)
class EmptyPoissonLoader:
    """Poisson sampling at rate q of an empty table: every lot is empty (`rows`: the tensors
    with 0 rows). Opacus' `DPDataLoader` refuses a dataset of length 0 (its sampler needs
    num_samples > 0), but under `--on-invalid-rows drop` an empty table must publish like any
    other (docs/privacy-model.md section 1): the lots are the ones `DPDataLoader` would draw,
    and each step's update is the clipped fake-row gradients plus the same Gaussian noise."""

    sample_rate: float
    rows: tuple

    def __iter__(self) -> Any:
        yield self.rows


def private_training(
    module: torch.nn.Module,
    dataset: torch.utils.data.Dataset,
    *,
    sample_rate: float,
    noise_multiplier: float,
    max_grad_norm: float,
    expected_batch_size: int,
    make_optimizer: Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer],
    secure: bool,
) -> PrivateTraining:
    """Wrap `module` for DP-SGD over `dataset` with public q and lot size (see module doc)."""
    from opacus import GradSampleModule
    from opacus.accountants import RDPAccountant
    from opacus.data_loader import DPDataLoader
    from opacus.optimizers import DPOptimizer

    loader: Any = (
        DPDataLoader(dataset, sample_rate=sample_rate, generator=entropy_generator())
        if len(dataset)
        else EmptyPoissonLoader(sample_rate, dataset[:0])
    )
    model = GradSampleModule(module, loss_reduction="sum")
    optimizer = DPOptimizer(
        make_optimizer(model.parameters()),
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        expected_batch_size=expected_batch_size,
        loss_reduction="mean",
        generator=entropy_generator(),
        secure_mode=secure,
    )
    accountant = RDPAccountant()
    training = PrivateTraining(
        loader, model, optimizer, accountant, accountant.get_optimizer_hook_fn(sample_rate)
    )
    optimizer.attach_step_hook(training.count_step)
    return training
