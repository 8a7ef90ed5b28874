"""The L2-regularised logistic fit behind the logistic weights, certified to its sensitivity.

Objective (docs/privacy-model.md section 3; `logistic` module docstring), on augmented rows x_i
(||x_i||_2 <= R = sqrt(d + 1)), labels y_i' = +1 (real) / -1 (synthetic):

    J(beta) = (1/n0) sum_i log(1 + exp(-y_i' beta^T x_i)) + (lam/2) ||beta||^2,
    grad J(beta) = -(1/n0) sum_i y_i' sigmoid(-y_i' beta^T x_i) x_i + lam beta.

Exact minimisers (Chaudhuri et al. 2011, Lemma 7): J is lam-strongly convex and one row adds
or removes a term whose gradient has norm <= R/n0, so the exact minimisers beta*, beta'* of
neighbouring datasets satisfy ||beta* - beta'*|| <= R / (n0 lam).

A solver returns an approximate minimiser. Strong convexity bounds its error by its gradient:
for any beta, lam ||beta - beta*||^2 <= (grad J(beta) - grad J(beta*))^T (beta - beta*)
<= ||grad J(beta)|| ||beta - beta*||, so ||beta - beta*|| <= ||grad J(beta)|| / lam.

Certification. A public tolerance g_max is fixed before the data is read; the fit returns
only coefficients with g = ||grad J(beta_hat)|| <= g_max. For the two neighbouring fits,

    ||beta_hat - beta_hat'|| <= ||beta_hat - beta*|| + ||beta* - beta'*|| + ||beta'*- beta_hat'||
                             <= g_max / lam + R / (n0 lam) + g_max / lam,

so the certified sensitivity is Delta_2 = R / (n0 lam) + 2 g_max / lam, and the noise is
calibrated to it in the plan. g is computed on the real rows: it is never published (the
details record g_max, never g) and the noise never depends on it. The default
g_max = GRADIENT_TOLERANCE * R / n0 is a millionth of one row's largest gradient, which adds
2e-6 (relative) to Delta_2.

How g <= g_max is reached: scikit-learn's Newton-Cholesky solver first (its own stopping rule
is on a rescaled gradient that involves the private row count, so it cannot certify anything),
then, while g > g_max, damped Newton steps on J computed here in float64 (hand-written because
scikit-learn exposes no stopping rule on ||grad J||). J is smooth and lam-strongly convex, so
Newton's method converges (quadratically near beta*) and the float64 floor of g, about
1e-16 (rows / n0) R, lies far below g_max. If g still exceeds g_max after `MAX_NEWTON_STEPS`
the fit fails with an error that states no value, after the spend (the budget stays spent).
Such a failure would itself depend on the data (whether a release appears is an output), so
it must stay unreachable, which the convergence argument above ensures in practice; it exists
to fail loudly rather than release coefficients whose sensitivity bound does not hold.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, log_expit

from dprelease.weights.base import augment

SOLVER_TOL = 1e-10
SOLVER_MAX_ITER = 1000
GRADIENT_TOLERANCE = 1e-6  # g_max in units of one row's largest gradient, R / n0
MAX_NEWTON_STEPS = 50
MAX_HALVINGS = 60
SOLVER = "sklearn LogisticRegression newton-cholesky, then Newton steps until ||grad J|| <= g_max"


def gradient_bound(n_features: int, n0: float) -> float:
    """The public tolerance g_max = GRADIENT_TOLERANCE * R / n0, R = sqrt(d + 1)."""
    return GRADIENT_TOLERANCE * math.sqrt(n_features + 1) / n0


def coefficient_sensitivity(
    n_features: int, n0: float, lam: float, g_max: float | None = None
) -> float:
    """Certified Delta_2 = R / (n0 lam) + 2 g_max / lam (see the module docstring);
    g_max defaults to `gradient_bound(n_features, n0)`."""
    g_max = gradient_bound(n_features, n0) if g_max is None else g_max
    return math.sqrt(n_features + 1) / (n0 * lam) + 2.0 * g_max / lam


def objective(x: np.ndarray, signs: np.ndarray, beta: np.ndarray, lam: float, n0: float) -> float:
    """J(beta) on augmented rows `x` with labels `signs` = y' in {-1, +1}."""
    return float(-log_expit(signs * (x @ beta)).sum() / n0 + 0.5 * lam * beta @ beta)


