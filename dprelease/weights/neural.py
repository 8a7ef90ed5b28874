"""Neural-network importance weights (paper section 3.4, Algorithm 1 as corrected).

A small MLP classifies real rows (y = 1) against synthetic rows (y = 0) with the binary
cross-entropy; its logit is the log weight up to the constant log(N_D / N_G), which
self-normalisation removes (paper section 3.2).

`dp_mlp` trains it with relaxed DP-SGD (docs/privacy-model.md section 4): every step Poisson-samples
each row of the combined table with probability q, clips every per-example gradient to norm C
(`max_grad_norm`), sums, adds ONE draw of N(0, sigma^2 C^2 I) and divides by the public expected
lot size L (`batch_size`). The paper's Algorithm 1 adds a separate noise draw per private
example of the lot, which over-noises and is not what the moments accountant it cites assumes.
Synthetic rows are public, so only the real rows' sampling rate matters and the privacy cost is
that of the Poisson-subsampled Gaussian mechanism with (q, sigma, T). sigma is calibrated with
`dpsgd_noise_multiplier` (Opacus' RDP accountant) BEFORE training, and the same accountant
reports the epsilon.

Every quantity of the mechanism is public. q cannot be L / (N_D + N_G) as in the paper: N_D
is private. The default is q = L / (2 N_G) (expected lot size L when the real table has about
N_G rows), capped at 1; `sample_rate` sets q directly. T is `steps`, or ceil(epochs / q).
We therefore do not call Opacus' `PrivacyEngine.make_private`: it derives the sampling rate
(1 / len(data_loader)) and the normalising lot size (len(dataset) * rate) from the size of the
combined dataset, i.e. from N_D. We assemble the same Opacus parts ourselves: `DPDataLoader`
with our q, `GradSampleModule` for per-example gradients, `DPOptimizer` with our sigma, C and L,
and an `RDPAccountant` hooked to the optimizer, which must end with exactly [(sigma, q, T)].

Randomness (docs/privacy-model.md section 9): the Poisson sampling and the gradient noise use torch
generators seeded with 63 bits of OS entropy, never a user seed. Opacus' own secure mode needs
torchcsprng (not a dependency); with `NoiseSource(secure=True)` we turn on `DPOptimizer`'s
`secure_mode`, which sums 2n = 4 Gaussian draws per coordinate against floating-point attacks
(Holohan and Braghin 2021). The noise never comes from the `NoiseSource` itself (not from
OpenDP in secure mode): the details' `noise_source` records the optimizer's actual source.
The user `seed` fixes only the initial weights (and, for the non-private `mlp`, its
minibatch order).

`mlp` is the non-private counterpart (benchmark only): the same network, optimiser and number
of steps T, shuffled minibatches of `batch_size` rows, mean loss, no clipping, no noise.

Defaults (chosen on the toy example of `dprelease.weights.toy`, scored by the total variation
between normalised and true weights): two ReLU hidden layers of 64, Adam, L = 256, 20
expected epochs, C = 1, learning rate 1e-2, the best of 1e-3, 3e-3, 1e-2 and 3e-2
(docs/decisions/0022-logistic-and-neural-weights.md). The paper's hyperparameters (supplement
C.1) are not in our copy.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dprelease.privacy.calibration import (
    DPSGD_ACCOUNTANT,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
)
from dprelease.privacy.dpsgd import private_training
from dprelease.privacy.mechanisms import DESCRIPTION_KEY, PoissonSubsampledGaussian
from dprelease.privacy.noise import NoiseSource
from dprelease.weights.base import (
    MethodSpec,
    Plan,
    PlanRequest,
    check_number,
    require_delta,
    require_epsilon,
)

if TYPE_CHECKING:
    import torch

ACCOUNTANT_TOLERANCE = 0.01  # reported epsilon in [(1 - tol) epsilon, epsilon]


@dataclass(frozen=True)
class MLPSettings:
    """Public configuration shared by `mlp` and `dp_mlp`.

    hidden: widths of the ReLU hidden layers; batch_size: the public expected lot size L;
    sample_rate: q (None: min(1, L / (2 N_G))); steps: T (None: ceil(epochs / q)).
    """

    hidden: tuple[int, ...] = (64, 64)
    learning_rate: float = 1e-2
    batch_size: int = 256
    sample_rate: float | None = None
    epochs: float = 20.0
    steps: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(self.hidden))
        for width in self.hidden:
            check_number("hidden", width, integer=True, high=1e6)
        check_number("learning_rate", self.learning_rate, high=1e3)
        check_number("batch_size", self.batch_size, integer=True, high=1e9)
        check_number("epochs", self.epochs, high=1e6)
        if self.sample_rate is not None:
            check_number("sample_rate", self.sample_rate, high=1.0)
        if self.steps is not None:
            check_number("steps", self.steps, integer=True, high=1e9)
        if self.seed is not None:
            check_number("seed", self.seed, low=-1, integer=True, high=2**63)

    def init_seed(self) -> int:
        """Seed of the initial weights: the user's, or fresh OS entropy."""
        return secrets.randbits(63) if self.seed is None else self.seed

    def schedule(self, n_synthetic: int) -> tuple[float, int]:
        """(q, T) from public quantities only."""
        q = self.sample_rate or min(1.0, self.batch_size / (2 * n_synthetic))
        return q, self.steps or math.ceil(self.epochs / q)


