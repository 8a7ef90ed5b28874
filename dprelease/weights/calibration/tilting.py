"""Exponential tilting of a weighted sample towards target means, and tempering (for an ESS
floor, and until PSIS calls the weights reliable).

The regularised max-entropy dual used by the calibration weights (`method`):
for feature rows phi_1..phi_N, target means m and noise variances v (V = diag(v)),

    F(b) = log sum_i exp(b^T phi_i) - b^T m + (lam / 2) b^T V b,

convex and smooth; its minimiser gives the tilt p_i(b) proportional to exp(b^T phi_i) with
residual m - mu(b) = lam V b, where mu(b) = sum_i p_i phi_i. The gradient is mu(b) - m + lam V b
and the Hessian sum_i p_i phi_i phi_i^T - mu mu^T + lam V (positive definite for lam > 0).

Solver: damped Newton (Boyd and Vandenberghe 2004, section 9.5) with backtracking on F and
the Newton decrement as stopping rule. The features are sparse (one-hot blocks), so the
Hessian costs O(N k^2) for k active features per row; hand-written because no library
solves this dual with the discrepancy rule below, and L-BFGS takes minutes where Newton takes
seconds (docs/decisions/0019-tilt-solver.md). The Newton systems are solved inexactly
(`LaggedHessian`): conjugate gradients on Hessian-vector products, preconditioned by the
Cholesky factor of the last Hessian formed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import linalg, sparse
from scipy.sparse.linalg import LinearOperator, cg
from scipy.special import logsumexp, softmax

from dprelease.diagnostics.gate import diagnose_weights

LAMBDA_RANGE = (1e-4, 1e6)  # times 1 / sqrt(mean noise variance)
PATH_STEP = math.log(10.0)  # the continuation's step in log lambda: a decade
BISECTION_STEPS = 40
LAMBDA_TOLERANCE = 0.02  # in log lambda: 2%
NEWTON_STEPS = 200
NEWTON_DECREMENT = 1e-12  # stop when lambda(b)^2 / 2 falls below this
CG_STEPS = 30  # preconditioned CG iterations before the Hessian is formed afresh
CG_FORCING = (0.01, 0.1)  # CG's relative residual: min(first, second * sqrt(|gradient|))
ARMIJO = 0.25
PSIS_TEMPER_STEP = 0.8
MIN_TEMPER = 0.05  # below it tied weights keep their k-hat (scale-invariant) and are nearly flat
# Raking after tempering (`held_margins`): log weights -> (raked log weights, growth
# of a certified bound on them).
Rake = Callable[[np.ndarray], tuple[np.ndarray, float]]


def as_sparse(phi: np.ndarray | sparse.sparray) -> sparse.csr_array:
    # scipy-stubs type `sparray` as a marker class that csr_array does not accept
    return phi if isinstance(phi, sparse.csr_array) else sparse.csr_array(phi)  # type: ignore[arg-type]


def chi_square(means: np.ndarray, variance: np.ndarray, fitted: np.ndarray) -> float:
    """sum_j (m_j - fitted_j)^2 / v_j: the residual in units of the noise variance."""
    return float(np.sum((means - fitted) ** 2 / variance))


def distinct_rows(phi: sparse.csr_array) -> tuple[sparse.csr_array, np.ndarray, np.ndarray]:
    """The distinct rows of a 0/1 feature matrix with k ones in every row (one-hot blocks),
    their multiplicities, and the index of every row among them: the tilt of N rows is the
    tilt of the distinct rows with log-multiplicities as offsets, at a fraction of the cost
    when the cells are coarse (N = 1M synthetic rows have a few thousand distinct cells)."""
    n = phi.shape[0]
    per_row = np.diff(phi.indptr)
    if n == 0 or not np.all(per_row == per_row[0]):
        raise ValueError("distinct_rows needs the same number of ones in every row")
    keys = np.sort(phi.indices.reshape(n, per_row[0]), axis=1)
    unique, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    k = unique.shape[1]
    indptr = np.arange(0, unique.size + 1, k)
    data = np.ones(unique.size)
    compact = sparse.csr_array(
        (data, unique.ravel(), indptr), shape=(unique.shape[0], phi.shape[1])
    )
    return compact, counts.astype(float), inverse.ravel()


def tilted_means(
    phi: np.ndarray | sparse.sparray, b: np.ndarray, counts: np.ndarray | None = None
) -> np.ndarray:
    """mu(b) = sum_i p_i(b) phi_i, p_i proportional to c_i exp(b^T phi_i) (c_i = 1 default)."""
    phi = as_sparse(phi)
    return softmax(phi @ b + _offset(counts, phi.shape[0])) @ phi


def _offset(counts: np.ndarray | None, n: int) -> np.ndarray:
    return np.zeros(n) if counts is None else np.log(counts)


def tilt(
    phi: np.ndarray | sparse.sparray,
    means: np.ndarray,
    variance: np.ndarray,
    lam: float,
    start: np.ndarray,
    counts: np.ndarray | None = None,
    newton: LaggedHessian | None = None,
) -> np.ndarray:
    """argmin_b F(b) (module docstring) by damped Newton from `start`; `counts` are the
    multiplicities of the rows of phi (`distinct_rows`), 1 by default; `newton` solves the
    Newton systems (pass one across the tilts of nearby lam to share its preconditioner)."""
    phi = as_sparse(phi)
    newton = newton or LaggedHessian(phi)
    ridge = lam * variance
    offset = _offset(counts, phi.shape[0])

    def objective(b: np.ndarray) -> float:
        return float(logsumexp(phi @ b + offset) - b @ means + 0.5 * np.sum(ridge * b * b))

    b = np.asarray(start, dtype=float).copy()
    value = objective(b)
    for _ in range(NEWTON_STEPS):
        p = softmax(phi @ b + offset)
        mu = p @ phi
        gradient = mu - means + ridge * b
        step = newton.step(p, mu, ridge, gradient)
        decrement = -float(gradient @ step)
        if decrement / 2 <= NEWTON_DECREMENT:
            break
        size = 1.0
        while size > 1e-10:
            candidate = objective(b + size * step)
            if candidate <= value - ARMIJO * size * decrement:
                break
            size /= 2
        else:
            break  # no descent left at machine precision
        b, value = b + size * step, candidate
    return b


class LaggedHessian:
    """Newton steps s with H s = -g for the dual F at the tilt p, mu = p^T phi and ridge
    lam v, where H = phi^T diag(p) phi - mu mu^T + diag(lam v) (module docstring).

    Forming H is the solver's cost: a sparse product of O(N k^2) for k active features per
    row. Instead, conjugate gradients (scipy's `cg`) solve H s = -g from the products
    H u = phi^T (p * (phi u)) - mu (mu^T u) + lam v u, O(N k) each, preconditioned by the
    Cholesky factor of the last H formed (an earlier Newton step's, or an earlier lam's on
    the discrepancy search's path: H changes little between them). H is formed afresh, and
    the step solved directly, when there is no factor yet or CG has not converged within
    `CG_STEPS` iterations. The relative residual asked of CG, min(0.01, 0.1 sqrt|g|),
    shrinks as Newton converges, so its local convergence stays superlinear (inexact Newton,
    Dembo, Eisenstat and Steihaug 1982). On a table of 966 features (93 per row) the whole
    discrepancy search takes 2.8 s of CPU against 24.4 s with a Hessian formed at every step,
    with the same lambda and every log weight within 5e-6
    (docs/decisions/0019-tilt-solver.md)."""

    def __init__(self, phi: sparse.csr_array) -> None:
        self.phi = phi
        self.factor: tuple[np.ndarray, bool] | None = None

    def step(
        self, p: np.ndarray, mu: np.ndarray, ridge: np.ndarray, gradient: np.ndarray
    ) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):  # see `_factor_and_solve`
            if self.factor is not None:
                step, info = cg(
                    self._hessian_operator(p, mu, ridge),
                    -gradient,
                    rtol=min(CG_FORCING[0], CG_FORCING[1] * math.sqrt(np.linalg.norm(gradient))),
                    maxiter=CG_STEPS,
                    M=self._preconditioner(self.factor),
                )
                if info == 0:
                    return step
            hessian = (self.phi.T @ self.phi.multiply(p[:, None])).toarray() - np.outer(mu, mu)
            hessian[np.diag_indices_from(hessian)] += ridge
            return self._factor_and_solve(hessian, -gradient)

    def _hessian_operator(self, p: np.ndarray, mu: np.ndarray, ridge: np.ndarray) -> LinearOperator:
        def product(u: np.ndarray) -> np.ndarray:
            return (p * (self.phi @ u)) @ self.phi - mu * (mu @ u) + ridge * u

        return LinearOperator((mu.size, mu.size), matvec=product, dtype=float)

    def _preconditioner(self, factor: tuple[np.ndarray, bool]) -> LinearOperator:
        size = factor[0].shape[0]
        return LinearOperator(
            (size, size), matvec=lambda r: linalg.cho_solve(factor, r), dtype=float
        )

    def _factor_and_solve(self, hessian: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """Cholesky solve, keeping the factor; an ill-conditioned Hessian (lam near 0) falls
        back to least squares and leaves no factor (the next step forms H again). Called
        with one BLAS thread: the Hessians are a few hundred wide, where threading only adds
        synchronisation: on a 2-core machine under load a 177 x 177 solve takes 106 ms wall
        (53 ms CPU) with OpenBLAS' threads and 0.27 ms with one
        (docs/decisions/0019-tilt-solver.md)."""
        try:
            self.factor = linalg.cho_factor(hessian)
        except linalg.LinAlgError:
            self.factor = None
            return linalg.lstsq(hessian, rhs)[0]
        return linalg.cho_solve(self.factor, rhs)


def discrepancy_lambda(
    phi: np.ndarray | sparse.sparray,
    means: np.ndarray,
    variance: np.ndarray,
    *,
    target: float,
    counts: np.ndarray | None = None,
    held: int = 0,
) -> tuple[float, np.ndarray]:
    """The largest lam with chi2(lam) <= target (chi2 grows with lam), and its tilt.

    The last `held` coordinates are equality constraints (variance 0: no ridge, matched
    exactly at every lam, left out of chi2).

    Morozov's discrepancy principle: stop fitting once the residual is at the noise level.
    At the upper end of `LAMBDA_RANGE` the tilt is essentially flat. If no lam reaches the
    target (moments no tilt can reach, e.g. when the held margins and the noisy targets
    disagree), the target becomes the least chi2 found plus the original target: the noise
    level above the unreachable part (the least chi2 itself drives the tilt to weights no
    tempering makes reliable).

    Continuation from the flat end: lam descends from the top of `LAMBDA_RANGE` a decade at
    a time, each tilt warm-started from the one at the larger lam, until chi2 reaches the
    target; bisection in log lam inside that decade, each step warm-started from the
    bracket's upper end, narrows it to `LAMBDA_TOLERANCE`. Small lam is where the dual is
    nearly unbounded (targets outside the rows' hull), and Newton started far from the
    optimum stalls there: solving the lowest lam first (from 0, then bisection warm-started
    from below) ends in flat weights on some fits this order completes (measurements:
    docs/decisions/0019-tilt-solver.md).
    """
    phi = as_sparse(phi)
    free = slice(0, means.size - held)
    scale = 1.0 / math.sqrt(float(np.mean(variance[free])))  # lam V b ~ sqrt(v) when b ~ 1
    low, high = (math.log(v * scale) for v in LAMBDA_RANGE)

    newton = LaggedHessian(phi)  # one preconditioner along the whole search

    def solve(log_lam: float, start: np.ndarray) -> tuple[np.ndarray, float]:
        b = tilt(phi, means, variance, math.exp(log_lam), start, counts, newton)
        return b, chi_square(means[free], variance[free], tilted_means(phi, b, counts)[free])

    path: list[tuple[float, np.ndarray, float]] = []  # (log lam, tilt, chi2), lam descending
    log_lam, b = high, np.zeros(phi.shape[1])
    while True:
        b, chi2 = solve(log_lam, b)
        path.append((log_lam, b, chi2))
        if chi2 <= target or log_lam <= low:
            break
        log_lam = max(log_lam - PATH_STEP, low)
    if chi2 > target:  # targets no tilt reaches: the noise level on top of what is left
        target += min(point[2] for point in path)
    reached = next(i for i, point in enumerate(path) if point[2] <= target)
    if reached == 0:
        return math.exp(high), path[0][1]
    (upper, b_upper, _), (lower, b_lower, _) = path[reached - 1], path[reached]
    for _ in range(BISECTION_STEPS):
        if upper - lower < LAMBDA_TOLERANCE:
            break
        middle = 0.5 * (lower + upper)
        b, chi2 = solve(middle, b_upper)
        if chi2 <= target:
            lower, b_lower = middle, b
        else:
            upper, b_upper = middle, b
    return math.exp(lower), b_lower


def ess(log_weights: np.ndarray) -> float:
    """Effective sample size (sum w)^2 / sum w^2 of the weights exp(log_weights)."""
    return float(math.exp(2 * logsumexp(log_weights) - logsumexp(2 * log_weights)))


def tempered(
    log_weights: np.ndarray, temper: float, rake: Rake | None = None
) -> tuple[np.ndarray, float]:
    """t * log_weights, raked back to the held margins when `rake` is given (tempering
    within the constrained family), and the growth of a certified bound that raking caused."""
    if rake is None:
        return temper * log_weights, 0.0
    return rake(temper * log_weights)


def temper_for_ess(log_weights: np.ndarray, floor: float, rake: Rake | None = None) -> float:
    """The largest t in [0, 1] with ESS(t * log_weights) >= floor * N (ESS falls with t), the
    tempered weights raked by `rake` when given.

    With `rake`, the search for the raked weights runs below min(1, 4 t0), t0 the answer for
    the unraked weights (50 cheap bisection steps), so weights far beyond the floor (a tilt
    fitted to noise, log weights spanning thousands of nats) are never raked at the large t
    where raking is slowest (unbracketed, 27 s of raking on a 19-column table). Should raking
    raise the ESS enough that the raked answer lies above 4 t0, the result is 4 t0: more
    tempering, weights closer to flat, never less safe."""
    n = log_weights.size
    plain = _bisect(lambda t: ess(t * log_weights) >= floor * n, 0.0, 1.0, 50)
    if rake is None:
        return plain
    # raked: t to high / 4096, each step one raking
    return _bisect(
        lambda t: ess(tempered(log_weights, t, rake)[0]) >= floor * n, 0.0, min(1.0, 4 * plain), 12
    )


def _bisect(admitted: Callable[[float], bool], low: float, high: float, steps: int) -> float:
    """The largest t in [low, high] that `admitted` accepts, to (high - low) / 2^steps,
    `admitted` monotone (true below the answer); `low` when even that is refused."""
    if admitted(high):
        return high
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if admitted(middle):
            low = middle
        else:
            high = middle
    return low


def temper_for_psis(
    log_weights: np.ndarray,
    temper: float,
    log_weight_max: float | None,
    rake: Rake | None = None,
) -> float:
    """The largest t = temper * PSIS_TEMPER_STEP^j (j = 0, 1, ...) at which the release's
    gate (`diagnose_weights`, with the certified bound `log_weight_max` on log_weights, None
    when the method certifies none) does not call t * log_weights unreliable; 0 (flat
    weights) when none above MIN_TEMPER does.

    With `rake`, the tempered weights are raked back to the held margins before the gate
    judges them. Post-processing of DP weights (no privacy cost). Unchanged (`temper`) when
    even flat weights are unreliable (too few synthetic rows for a Pareto fit): tempering
    cannot help there and the release's PSIS gate says why.
    """
    if diagnose_weights(np.zeros(log_weights.size)).verdict == "unreliable":
        return temper
    while temper >= MIN_TEMPER:
        candidate, growth = tempered(log_weights, temper, rake)
        bound = None if log_weight_max is None else temper * log_weight_max + growth
        if diagnose_weights(candidate, 1.0, bound).verdict != "unreliable":
            return temper
        temper *= PSIS_TEMPER_STEP
    return 0.0


def temper_weights(
    log_weights: np.ndarray,
    ess_floor: float,
    log_weight_max: float | None,
    rake: Rake | None = None,
) -> float:
    """How far every weight method tempers its log weights: the largest t meeting the ESS
    floor (`temper_for_ess`), lowered until the PSIS gate accepts t * log_weights
    (`temper_for_psis`); 0 for flat weights. Post-processing of DP weights."""
    return temper_for_psis(
        log_weights, temper_for_ess(log_weights, ess_floor, rake), log_weight_max, rake
    )
