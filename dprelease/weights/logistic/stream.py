"""The logistic-regression weights with the real rows read chunk by chunk (no subsample).

Same objective, same certification, same noise as `dprelease.weights.logistic.method` (the plan is
the one `weights.plan` computes); only the solver differs. J and its derivatives are sums
over rows (docs/privacy-model.md section 3; `logistic.solver` module docstring):

    J(beta)    = (1/n0) sum_i log(1 + exp(-y_i' beta^T x_i)) + (lam/2) ||beta||^2
    grad J     = -(1/n0) sum_i y_i' sigmoid(-y_i' beta^T x_i) x_i + lam beta
    Hess J     = (1/n0) sum_i p_i (1 - p_i) x_i x_i^T + lam I,   p_i = sigmoid(beta^T x_i)

so one pass over the chunks (and the in-memory synthetic rows) gives all three exactly, in
memory bounded by the chunk and d^2. Damped Newton steps, one pass each (plus one pass per
step halving), run until ||grad J(beta)|| <= g_max on the whole table, the certification of
`logistic.solver`: the certified Delta_2 = R/(n0 lam) + 2 g_max/lam holds for whatever beta
the iteration returns, wherever it started, so the noise calibrated in the plan is exactly
the in-memory path's and the privacy argument is unchanged (no subsampling, no amplification,
nothing calibrated from the private row count).

Warm start (speed only): Newton on the first chunk's real rows, weighted by the number of
real rows over the chunk's (private, never published, used only to start the iteration close
to the minimiser), plus the synthetic rows; the certified pass over the whole table decides.
The number of passes therefore depends on the data, as the in-memory solver's iterations do;
runtime is not part of the release.

Hand-written because no library solver takes a re-readable stream and certifies ||grad J||.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from itertools import chain

import numpy as np
from scipy.special import expit

from dprelease.encoding import Encoder
from dprelease.io.stream import StreamingInput
from dprelease.privacy.noise import NoiseSource
from dprelease.weights import WeightEstimate
from dprelease.weights import plan as plan_weights
from dprelease.weights.base import augment
from dprelease.weights.logistic.noise import gated_log_weights, perturb_log_weights
from dprelease.weights.logistic.solver import (
    MAX_HALVINGS,
    MAX_NEWTON_STEPS,
    objective,
    objective_gradient,
)

STREAMING_WEIGHTS = ("beta_noised", "beta_debiased", "weight_noised")
SYNTHETIC_BLOCK_ROWS = 131_072
WARM_START_TOLERANCE = 1e-8
# Each block: (encoded rows, label sign y' = +1 real / -1 synthetic, row weight).
Block = tuple[np.ndarray, float, float]
Sums = tuple[float, np.ndarray, np.ndarray]


def block_sums(blocks: Iterable[Block], beta: np.ndarray, lam: float, n0: float) -> Sums:
    """(J, grad J, Hess J) at beta over all blocks: one pass."""
    d = beta.shape[0]
    value, gradient, hessian = 0.0, np.zeros(d), np.zeros((d, d))
    for rows, sign, weight in blocks:
        if rows.shape[0] == 0:
            continue
        x = augment(rows)
        signs = np.full(x.shape[0], sign)
        value += weight * objective(x, signs, beta, 0.0, n0)
        gradient += weight * objective_gradient(x, signs, beta, 0.0, n0)
        p = expit(x @ beta)
        hessian += weight * ((x.T * (p * (1.0 - p))) @ x) / n0
    value += 0.5 * lam * beta @ beta
    return value, gradient + lam * beta, hessian + lam * np.eye(d)


def newton(
    evaluate: Callable[[np.ndarray], Sums], beta: np.ndarray, tolerance: float
) -> np.ndarray | None:
    """Damped Newton from beta until ||grad J|| <= tolerance; None if that fails.

    `evaluate(beta)` returns (J, grad, Hess) at beta. A step is halved while it increases J
    beyond float64 rounding (as `logistic.solver.certified_minimiser` does)."""
    value, gradient, hessian = evaluate(beta)
    for _ in range(MAX_NEWTON_STEPS + 1):
        if np.linalg.norm(gradient) <= tolerance:
            return beta
        step = np.linalg.solve(hessian, gradient)
        allowed = value + 8.0 * np.finfo(float).eps * max(1.0, abs(value))
        for _ in range(MAX_HALVINGS):
            candidate = beta - step
            c_value, c_gradient, c_hessian = evaluate(candidate)
            if c_value <= allowed:
                break
            step = step / 2.0
        else:
            return None
        beta, value, gradient, hessian = candidate, c_value, c_gradient, c_hessian
    return None


def fit_coefficients_streaming(
    real_chunks: Callable[[], Generator[np.ndarray, None, None]],
    synthetic: np.ndarray,
    lam: float,
    n0: float,
    g_max: float,
    real_rows: int | None = None,
) -> np.ndarray:
    """beta_hat with ||grad J(beta_hat)|| <= g_max over all real rows; `real_chunks()` starts
    a new pass over the encoded real rows. `real_rows` (private, for the warm start only): the
    number of real rows if a previous pass counted them, else one pass counts them."""

    def synthetic_blocks() -> Iterator[Block]:
        for start in range(0, synthetic.shape[0], SYNTHETIC_BLOCK_ROWS):
            yield synthetic[start : start + SYNTHETIC_BLOCK_ROWS], -1.0, 1.0

    chunks = real_chunks()
    first = next(chunks, None)
    chunks.close()
    if real_rows is None:
        real_rows = sum(chunk.shape[0] for chunk in real_chunks())
    beta = np.zeros(synthetic.shape[1] + 1)
    if first is not None:
        weight = real_rows / first.shape[0]
        start = newton(
            lambda b: block_sums([(first, 1.0, weight), *synthetic_blocks()], b, lam, n0),
            beta,
            WARM_START_TOLERANCE,
        )
        beta = beta if start is None else start

    def whole(b: np.ndarray) -> Sums:
        # A lazy chain: one real chunk in memory at a time (a tuple would hold them all).
        real = ((chunk, 1.0, 1.0) for chunk in real_chunks())
        return block_sums(chain(real, synthetic_blocks()), b, lam, n0)

    certified = newton(whole, beta, g_max)
    if certified is None:
        raise RuntimeError(
            "the logistic-regression fit could not be certified: the gradient norm of J did "
            "not reach the public tolerance g_max, so its sensitivity bound would not hold; "
            "nothing was released from it (its budget stays spent)"
        )
    return certified


def estimate_streaming(
    method: str,
    source: StreamingInput,
    encoder: Encoder,
    synthetic: np.ndarray,
    *,
    epsilon: float | None,
    delta: float | None,
    noise: NoiseSource,
    rows: int | None = None,
    **options,
) -> WeightEstimate:
    """`weights.estimate(method, real, synthetic, ...)` for the logistic methods, with the
    real rows streamed from `source`: the plan is `weights.plan`'s, so the calibration, the
    ledger record and the noise are those of the in-memory path. `rows` (private, in memory
    only): the rows a previous pass kept, for the solver's warm start."""
    if method not in STREAMING_WEIGHTS:
        raise ValueError(f"{method!r} has no streaming fit; use weights.estimate")
    n_synthetic, n_features = synthetic.shape
    record = plan_weights(
        method,
        epsilon,
        delta,
        n_features,
        n_synthetic,
        **options,
        **({"synthetic": synthetic} if method == "weight_noised" else {}),
    )
    beta_hat = fit_coefficients_streaming(
        lambda: source.encoded(encoder),
        synthetic,
        record["lambda"],
        record["n0"],
        record["gradient_norm_bound"],
        rows,
    )
    x_syn = augment(synthetic)
    if record["noise_on"] == "coefficients":
        log_weights, extra = gated_log_weights(
            beta_hat,
            x_syn,
            record["mechanism"],
            record["noise_scale"],
            noise,
            debias=record["debiased"],
            gate=record["noise_gate_enabled"],
        )
    else:
        log_weights, extra = (
            perturb_log_weights(
                x_syn @ beta_hat, record["mechanism"], record["noise_scale"], noise
            ),
            {},
        )
    details = {**record, **extra, "noise_source": noise.kind, "real_rows": "streamed in chunks"}
    return WeightEstimate(log_weights, record["epsilon_spent"], record["delta_spent"], details)
