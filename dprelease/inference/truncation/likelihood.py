"""Likelihood and Fisher information of one clamped-and-Laplace-noised normal observation.

The released value of one row (Yildirim 2023, eq. (2), (10)) is

    Y = clamp(X, l, r) + Laplace(0, b),   b = (r - l) / epsilon,   X ~ N(mu, sigma^2),

Clamping is censoring: Y has point masses of X at l and r convolved with the Laplace noise
(docs/adaptive-truncation.md section 1.1; the paper's Lemma 1 wording suggests a truncated density,
which is wrong for the mechanism). With Lap(u; b) = exp(-|u|/b) / (2b) and Phi the standard normal
CDF:

    p(y) = Phi((l-mu)/sigma) Lap(y-l) + [1 - Phi((r-mu)/sigma)] Lap(y-r) + I1 + I2
    I1 = 1{y>l} /(2b) exp((mu-y)/b + sigma^2/(2b^2))
             [Phi((min(r,y) - mu - sigma^2/b)/sigma) - Phi((l - mu - sigma^2/b)/sigma)]
    I2 = 1{y<r} /(2b) exp((y-mu)/b + sigma^2/(2b^2))
             [Phi((r - mu + sigma^2/b)/sigma) - Phi((max(l,y) - mu + sigma^2/b)/sigma)]

The paper treats p(y | theta) as intractable; the closed form is the spec's (verified against
quadrature) and is what the IBIS engine and the grid oracle use. Everything is evaluated in
log space: sigma^2/(2b^2) reaches ~35 for epsilon = 1 intervals, so the naive product
overflows, and for sigma >> b the I1, I2 form cancels two terms of size sigma^2/(2b^2), so
there `_log_tilted_mass` uses the scaled complementary error function (`scipy.special.erfcx`)
instead. scipy has no log(Phi(b) - Phi(a)); `_log_ndtr_diff` is hand-written on top of
`scipy.special.log_ndtr`, switching to upper tails when both arguments are positive.

Fisher information (paper eq. (7)) of Y for an interval held fixed (Algorithm 4; spec pitfall
3), at (mu, sigma): F = integral of s(y) s(y)^T p(y) dy with s the score in (mu, sigma).
`fisher_information` computes it by Gauss-Legendre quadrature over y on pieces whose ends are
the kinks l and r of p (the y grid is defined relative to l, r and b, so location-scale
invariance, Theorem 3, holds to quadrature precision); the score is a central finite
difference of the exact log-likelihood (hand-written: scipy offers no derivative of log_ndtr
with respect to its location and scale). `fisher_information_mc` is the paper's Monte Carlo
estimator (eq. (8) with Fisher's identity, Algorithm 4) for comparison.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import erfcx, log_ndtr

SQRT2 = np.sqrt(2.0)
_TAIL_K = 1e3  # |k| = sigma/b above which the tails use erfcx (rounding ~1e-10 nats below)


def laplace_logpdf(u: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """log Lap(u; b) = -|u|/b - log(2b) (b is the Laplace *scale*, not the std)."""
    return -np.abs(u) / scale - np.log(2.0 * scale)


def _log1mexp(d: np.ndarray) -> np.ndarray:
    """log(1 - exp(d)) for d <= 0; -inf at d = 0.

    log(-expm1(d)) is accurate in *absolute* terms for every d <= 0 (for d << 0 it returns 0
    instead of -exp(d), an absolute error below exp(d)); absolute accuracy is what a sum of
    log-likelihood terms needs, and it saves the second branch of Maechler (2012).
    """
    with np.errstate(divide="ignore"):
        return np.log(-np.expm1(d))


def _log_ndtr_diff(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """log(Phi(hi) - Phi(lo)) for hi >= lo; -inf where hi <= lo."""
    upper = lo > 0
    a = np.where(upper, -hi, lo)
    b = np.where(upper, -lo, hi)
    log_b = log_ndtr(b)
    # hi <= lo gives log_a >= log_b, clipped to 0: log(1 - 1) = -inf.
    return log_b + _log1mexp(np.minimum(log_ndtr(a) - log_b, 0.0))


def _log_tilted_mass(
    x1: np.ndarray,
    x2: np.ndarray,
    y: np.ndarray,
    b: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    sign: float,
) -> np.ndarray:
    """log of the integral over x in [x1, x2] of N(x; mu, sigma^2) exp(sign (x - y) / b);
    -inf where x2 <= x1 (the spec's I1 with sign +1, I2 with sign -1, times 2b).

    With z = (x - mu)/sigma and k = sign sigma/b the integrand is phi(z) exp(k (z - z_y)) and
    the integral exp(k^2/2 - k z_y) [Phi(z2 - k) - Phi(z1 - k)] (the spec's form). In a tail
    (z2 <= k or z1 >= k) that form adds k^2/2 to log Phi(z - k) ~ -(z - k)^2/2: two terms
    of size k^2/2 cancel, with a rounding error of about 1e-16 k^2 nats (at sigma = 5.4e7,
    b = 0.007, k = 7.6e9, that form gives one release the log density 8196 against its bound
    log(1/(2b)) = 4.2, which hands such particles all the weight of an SMC). Where
    |k| > `_TAIL_K` and a tail holds, the integral is evaluated instead from the
    antiderivative's tail form exp(sign (x - y)/b - z^2/2) erfcx(|z - k|/sqrt 2)/2
    (Phi(w) = erfcx(-w/sqrt 2) exp(-w^2/2)/2), in which no large terms cancel.
    """
    k = sign * sigma / b
    w1, w2 = (x1 - mu) / sigma - k, (x2 - mu) / sigma - k  # z - k at each end
    value = sign * (mu - y) / b + 0.5 * k * k + _log_ndtr_diff(w1, w2)
    if np.max(sigma) <= _TAIL_K * np.min(b):  # no |k| above _TAIL_K (the usual case)
        return value
    far = (np.abs(k) > _TAIL_K) & ((w2 <= 0) | (w1 >= 0))
    if not np.any(far):
        return value
    value, lower = np.array(value), np.broadcast_to(w2 <= 0, far.shape)[far]
    x1, x2, y, b, w1, w2, k = (
        np.broadcast_to(v, far.shape)[far] for v in (x1, x2, y, b, w1, w2, k)
    )
    # the tail form at each end; where x2 <= x1 the difference below is -inf
    end_1 = sign * (x1 - y) / b - 0.5 * (w1 + k) ** 2 + np.log(0.5 * erfcx(np.abs(w1) / SQRT2))
    end_2 = sign * (x2 - y) / b - 0.5 * (w2 + k) ** 2 + np.log(0.5 * erfcx(np.abs(w2) / SQRT2))
    big, small = np.where(lower, end_2, end_1), np.where(lower, end_1, end_2)
    value[far] = big + _log1mexp(np.minimum(small - big, 0.0))  # A(z2) - A(z1) or A(z1) - A(z2)
    return value


def normal_loglik(
    y: np.ndarray | float,
    lo: np.ndarray | float,
    hi: np.ndarray | float,
    scale: np.ndarray | float,
    mu: np.ndarray | float,
    sigma: np.ndarray | float,
) -> np.ndarray:
    """log p(y | mu, sigma; l, r, b) of the released value (docs/adaptive-truncation.md 1.1),
    broadcasting.

    `scale` is the Laplace scale b used by the release, (r - l)/epsilon. Typical use: y, l, r,
    scale of shape (t,) (a transcript) and mu, sigma of shape (N, 1) (particles) -> (N, t).
    I1 and I2 come from `_log_tilted_mass`, accurate for every sigma/b.
    """
    y, lo, hi, b = (np.asarray(v, dtype=float) for v in (y, lo, hi, scale))
    mu = np.asarray(mu, dtype=float)
    sigma = np.asarray(sigma, dtype=float)
    log_2b = np.log(2.0 * b)
    point_l = log_ndtr((lo - mu) / sigma) - np.abs(y - lo) / b
    point_r = log_ndtr((mu - hi) / sigma) - np.abs(y - hi) / b
    inner_1 = _log_tilted_mass(lo, np.minimum(hi, y), y, b, mu, sigma, 1.0)  # x < y
    inner_2 = _log_tilted_mass(np.maximum(lo, y), hi, y, b, mu, sigma, -1.0)  # x > y
    total = np.logaddexp(np.logaddexp(point_l, point_r), np.logaddexp(inner_1, inner_2))
    return total - log_2b


def _score(y: np.ndarray, lo: float, hi: float, b: float, mu: float, sigma: float) -> np.ndarray:
    """Central-difference score (d/dmu, d/dsigma) of `normal_loglik`; shape (2, len(y))."""
    h = 1e-5 * sigma

    def loglik(m: float, s: float) -> np.ndarray:
        return normal_loglik(y, lo, hi, b, m, s)

    d_mu = (loglik(mu + h, sigma) - loglik(mu - h, sigma)) / (2 * h)
    d_sigma = (loglik(mu, sigma + h) - loglik(mu, sigma - h)) / (2 * h)
    return np.stack([d_mu, d_sigma])


@lru_cache(maxsize=8)
def _legendre(order: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(order)


def _quadrature_nodes(lo: float, hi: float, b: float, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes/weights on [l-40b, l-3b, l, r, r+3b, r+40b] (kinks at l, r)."""
    x, w = _legendre(order)
    edges = [lo - 40 * b, lo - 3 * b, lo, hi, hi + 3 * b, hi + 40 * b]
    nodes, weights = [], []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        half = 0.5 * (hi - lo)
        nodes.append(lo + half * (x + 1.0))
        weights.append(half * w)
    return np.concatenate(nodes), np.concatenate(weights)


def fisher_information(
    lo: float, hi: float, epsilon: float, mu: float = 0.0, sigma: float = 1.0, order: int = 200
) -> np.ndarray:
    """F_{l,r}^eps(mu, sigma) (paper eq. (7)), 2x2 in (mu, sigma), by quadrature over y."""
    if not hi > lo:
        raise ValueError("the interval must have positive width (r > l)")
    b = (hi - lo) / epsilon
    y, w = _quadrature_nodes(lo, hi, b, order)
    density = np.exp(normal_loglik(y, lo, hi, b, mu, sigma))
    score = _score(y, lo, hi, b, mu, sigma)
    return (score * (w * density)) @ score.T


def fisher_information_mc(
    lo: float,
    hi: float,
    epsilon: float,
    rng: np.random.Generator,
    mu: float = 0.0,
    sigma: float = 1.0,
    n_outer: int = 1000,
    n_is: int = 10_000,
    chunk: int = 100,
) -> np.ndarray:
    """The paper's Monte Carlo Fisher information (eq. (8), Algorithm 4).

    y_j ~ p_{l,r}(. | theta) (j = 1..n_outer); for each y_j the score is the self-normalised
    importance-sampling estimate of E[grad log p_theta(X) | y_j] (Fisher's identity) with
    X_i ~ N(mu, sigma^2), i = 1..n_is, weights Lap(y_j - clamp(X_i, l, r); b). The X draws are
    shared across j (as in the author's code). Public computation: `rng` is a plain seeded
    generator.
    """
    b = (hi - lo) / epsilon
    x_obs = rng.normal(mu, sigma, n_outer)
    y = np.clip(x_obs, lo, hi) + rng.laplace(0.0, b, n_outer)
    x = rng.normal(mu, sigma, n_is)
    clamped = np.clip(x, lo, hi)
    grad = np.stack([(x - mu) / sigma**2, (x - mu) ** 2 / sigma**3 - 1.0 / sigma])  # (2, n_is)
    scores = np.empty((n_outer, 2))
    for start in range(0, n_outer, chunk):
        block = y[start : start + chunk, None]
        log_w = -np.abs(block - clamped[None, :]) / b
        w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
        scores[start : start + chunk] = (w @ grad.T) / w.sum(axis=1, keepdims=True)
    return scores.T @ scores / n_outer
