"""Downstream helpers for analysts who receive a release.

- `load_release(directory)`: the synthetic table, its weights and manifest.
- `weighted_mean(values, weights)`: the self-normalised importance-sampling estimate
  mu = sum w_i x_i / sum w_i and its standard error
  se = sqrt(sum_i (w_i / sum w)^2 (x_i - mu)^2) (the delta-method variance of the ratio
  estimator; Owen 2013, "Monte Carlo theory", eq. 9.8).
- `fit_weighted(estimator, release, target)`: fit any scikit-learn estimator on the release's
  encoded features with the release's weights as `sample_weight` (Remark 1 of the main
  paper: the importance-weighted likelihood).
- `glm_effective_sample_size(...)`: the effective sample size of synthetic data for an
  importance-weighted MLE (supplement B.5.1, eq. 16) with the trace summary (Lyddon et al.
  2018): the number n of real rows whose MLE has the same asymptotic variance as the
  IW-MLE on the N_G weighted synthetic rows. With score g_i = grad log f(x_i; theta_hat) and
  Hessian H = (1/N) sum w_i grad^2 log f, the sandwich variances are
  V_IW = H^-1 (1/N sum w_i^2 g_i g_i^T) H^-1 and V_0 = H^-1 (1/N sum w_i g_i g_i^T) H^-1,
  so N_e = N_G tr(V_0) / tr(V_IW), with the weights self-normalised to mean 1 (the
  empirical E_D[.] of the supplement). Uniform weights give N_e = N_G.
All of this post-processes a release: no privacy cost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease.encoding import Encoder
from dprelease.schema import Schema


@dataclass(frozen=True)
class Release:
    """A loaded release: synthetic rows, normalised weights (mean 1) and its manifest."""

    table: pd.DataFrame
    weights: np.ndarray
    manifest: dict

    @property
    def schema(self) -> Schema:
        return Schema.model_validate(self.manifest["schema"])

    def encoded(self) -> tuple[np.ndarray, list[str]]:
        """The synthetic rows in the schema's encoding (numeric in [0, 1], one-hot)."""
        encoder = Encoder(self.schema)
        return encoder.encode(self.table[list(self.schema.columns)]), encoder.feature_names


def load_release(directory: str | Path) -> Release:
    import pyarrow.parquet as pq

    directory = Path(directory)
    frame = pq.read_table(directory / "synthetic.parquet").to_pandas()
    manifest = json.loads((directory / "manifest.json").read_text())
    weights = frame.pop("weight").to_numpy(dtype=float)
    frame.pop("log_weight")
    return Release(frame, weights, manifest)


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """Self-normalised importance-weighted mean and its standard error."""
    values = np.asarray(values, dtype=float)
    weights = np.asarray(weights, dtype=float)
    if values.shape != weights.shape or values.ndim != 1:
        raise ValueError("values and weights must be 1-D arrays of the same length")
    if np.any(weights < 0) or not weights.sum() > 0:
        raise ValueError("weights must be non-negative with a positive sum")
    share = weights / weights.sum()
    mean = float(share @ values)
    return mean, float(np.sqrt(np.sum(share**2 * (values - mean) ** 2)))


def fit_weighted(estimator, release: Release, target: str):  # noqa: ANN001, ANN201
    """Fit `estimator` to predict `target` from the other encoded columns, weighted."""
    if target not in release.table.columns:
        raise ValueError(f"{target!r} is not a column of the release")
    encoder = Encoder(release.schema)
    (column,) = [c for c in encoder.columns if c.name == target]
    matrix, _ = release.encoded()
    keep = np.ones(matrix.shape[1], dtype=bool)
    keep[column.start : column.stop] = False
    labels = release.table[target].to_numpy()
    return estimator.fit(matrix[:, keep], labels, sample_weight=release.weights)


def glm_effective_sample_size(
    features: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    coefficients: np.ndarray,
    family: str = "logistic",
) -> float:
    """Supplement B.5.1 eq. 16 (trace summary) for a logistic or Gaussian GLM.

    `features` include an intercept column if the model has one; `coefficients` are the
    IW-MLE estimates on the weighted synthetic rows.
    """
    x = np.asarray(features, dtype=float)
    w = np.asarray(weights, dtype=float)
    w = w / w.mean()  # E_D[f] ~ mean(w f) needs self-normalised weights (mean 1)
    eta = x @ np.asarray(coefficients, dtype=float)
    if family == "logistic":
        mean = 1.0 / (1.0 + np.exp(-eta))
        curvature = mean * (1.0 - mean)
    elif family == "gaussian":
        mean = eta
        curvature = np.ones_like(eta)
    else:
        raise ValueError("family must be 'logistic' or 'gaussian'")
    scores = x * (np.asarray(labels, dtype=float) - mean)[:, None]
    n = len(x)
    hessian = (x * (w * curvature)[:, None]).T @ x / n
    inverse = np.linalg.pinv(hessian)
    meat_iw = (scores * (w**2)[:, None]).T @ scores / n
    meat_0 = (scores * w[:, None]).T @ scores / n
    v_iw = np.trace(inverse @ meat_iw @ inverse)
    v_0 = np.trace(inverse @ meat_0 @ inverse)
    return float(n * v_0 / v_iw)
