"""The ABCDP distance: biased, unsquared MMD with a bounded kernel (docs/abcdp.md section 2).

Park et al. (ABCDP, section 2.1 and Lemma 4.1) compare the real rows D = {x_i} with a
simulated data set Y = {y_j} by the biased (V-statistic) MMD, not squared:

    rho(D, Y) = || mean_i phi(x_i) - mean_j phi(y_j) ||_H.

dprelease replaces the private normaliser 1/N by a public 1/n_hat from a DP count (docs/abcdp.md
5.3):

    rho~(D, Y) = || (1/n_hat) sum_i phi(x_i) - (1/m) sum_j phi(y_j) ||_H,

whose add/remove-one sensitivity is ||phi(x*)|| / n_hat = sqrt(k(x*, x*)) / n_hat = 1/n_hat for
both kernels here (k(x, x) = 1), by the reverse triangle inequality.

Kernels:
- `gaussian_rff` (default): random Fourier features, phi(x) = sqrt(2/D) [cos(W x); sin(W x)],
  W in R^{(D/2) x d} with rows iid N(0, l^-2 I) (Rahimi and Recht 2007). This is exactly the
  biased MMD of the kernel k^(x, y) = phi(x)^T phi(y), and ||phi(x)|| = 1 for every x. The
  random-phase variant sqrt(2/D) cos(W x + u) has ||phi||^2 <= 2 and is NOT used (pitfall 3).
- `gaussian_exact`: k(x, y) = exp(-||x - y||^2 / (2 l^2)) through Gram-matrix sums, O(N m) per
  draw; only for small tables.

Rows are the project's public encoding ([0, 1] with the schema bounds, categoricals one-hot);
the bandwidth l is public: given, or the median heuristic on SIMULATED data (docs/abcdp.md 5.3).

The simulated side of `gaussian_rff` is evaluated with torch in float32 (imported lazily): its
SIMD sin/cos is ~5x faster than numpy's here, which the toy's 5 * 10^9 trigonometric values
need. The real side (the only one whose rounding could depend on one row) is float64.
Hand-written because no installed library gives batched mean embeddings with a fixed W.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from dprelease.errors import InputError

KERNELS = ("gaussian_rff", "gaussian_exact")
_CHUNK_ELEMENTS = 4_000_000  # floats per chunk of a Gram matrix or a feature block


class RandomFourierFeatures:
    """phi(x) = sqrt(2/D) [cos(W x); sin(W x)], W rows ~ N(0, bandwidth^-2 I); ||phi(x)|| = 1."""

    def __init__(
        self, dim: int, n_features: int, bandwidth: float, rng: np.random.Generator
    ) -> None:
        if n_features < 2 or n_features % 2:
            raise InputError(
                f"the number of random features must be even and >= 2, not {n_features}"
            )
        _check_bandwidth(bandwidth)
        self.n_features = n_features
        self.bandwidth = float(bandwidth)
        self.weights = rng.normal(0.0, 1.0 / bandwidth, size=(n_features // 2, dim))

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """Feature vectors of `rows` (n, d) -> (n, D), float64."""
        angles = np.asarray(rows, dtype=float) @ self.weights.T
        return math.sqrt(2.0 / self.n_features) * np.hstack([np.cos(angles), np.sin(angles)])

    def feature_sum(self, rows: np.ndarray) -> np.ndarray:
        """sum_i phi(x_i) (float64, in chunks): the real side, before dividing by n_hat."""
        step = max(1, _CHUNK_ELEMENTS // self.n_features)
        total = np.zeros(self.n_features)
        for start in range(0, len(rows), step):
            total += self(rows[start : start + step]).sum(axis=0)
        return total

    def mean_embeddings(self, batch: np.ndarray) -> np.ndarray:
        """(1/m) sum_j phi(y_bj) for a batch of simulated sets (B, m, d) -> (B, D)."""
        import torch

        weights = torch.from_numpy(self.weights.astype(np.float32))  # (D/2, d)
        m = batch.shape[1]
        result = np.empty((batch.shape[0], self.n_features))
        half = self.n_features // 2
        step = max(1, _CHUNK_ELEMENTS // (m * half))
        with torch.no_grad():
            for start in range(0, batch.shape[0], step):
                block = torch.from_numpy(batch[start : start + step].astype(np.float32))
                # (B, D/2, m): reductions over the last, contiguous axis; cos in place.
                angles = torch.matmul(weights, block.transpose(1, 2))
                result[start : start + step, half:] = torch.sin(angles).sum(dim=2).numpy()
                result[start : start + step, :half] = angles.cos_().sum(dim=2).numpy()
        return (math.sqrt(2.0 / self.n_features) / m) * result


def mmd_biased(
    real: np.ndarray, simulated: np.ndarray, feature_map: RandomFourierFeatures
) -> float:
    """Biased unsquared MMD || mean phi(real) - mean phi(simulated) || (docs/abcdp.md 2.1)."""
    return float(
        np.linalg.norm(feature_map(real).mean(axis=0) - feature_map(simulated).mean(axis=0))
    )


def gaussian_gram_sum(left: np.ndarray, right: np.ndarray, bandwidth: float) -> float:
    """sum_{i,j} exp(-||l_i - r_j||^2 / (2 bandwidth^2)), in chunks of rows of `left`."""
    left = np.asarray(left, dtype=float)
    right = np.asarray(right, dtype=float)
    right_sq = (right**2).sum(axis=1)
    step = max(1, _CHUNK_ELEMENTS // max(1, len(right)))
    total = 0.0
    for start in range(0, len(left), step):
        block = left[start : start + step]
        sq = (block**2).sum(axis=1)[:, None] + right_sq[None, :] - 2.0 * block @ right.T
        total += float(np.exp(-np.maximum(sq, 0.0) / (2.0 * bandwidth**2)).sum())
    return total


def exact_gaussian_mmd(real: np.ndarray, simulated: np.ndarray, bandwidth: float) -> float:
    """Biased unsquared MMD of the Gaussian kernel from Gram sums (docs/abcdp.md 2.1 formula)."""
    n, m = len(real), len(simulated)
    squared = (
        gaussian_gram_sum(real, real, bandwidth) / n**2
        + gaussian_gram_sum(simulated, simulated, bandwidth) / m**2
        - 2.0 * gaussian_gram_sum(real, simulated, bandwidth) / (n * m)
    )
    return math.sqrt(max(squared, 0.0))


class RealDistance(Protocol):
    """rho~(D, Y_b) for batches of simulated sets; holds the real rows' (secret) summary."""

    def distances(self, batch: np.ndarray) -> np.ndarray: ...