def objective_gradient(
    x: np.ndarray, signs: np.ndarray, beta: np.ndarray, lam: float, n0: float
) -> np.ndarray:
    """grad J(beta) = -(1/n0) sum_i y_i' sigmoid(-y_i' beta^T x_i) x_i + lam beta."""
    return -(x.T @ (signs * expit(-signs * (x @ beta)))) / n0 + lam * beta


def fit_coefficients(
    real: np.ndarray,
    synthetic: np.ndarray,
    lam: float,
    n0: float,
    g_max: float | None = None,
) -> np.ndarray:
    """beta_hat with ||grad J(beta_hat)|| <= g_max (last coordinate: the intercept).

    scikit-learn minimises C sum_i loss_i + ||beta||^2 / 2; with C = 1/(n0 lam) this is J / lam,
    the same minimiser. Its result is then certified (and refined if needed) against g_max,
    by default `gradient_bound(d, n0)`: the sensitivity `coefficient_sensitivity` holds for it.
    """
    from sklearn.linear_model import LogisticRegression

    x = augment(np.vstack([real, synthetic]))
    y = np.concatenate([np.ones(real.shape[0]), np.zeros(synthetic.shape[0])])
    g_max = gradient_bound(real.shape[1], n0) if g_max is None else g_max
    if real.shape[0] == 0:
        # No real rows (an empty table under --on-invalid-rows drop): scikit-learn refuses a
        # single class, but J is still lam-strongly convex, so Newton steps from 0 reach
        # g_max and the same sensitivity bound holds (the release must publish).
        start = np.zeros(x.shape[1])
    else:
        model = LogisticRegression(
            C=1.0 / (n0 * lam),
            fit_intercept=False,
            solver="newton-cholesky",
            tol=SOLVER_TOL,
            max_iter=SOLVER_MAX_ITER,
        )
        # A solver stopped by max_iter is not an error here: the certification below refines
        # it. (ConvergenceWarning is not silenced: warning filters are process-wide.)
        model.fit(x, y)
        start = model.coef_.ravel().astype(float)
    return certified_minimiser(x, 2.0 * y - 1.0, start, lam, n0, g_max)


def certified_minimiser(
    x: np.ndarray, signs: np.ndarray, beta: np.ndarray, lam: float, n0: float, g_max: float
) -> np.ndarray:
    """Damped Newton steps from `beta` until ||grad J|| <= g_max; raise if that fails."""
    identity = np.eye(x.shape[1])
    for _ in range(MAX_NEWTON_STEPS + 1):
        gradient = objective_gradient(x, signs, beta, lam, n0)
        if np.linalg.norm(gradient) <= g_max:
            return beta
        p = expit(x @ beta)
        hessian = (x.T * (p * (1.0 - p))) @ x / n0 + lam * identity
        step = np.linalg.solve(hessian, gradient)
        # Backtracking: never increase J beyond its float64 rounding (near beta* the decrease
        # of a Newton step, about g^2 / lam, is below J's resolution).
        allowed = objective(x, signs, beta, lam, n0)
        allowed += 8.0 * np.finfo(float).eps * max(1.0, abs(allowed))
        for _ in range(MAX_HALVINGS):
            candidate = beta - step
            if objective(x, signs, candidate, lam, n0) <= allowed:
                break
            step = step / 2.0
        else:
            break  # no decrease at float64 resolution: cannot get closer
        beta = candidate
    raise RuntimeError(
        "the logistic-regression fit could not be certified: the gradient norm of J did not "
        "reach the public tolerance g_max, so its sensitivity bound would not hold; nothing "
        "was released from it (its budget stays spent)"
    )
