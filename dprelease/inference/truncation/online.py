"""Online DP Bayesian estimation with adaptive truncation (Yildirim 2023;
docs/adaptive-truncation.md).

One row at a time, the value x_t of a numeric column is released as

    y_t = clamp(x_t, l_t, r_t) + Laplace(0, (r_t - l_t) / epsilon)        (paper eq. (2), (10))

where [l_t, r_t] = (m + a* c, m + b* c) intersected with the schema bounds, (m, c) a Thompson
draw from the current posterior of (mu, sigma) (paper section 5.1) and [a*, b*] the public
Fisher-information design (`design`). The posterior of (mu, sigma) of a normal
model is updated after every release by an SMC engine (`engines`). The noise scale
is (r_t - l_t)/epsilon: the author's code draws (r_t - l_t)/(epsilon sqrt 2) (a std-
parametrised sampler), which is not epsilon-DP; that is not copied (docs/adaptive-truncation.md
4.2).

Randomness: `noise` (a `NoiseSource`: OS entropy, or OpenDP when secure) draws the Laplace
noise and the row subset/permutation; `rng` (seedable) drives only Thompson draws and the SMC,
which are post-processing. The privacy analysis under add/remove-one with a private row count
is in `privacy`.

Engines: "ibis" is the default and the only one validated for the normal family. The paper's
"latent_smc" fails the grid-oracle check (docs/adaptive-truncation.md C4) at (epsilon, T, N) = (1,
300, 500): over five seeds its posterior mean of log sigma is 0.11-0.31 posterior sds from the exact
grid posterior (IBIS: 0.01-0.11), beyond the 0.25 tolerance on one of them, and it costs O(N t)
per step (docs/decisions/0029-posterior-releases.md). `check_engine` refuses it for releases;
it stays available to the library.

Time per run (N = 1000 particles, T = 1000 rows, IBIS): dominated by the resample-move steps,
each of which re-evaluates the exact likelihood of all t releases so far for all particles
(O(N t) with six `log_ndtr` calls per term); ~10-20 such events occur over 1000 steps.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field

import numpy as np
import pandas as pd

from dprelease.errors import InputError
from dprelease.inference.truncation.design import (
    TruncationDesign,
    clip_interval,
    design_interval,
)
from dprelease.inference.truncation.engines import ENGINES, NormalPrior, ParticlePosterior
from dprelease.inference.truncation.privacy import TOO_FEW_ROWS, select_rows
from dprelease.privacy.noise import NoiseSource
from dprelease.release.files import TRANSCRIPT_COLUMNS

# Engines that pass the grid-oracle check (docs/adaptive-truncation.md C4) per family; releases
# refuse the others.
VALIDATED_ENGINES: dict[str, tuple[str, ...]] = {"normal": ("ibis",)}


def check_engine(family: str, engine: str) -> None:
    """Refuse (InputError, exit 2) an engine that is unknown or failed the oracle check."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if engine not in VALIDATED_ENGINES.get(family, ()):
        raise InputError(
            f"engine {engine!r} is not validated for the {family} family: it fails the exact "
            "grid-posterior check (docs/adaptive-truncation.md C4); use --engine ibis"
        )


@dataclass(frozen=True)
class Step:
    """One release: the interval, its Laplace scale, the released value, the Thompson draw."""

    t: int
    lower: float  # l_t
    upper: float  # r_t
    noise_scale: float
    y: float
    thompson_mu: float
    thompson_sigma: float


def laplace_release(
    x: np.ndarray | float, lower: float, upper: float, epsilon: float, noise: NoiseSource
) -> np.ndarray:
    """The epsilon-DP release of paper eq. (10): clamp(x, l, r) + Laplace(0, (r - l)/epsilon).

    The clamp has sensitivity r - l, so the Laplace *scale* (r - l)/epsilon makes each
    release epsilon-DP (paper Theorem 2); the author's code draws scale (r-l)/(epsilon sqrt 2).
    """
    return noise.add_laplace(np.clip(x, lower, upper), (upper - lower) / epsilon)