class RFFDistance:
    """rho~ with random Fourier features: || S / n_hat - mu_Y ||, S = sum_i phi(x_i)."""

    def __init__(self, features: RandomFourierFeatures, real: np.ndarray, n_hat: float) -> None:
        self._features = features
        self._real_embedding = features.feature_sum(real) / n_hat

    def distances(self, batch: np.ndarray) -> np.ndarray:
        difference = self._features.mean_embeddings(batch) - self._real_embedding[None, :]
        return np.linalg.norm(difference, axis=1)


class ExactGaussianDistance:
    """rho~ with the Gaussian kernel: sqrt(Kxx/n_hat^2 + Kyy/m^2 - 2 Kxy/(n_hat m))."""

    def __init__(self, bandwidth: float, real: np.ndarray, n_hat: float) -> None:
        _check_bandwidth(bandwidth)
        self._bandwidth = float(bandwidth)
        self._real = np.asarray(real, dtype=float)
        self._n_hat = float(n_hat)
        self._real_term = gaussian_gram_sum(self._real, self._real, bandwidth) / n_hat**2

    def distances(self, batch: np.ndarray) -> np.ndarray:
        m = batch.shape[1]
        values = np.empty(batch.shape[0])
        for index, simulated in enumerate(batch):
            squared = (
                self._real_term
                + gaussian_gram_sum(simulated, simulated, self._bandwidth) / m**2
                - 2.0
                * gaussian_gram_sum(self._real, simulated, self._bandwidth)
                / (self._n_hat * m)
            )
            values[index] = math.sqrt(max(squared, 0.0))
        return values


def make_distance(
    kernel: str,
    bandwidth: float,
    features: RandomFourierFeatures | None,
    real: np.ndarray,
    n_hat: float,
) -> RealDistance:
    """The distance object of a kernel name (docs/abcdp.md 7.2 `kernel`)."""
    if kernel == "gaussian_rff":
        if features is None:
            raise ValueError("gaussian_rff needs its random features")
        return RFFDistance(features, real, n_hat)
    if kernel == "gaussian_exact":
        return ExactGaussianDistance(bandwidth, real, n_hat)
    raise InputError(f"unknown kernel {kernel!r}; choose one of {', '.join(KERNELS)}")


def median_heuristic(rows: np.ndarray, rng: np.random.Generator, max_rows: int = 2000) -> float:
    """Median pairwise Euclidean distance of (simulated, public) rows, on a subsample."""
    rows = np.asarray(rows, dtype=float)
    if len(rows) > max_rows:
        rows = rows[rng.choice(len(rows), size=max_rows, replace=False)]
    squared = (rows**2).sum(axis=1)
    distances = squared[:, None] + squared[None, :] - 2.0 * rows @ rows.T
    upper = np.sqrt(np.maximum(distances[np.triu_indices(len(rows), k=1)], 0.0))
    median = float(np.median(upper)) if upper.size else 0.0
    if not median > 0:
        raise InputError(
            "the median heuristic on simulated data gave bandwidth 0 (the simulator's rows are "
            "all equal); pass --bandwidth"
        )
    return median


def _check_bandwidth(bandwidth: float) -> None:
    if not (bandwidth > 0 and math.isfinite(bandwidth)):
        raise InputError(f"the kernel bandwidth must be a positive number, not {bandwidth!r}")
