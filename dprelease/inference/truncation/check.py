"""Model check of the normal model on the released values (docs/adaptive-truncation.md 6.6).
Post-processing only: it reads the transcript (l_t, r_t, b_t, y_t, all DP outputs) and
posterior draws, never the data.

Under theta = (mu, sigma), the released y_t = clamp(X, l_t, r_t) + Laplace(b_t) has

    E_t(theta) = l Phi(A) + r (1 - Phi(B)) + mu (Phi(B) - Phi(A)) - sigma (phi(B) - phi(A))
    V_t(theta) = Var(clamp(X, l, r)) + 2 b_t^2,           A = (l - mu)/sigma, B = (r - mu)/sigma

(censored-normal moments). Two statistics of the released values against the fitted model:

- "location": the steps are grouped into K = 5 bins of equal size by the centre (l_t + r_t)/2
  of their interval (a function of public outputs); at the posterior mean theta-hat,
      X^2 = sum_k (sum_{t in k} y_t - E_t(theta-hat))^2 / sum_{t in k} V_t(theta-hat),
  referred to chi^2 with K - 2 degrees of freedom (two parameters fitted; Pearson's test with
  estimated parameters). Thompson sampling places the intervals at different positions of the
  distribution; a normal (mu, sigma) that fits the column predicts each bin's mean release, a
  skewed or lumpy column does not. The posterior predictive version of this statistic
  (Gelman, Meng and Stern 1996) is too conservative to warn: on 5 x 300 releases of a
  lognormal column at epsilon 2 its p-value is 0.02 where the chi^2 reference gives 0.009.
- "spread": S = sum_t (y_t - E_t)^2 / sum_t V_t, a posterior predictive check: p = 2 min(P(S_rep
  >= S), P(S_rep <= S)) over theta ~ posterior (400 draws) and y_rep ~ p(. | theta) at the same
  intervals (a seeded numpy generator, `CHECK_SEED`: post-processing of public values).

The release warns when the Bonferroni-combined p = 2 min(p_location, p_spread) is below
`ALARM`. The check has the power of T noisy releases only: measured on one release each
(N = 1000 rows, epsilon 1), lognormal(3, 0.7) and a years-of-education-like column passed it; a
pass does not prove normality, and the report says what mu estimates if the column is not
normal. Third and fourth moments are not tested: they have no power at epsilon <= 5 (p 0.2-0.6
on lognormal(3, 1), T = 2000, epsilon 5; docs/decisions/0029-posterior-releases.md).
Hand-written: ArviZ's PPC plots need the replicated data
this module produces and compute no p-value for a user statistic.

When the model fails, the posterior still summarises the fitted normal (`estimand_text`): narrow
intervals (epsilon ~ 1) release a noisy bit "is x above m + a* c"; the "det" design asks at
m - a* c and m + a* c (a* ~ 0.75: the column's ~23rd and ~77th percentiles), so mu is about the
midpoint of those two percentiles (near the median for a skewed column, not the mean) and sigma
is their distance / (2 a*). Wide intervals (larger epsilon) release the value winsorised at
m +- A c, and mu is the centre of that middle part.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtr
from scipy.stats import chi2

CHECK_SEED = 20_261_123  # public: the replicates are post-processing of released values
BINS = 5
DRAWS = 400
ALARM = 0.01  # p-value below which the release warns that the model does not fit
WEAK = 0.05  # below it (and above ALARM) the verdict says "some evidence" against the model


@dataclass(frozen=True)
class ModelCheck:
    """The check's result: p-value, discrepancy summary, per-bin table, verdict text."""

    p_value: float  # Bonferroni-combined over `parts`
    parts: dict[str, float]  # p-value of each statistic
    bins: list[dict]
    fits: bool
    verdict: str

    def to_dict(self) -> dict:
        return asdict(self)