class OnlineTruncatedEstimator:
    """The mechanism and its posterior engine; sees real values one at a time via `release`.

    `fixed_interval` (public, e.g. the schema bounds) replaces the adaptive choice: the
    non-adaptive baseline of the paper's experiments.
    """

    def __init__(
        self,
        design: TruncationDesign,
        prior: NormalPrior,
        bounds: tuple[float, float],
        epsilon: float,
        noise: NoiseSource,
        engine: str = "ibis",
        n_particles: int = 1000,
        rng: np.random.Generator | None = None,
        n_moves: int = 5,
        ess_fraction: float = 0.5,
        fixed_interval: tuple[float, float] | None = None,
    ) -> None:
        if not bounds[0] < bounds[1]:
            raise ValueError("bounds must satisfy lo < hi")
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}")
        self.design, self.prior, self.bounds = design, prior, (float(bounds[0]), float(bounds[1]))
        self.epsilon = float(epsilon)
        self.noise = noise
        self.rng = rng if rng is not None else np.random.default_rng()
        if engine == "ibis":
            self.engine = ENGINES[engine](prior, n_particles, self.rng, n_moves, ess_fraction)
        else:
            self.engine = ENGINES[engine](prior, n_particles, self.rng)
        self.fixed_interval = (
            None if fixed_interval is None else clip_interval(*fixed_interval, self.bounds)
        )
        self._steps: list[Step] = []
        self._trajectory: list[dict[str, float]] = []
        self._draw_next()  # the first interval from a prior draw (public)

    def _draw_next(self) -> None:
        location, scale = self.engine.thompson()
        self._theta = (location, scale)
        if self.fixed_interval is None:
            step = len(self._steps) + 1
            self._interval = design_interval(self.design, location, scale, self.bounds, step)
        else:
            self._interval = self.fixed_interval

    def next_interval(self) -> tuple[float, float]:
        """The public interval [l, r] the next release will use."""
        return self._interval

    def release(self, x: float) -> Step:
        """Release clamp(x, l, r) + Laplace((r - l)/epsilon); update the posterior."""
        lower, upper = self._interval
        scale = (upper - lower) / self.epsilon
        y = float(laplace_release(x, lower, upper, self.epsilon, self.noise))
        step = Step(len(self._steps) + 1, lower, upper, scale, y, *self._theta)
        self._steps.append(step)
        self.engine.update(y, lower, upper, scale)
        self._trajectory.append({"t": step.t, **self.engine.posterior().summary()})
        self._draw_next()
        return step

    def posterior(self) -> ParticlePosterior:
        return self.engine.posterior()

    def transcript(self) -> pd.DataFrame:
        """Every interval, noise scale, released value and Thompson draw (all DP outputs)."""
        rows = [astuple(step) for step in self._steps]
        return pd.DataFrame(rows, columns=list(TRANSCRIPT_COLUMNS))

    def trajectory(self) -> pd.DataFrame:
        """Per step: posterior mean, sd, 5 % / 95 % quantiles of mu and sigma, and the ESS."""
        return pd.DataFrame(self._trajectory)


@dataclass(frozen=True)
class AdaptiveTruncationResult:
    """Everything a run produces; all of it is DP output or its post-processing."""

    transcript: pd.DataFrame
    trajectory: pd.DataFrame
    posterior: ParticlePosterior
    design: TruncationDesign
    prior: NormalPrior
    engine: str
    n_particles: int
    resample_moves: int
    extra: dict = field(default_factory=dict)

    def posterior_draws(self, rng: np.random.Generator, n: int = 4000) -> pd.DataFrame:
        """n equally weighted posterior draws of (mu, sigma)."""
        mu, sigma = self.posterior.draws(rng, n)
        return pd.DataFrame({"mu": mu, "sigma": sigma})


def run_adaptive_truncation(
    values: np.ndarray,
    n_steps: int,
    *,
    design: TruncationDesign,
    prior: NormalPrior,
    bounds: tuple[float, float],
    epsilon: float,
    noise: NoiseSource,
    rng: np.random.Generator | None = None,
    engine: str = "ibis",
    n_particles: int = 1000,
    n_moves: int = 5,
    ess_fraction: float = 0.5,
    fixed_interval: tuple[float, float] | None = None,
    too_few_rows: str = TOO_FEW_ROWS,
) -> AdaptiveTruncationResult:
    """Process T = n_steps rows chosen uniformly at random (in random order) by `noise`.

    `values` are the column's real values, already clipped to the schema bounds. The caller
    must have reserved the spend. Errors carry no count of rows.
    """
    values = np.asarray(values, dtype=float)
    rows = select_rows(len(values), n_steps, noise, too_few_rows)
    estimator = OnlineTruncatedEstimator(
        design,
        prior,
        bounds,
        epsilon,
        noise,
        engine,
        n_particles,
        rng,
        n_moves,
        ess_fraction,
        fixed_interval,
    )
    for x in values[rows]:
        estimator.release(float(x))
    return AdaptiveTruncationResult(
        transcript=estimator.transcript(),
        trajectory=estimator.trajectory(),
        posterior=estimator.posterior(),
        design=design,
        prior=prior,
        engine=engine,
        n_particles=n_particles,
        resample_moves=estimator.engine.resample_moves,
    )