@dataclass(frozen=True)
class DPMLPSettings(MLPSettings):
    """Adds the per-example clipping norm C."""

    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("max_grad_norm", self.max_grad_norm, high=1e6)


@dataclass(frozen=True)
class DPSGDCalibration:
    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float


def _network(n_features: int, hidden: tuple[int, ...], seed: int) -> torch.nn.Module:
    import torch
    from torch import nn

    layers: list[nn.Module] = []
    width = n_features
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def _tensors(real: np.ndarray, synthetic: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    x = torch.as_tensor(np.vstack([real, synthetic]), dtype=torch.float32)
    y = torch.cat([torch.ones(real.shape[0]), torch.zeros(synthetic.shape[0])])
    return x, y


def _train(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    epoch: Callable[[], Iterable[tuple[torch.Tensor, torch.Tensor]]],
    steps: int,
    reduction: str,
) -> None:
    """T optimiser steps of the binary cross-entropy on the logits, over repeated epochs.

    Runs on one intra-op thread (restored afterwards): for networks this small, thread
    synchronisation costs more than it saves, severalfold on a busy machine.
    """
    import torch
    from torch import nn

    loss_fn = nn.BCEWithLogitsLoss(reduction=reduction)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        done = 0
        while done < steps:
            for xb, yb in epoch():
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(xb).squeeze(-1), yb).backward()
                optimizer.step()
                done += 1
                if done == steps:
                    return
    finally:
        torch.set_num_threads(threads)


def _log_weights(net: torch.nn.Module, synthetic: np.ndarray) -> np.ndarray:
    import torch

    net.eval()
    with torch.no_grad():
        logits = net(torch.as_tensor(synthetic, dtype=torch.float32)).squeeze(-1)
    return logits.double().numpy()


def _record(req: PlanRequest, s: MLPSettings, q: float, steps: int) -> dict[str, Any]:
    return {
        "method": req.method,
        "model": "mlp",
        "hidden": list(s.hidden),
        "activation": "relu",
        "optimizer": "adam",
        "learning_rate": float(s.learning_rate),
        "expected_lot_size": int(s.batch_size),
        "sample_rate": float(q),
        "steps": int(steps),
        "seed": s.seed,
    }


def _plan_mlp(req: PlanRequest) -> Plan:
    s: MLPSettings = req.settings(MLPSettings)
    q, steps = s.schedule(req.n_synthetic)
    return Plan({**_record(req, s, q, steps), "non_private": True}, (s, steps))


