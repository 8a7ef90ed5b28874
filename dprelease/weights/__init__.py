"""Importance weights for DP synthetic data (Ghalebikesabi et al. 2022).

`estimate(method, real, synthetic, *, epsilon, delta, noise, **options)` returns a
`WeightEstimate` with one unnormalised log weight per synthetic row; `plan(...)` returns the
public calibration before any data is read. Methods:

- none: uniform weights.
- logreg, mlp: non-private classifiers (benchmarks only; the release flow refuses them).
- beta_noised: Ji & Elkan (2013), noise on logistic coefficients, biased (Proposition 1).
- beta_debiased: the same noise, debiased with b(x) (Proposition 2). Default mechanism
  "gaussian", default lam max(0.01, 4 (d + 1) / (n0 epsilon))
  (docs/decisions/0022-logistic-and-neural-weights.md).
- weight_noised: noise on the log weights, E[exp(eta)] = 1 (supplement A.1).
- dp_mlp: MLP trained with relaxed DP-SGD (section 3.4, corrected; Opacus).
- discriminator: logit of a DP GAN discriminator, post-processing (section 3.5).
- calibration (the release default): noisy two-way tables of the target with every column
  (Gaussian/Laplace), raked to the synthetic margins, then exponential tilting of the
  synthetic rows to them, ridge by the discrepancy principle
  (`dprelease.weights.calibration.method`; needs option encoder=; takes the real rows in chunks).

Importing this package does not import torch, opacus or scikit-learn.
"""

from dprelease.weights.api import (
    CHUNKED_METHODS,
    ENCODER_METHODS,
    METHODS,
    NON_PRIVATE_METHODS,
    PRIVATE_METHODS,
    estimate,
    plan,
    require_extra,
)
from dprelease.weights.base import WeightEstimate
from dprelease.weights.free import Discriminator

__all__ = [
    "CHUNKED_METHODS",
    "ENCODER_METHODS",
    "METHODS",
    "NON_PRIVATE_METHODS",
    "PRIVATE_METHODS",
    "Discriminator",
    "WeightEstimate",
    "estimate",
    "plan",
    "require_extra",
]