def censored_moments(
    lo: np.ndarray, hi: np.ndarray, mu: np.ndarray, sigma: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of clamp(X, l, r) for X ~ N(mu, sigma^2), broadcasting."""
    a, b = (lo - mu) / sigma, (hi - mu) / sigma
    cdf_a, cdf_b = ndtr(a), ndtr(b)
    pdf_a, pdf_b = np.exp(-0.5 * a * a), np.exp(-0.5 * b * b)
    pdf_a, pdf_b = pdf_a / np.sqrt(2 * np.pi), pdf_b / np.sqrt(2 * np.pi)
    inside = cdf_b - cdf_a
    tail_lo, tail_hi = cdf_a, 1.0 - cdf_b
    d_pdf = pdf_b - pdf_a
    mean = lo * tail_lo + hi * tail_hi + mu * inside - sigma * d_pdf
    # E[(mu + sigma Z)^2; A < Z < B] = mu^2 inside - 2 mu sigma d_pdf + sigma^2 (inside - [z phi])
    z_pdf = np.where(np.isfinite(b), b * pdf_b, 0.0) - np.where(np.isfinite(a), a * pdf_a, 0.0)
    second = (
        lo * lo * tail_lo
        + hi * hi * tail_hi
        + mu * mu * inside
        - 2 * mu * sigma * d_pdf
        + sigma * sigma * (inside - z_pdf)
    )
    return mean, np.maximum(second - mean * mean, 0.0)


def _statistics(y: np.ndarray, mean: np.ndarray, var: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """(X^2, S) per row of y, mean, var (shape (S, T)); bins of shape (T,) in 0..K-1."""
    residual = y - mean
    pearson = np.zeros(y.shape[0])
    for k in range(BINS):
        cols = bins == k
        pearson += residual[:, cols].sum(axis=1) ** 2 / var[:, cols].sum(axis=1)
    spread = (residual**2).sum(axis=1) / var.sum(axis=1)
    return np.stack([pearson, spread])


def model_check(
    transcript: pd.DataFrame, mu: np.ndarray, sigma: np.ndarray, a: float, b: float
) -> ModelCheck:
    """The posterior predictive check of the module docstring on S = `DRAWS` draws.

    `mu`, `sigma`: equally weighted posterior draws; [a, b]: the design's base interval (for
    the text saying what mu estimates)."""
    rng = np.random.default_rng(CHECK_SEED)
    pick = rng.choice(len(mu), size=min(DRAWS, len(mu)), replace=False)
    mu_s, sigma_s = np.asarray(mu)[pick, None], np.asarray(sigma)[pick, None]
    lo, hi = transcript.l.to_numpy(), transcript.r.to_numpy()
    scale, y = transcript.noise_scale.to_numpy(), transcript.y.to_numpy()
    centre = 0.5 * (lo + hi)
    order = np.argsort(centre, kind="stable")
    bins = np.empty(len(y), dtype=int)
    bins[order] = np.arange(len(y)) * BINS // len(y)
    mean, var = censored_moments(lo, hi, mu_s, sigma_s)
    var = var + 2.0 * scale**2
    x_rep = rng.normal(mu_s, sigma_s, size=mean.shape)
    y_rep = np.clip(x_rep, lo, hi) + rng.laplace(0.0, scale, size=mean.shape)
    observed = _statistics(np.broadcast_to(y, mean.shape), mean, var, bins)[1]
    replicated = _statistics(y_rep, mean, var, bins)[1]
    upper, lower = np.mean(replicated >= observed), np.mean(replicated <= observed)
    centre_mean, centre_var = censored_moments(lo, hi, mu_s.mean(), sigma_s.mean())
    centre_var = (centre_var + 2 * scale**2)[None, :]
    location = _statistics(y[None, :], centre_mean[None, :], centre_var, bins)[0]
    parts = {
        "location": float(chi2.sf(location[0], BINS - 2)),
        "spread": float(min(1.0, 2 * min(upper, lower))),
    }
    p_value = min(1.0, len(parts) * min(parts.values()))  # Bonferroni over the two
    table = []
    mean_hat = mean.mean(axis=0)
    for k in range(BINS):
        cols = bins == k
        count = int(cols.sum())
        sd = float(np.sqrt(var[:, cols].sum(axis=1).mean())) / count
        table.append(
            {
                "interval_centres": [float(centre[cols].min()), float(centre[cols].max())],
                "steps": count,
                "mean_release": float(y[cols].mean()),
                "predicted": float(mean_hat[cols].mean()),
                "z": float((y[cols].mean() - mean_hat[cols].mean()) / sd),
            }
        )
    fits = p_value >= ALARM
    return ModelCheck(p_value, parts, table, fits, verdict_text(p_value, fits, a, b))


def estimand_text(a: float, b: float) -> str:
    """What mu and sigma estimate when the column is not normal, for the design's base interval
    [a, b] (and its mirror; module docstring). A function of the public design only."""
    centre, width = abs(a + b) / 2, b - a
    if width <= 0.5 and centre >= 0.1:
        low, high = 100 * ndtr(-centre), 100 * ndtr(centre)
        return (
            f"mu estimates about the midpoint of the column's {low:.0f} % and {high:.0f} % "
            f"quantiles (near the median, not the mean, for a skewed column) and sigma their "
            f"distance divided by {2 * centre:.2g}"
        )
    if width <= 0.5:
        return "mu estimates about the column's median and sigma is not identified"
    return (
        f"mu estimates the centre of the column's middle part (values within about "
        f"{width / 2:.2g} sigma of mu; between the median and the mean for a skewed column) and "
        "sigma the spread of that part"
    )


def verdict_text(p_value: float, fits: bool, a: float, b: float) -> str:
    """The plain sentence the report and the manifest carry."""
    meaning = estimand_text(a, b)
    if fits:
        evidence = "Some evidence" if p_value < WEAK else "No evidence"
        return (
            f"{evidence} against the normal model (model-check p = {p_value:.3g}). The check "
            "has only the power of the noisy releases: a skewed or lumpy column often passes it "
            f"at small epsilon or T. If the column is not normal, {meaning}."
        )
    return (
        f"WARNING: the normal model does not describe this column (model-check p = "
        f"{p_value:.3g} < {ALARM}). mu and sigma are then not the column's mean and standard "
        f"deviation: {meaning}."
    )