def _fit_mlp(real, synthetic, plan: Plan, noise: NoiseSource) -> tuple[np.ndarray, dict]:
    import torch

    s, steps = plan.settings
    seed = s.init_seed()
    net = _network(synthetic.shape[1], s.hidden, seed)
    x, y = _tensors(real, synthetic)
    shuffler = torch.Generator().manual_seed(seed)

    def epoch():
        order = torch.randperm(x.shape[0], generator=shuffler)
        for start in range(0, x.shape[0], s.batch_size):
            idx = order[start : start + s.batch_size]
            yield x[idx], y[idx]

    optimizer = torch.optim.Adam(net.parameters(), lr=s.learning_rate)
    _train(net, optimizer, epoch, steps, "mean")
    return _log_weights(net, synthetic), {}


def _plan_dp_mlp(req: PlanRequest) -> Plan:
    s: DPMLPSettings = req.settings(DPMLPSettings)
    epsilon = require_epsilon(req.method, req.epsilon)
    delta = require_delta(req.method, req.delta)
    q, steps = s.schedule(req.n_synthetic)
    sigma = dpsgd_noise_multiplier(epsilon, delta, q, steps)
    reported = dpsgd_epsilon(sigma, delta, q, steps)
    if not (1 - ACCOUNTANT_TOLERANCE) * epsilon <= reported <= epsilon:
        raise RuntimeError("the DP-SGD calibration missed the target epsilon")
    cal = DPSGDCalibration(sigma, q, steps, delta)
    record = {
        **_record(req, s, q, steps),
        "non_private": False,
        "mechanism": "poisson_subsampled_gaussian",
        "neighbouring": "add/remove-one",
        "noise_multiplier": sigma,
        "noise_scale": sigma * s.max_grad_norm,
        "noise_scale_kind": "gaussian_std_of_summed_gradient",
        "max_grad_norm": float(s.max_grad_norm),
        "sensitivity": float(s.max_grad_norm),
        "sensitivity_norm": "l2",
        "accountant": DPSGD_ACCOUNTANT,
        "epsilon_target": epsilon,
        "epsilon_reported": reported,
        DESCRIPTION_KEY: PoissonSubsampledGaussian(sigma, q, steps).to_dict(),
    }
    return Plan(record, (s, cal), reported, delta)


def _fit_dp_mlp(real, synthetic, plan: Plan, noise: NoiseSource) -> tuple[np.ndarray, dict]:
    import torch
    from torch.utils.data import TensorDataset

    s, cal = plan.settings
    net = _network(synthetic.shape[1], s.hidden, s.init_seed())
    training = private_training(
        net,
        TensorDataset(*_tensors(real, synthetic)),
        sample_rate=cal.sample_rate,
        noise_multiplier=cal.noise_multiplier,
        max_grad_norm=s.max_grad_norm,
        expected_batch_size=s.batch_size,
        make_optimizer=lambda parameters: torch.optim.Adam(parameters, lr=s.learning_rate),
        secure=noise.secure,
    )
    _train(training.model, training.optimizer, lambda: training.loader, cal.steps, "sum")
    training.model.remove_hooks()
    opacus_epsilon = training.verify(cal.noise_multiplier, cal.sample_rate, cal.steps, cal.delta)
    if opacus_epsilon > plan.record["epsilon_target"]:
        raise RuntimeError("Opacus' accountant reports more than the target epsilon")
    extra = {
        **training.record(),
        "opacus_epsilon": opacus_epsilon,
        "secure_noise": bool(noise.secure),
    }
    return _log_weights(net, synthetic), extra


MLP = MethodSpec("mlp", "non_private", _plan_mlp, _fit_mlp, extra="torch")
DP_MLP = MethodSpec("dp_mlp", "private", _plan_dp_mlp, _fit_dp_mlp, extra="torch")
