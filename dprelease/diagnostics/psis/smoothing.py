"""Pareto-smoothed importance sampling (PSIS) for importance-weight diagnostics.

For ``S`` log importance weights ``lw`` (one vector, or one vector per row of a 2-D array)
this module reproduces the PSIS algorithm of

* Vehtari, Simpson, Gelman, Yao and Gabry (2024), "Pareto smoothed importance sampling",
  Journal of Machine Learning Research 25(72):1-58,

as implemented by the reference R packages ``loo`` (``psis()``, ``gpdfit()``; the newest loo
delegates the tail to ``posterior::ps_tail``) and ``posterior`` (``ps_min_ss``,
``ps_khat_threshold``), with the generalized Pareto fit of

* Zhang and Stephens (2009), "A new and efficient estimation method for the generalized
  Pareto distribution", Technometrics 51(3):316-325.

Algorithm, per weight vector (everything in float64):

1. Tail length ``M = ceil(min(0.2 S, 3 sqrt(S)))`` (loo's ``n_pareto`` with ``r_eff = 1``:
   our weights are independent draws). With ``M < 5`` nothing can be fitted: the weights are
   returned unchanged, ``k_hat = inf``, verdict ``"unreliable"`` and ``reason`` says there
   were too few draws (loo also reports ``Inf``).
2. The ``M`` largest log weights form the tail; the cutoff ``u`` is the largest log weight not
   in the tail. The tail is found by partial selection (``np.argpartition``, O(S)); only the
   ``M`` tail values are sorted. For long vectors the selection first keeps only the entries
   at or above a lower bound for ``u`` read off a strided subsample (verified: at least
   ``M + 1`` entries must pass, otherwise the whole vector is used). Ties are broken exactly
   as loo's stable ascending sort (R's ``sort.int(..., index.return = TRUE)``) breaks them:
   among equal values the one with the larger index ranks higher. So when values equal to
   ``u`` straddle the cutoff, the tied entries with the largest indices are in the tail, and
   inside the tail equal values receive increasing smoothed values in index order.
3. A generalized Pareto distribution (GPD) with location 0 is fitted to the exceedances
   ``x = exp(tail - max) - exp(u - max)`` (the shift by ``max(lw)`` avoids overflow) with
   the Zhang-Stephens profile method exactly as loo's ``gpdfit`` (``wip = TRUE``,
   ``min_grid_pts = 30``): grid size ``m = 30 + floor(sqrt(M))``, first-quartile anchor
   ``x* = x[floor(M/4 + 0.5)]`` (1-based, ascending), grid
   ``theta_j = 1/x[M] + (1 - sqrt(m/(j - 1/2))) / 3 / x*``, profile log-likelihood
   ``l_j = M (log(-theta_j/k_j) - k_j - 1)`` with ``k_j = mean(log1p(-theta_j x))``, weights
   ``w = softmax(l)``, ``theta_hat = sum(theta w)``, ``k = mean(log1p(-theta_hat x))``,
   ``sigma = -k/theta_hat`` and the weakly informative prior adjustment
   ``k_hat = (M k + 10 * 0.5) / (M + 10)``.
4. The sorted tail is replaced by ``log(exp(u - max) + q_z) + max`` with the GPD quantiles
   ``q_z = sigma expm1(-k_hat log1p(-p_z)) / k_hat`` at ``p_z = (z - 1/2)/M``, z = 1..M
   (``q = -sigma log1p(-p)`` if ``k_hat == 0``), and every log weight is truncated at the
   largest raw log weight. Log weights outside the tail are returned bit-for-bit unchanged.
5. Diagnostics: ``k_hat``; the sample-size dependent threshold
   ``min(1 - 1/log10(S), 0.7)`` (JMLR 2024 eq. 13, capped at 0.7 as loo does); the PSIS
   effective sample size ``1 / sum(w_i^2)`` of the self-normalised smoothed weights and the
   Kish ESS of the raw weights (same formula); the tail length ``M``; and the minimum sample
   size ``10^(1/(1 - max(0, k_hat)))`` for ``k_hat < 1``, ``inf`` otherwise (JMLR 2024
   eq. 11 as implemented by ``posterior::ps_min_ss``, which clamps negative ``k_hat`` at 0).

Verdict (per weight vector): ``"good"`` if ``k_hat <= min(threshold, 0.5)``, ``"ok"`` if
``k_hat <= threshold``, ``"unreliable"`` otherwise -- in particular whenever ``k_hat`` is
``inf`` because no fit was possible.

Cases where the tail is not smoothed (``reason`` explains each):

* too few draws (``M < 5``): ``k_hat = inf``, verdict ``"unreliable"``;
* constant tail (all ``M`` tail log weights equal up to ``2.2e-16``, posterior's
  ``is_constant``): the weights are bounded and no GPD can be fitted; we report
  ``k_hat = -inf`` and verdict ``"good"``. loo/posterior return ``NA``/``Inf`` with a
  warning instead and ArviZ reports ``inf`` (its tail excludes values tied with the cutoff);
  ``-inf`` is the limit of the GPD shape for a degenerate, bounded tail;
* failed fit: the anchor ``x*`` is 0 (about a quarter or more of the tail tied with the
  cutoff, where loo's fit yields NaN) or the fit is otherwise non-finite or has ``sigma <= 0``:
  ``k_hat = inf`` as in loo, verdict ``"unreliable"``.

Reference versions: the fit is loo's own ``gpdfit`` (the one with ``min_grid_pts = 30``).
``posterior::gpdfit``, which the newest loo calls instead, additionally returns ``NA`` (loo:
``Inf``) whenever ``x* == min(x)``; for ``M = 5`` (S = 21..25) that is every input, since the
anchor is then the minimum. We follow loo's ``gpdfit`` and ArviZ, which fit these cases.

Why hand-written: ArviZ (``arviz.psislw``) pulls in xarray, matplotlib and more, fully sorts
every vector (O(S log S)), and loops in Python over our (n_vectors, S) layout; no small,
well-maintained library provides loo-exact PSIS. This implementation needs only numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dprelease.diagnostics.psis.pareto_fit import gpd_quantiles, gpdfit
from dprelease.diagnostics.psis.tail import select_tail

__all__ = ["PsisResult", "normalised_weights", "psis"]

_MIN_TAIL = 5
_CONSTANT_TOL = float(np.finfo(np.float64).eps)
# Working-set limits, in float64 elements: rows per selection block (bounds the int64 index
# array of np.argpartition) and elements per chunk of the exponentiation pass that computes
# the effective sample sizes (the GPD fit's own limit is in pareto_fit.py).
_BLOCK_ELEMENTS = 1 << 22
_CHUNK_ELEMENTS = 1 << 16
_MIN_CHUNK_WIDTH = 256

_SMOOTHED, _TOO_FEW, _CONSTANT, _FIT_FAILED = 0, 1, 2, 3


@dataclass(frozen=True)
class PsisResult:
    """Result of :func:`psis`.

    For 1-D input the per-vector fields are Python scalars / strings; for 2-D input of shape
    ``(n_vectors, S)`` they are read-only arrays of length ``n_vectors`` (``verdict`` and
    ``reason`` are lists).

    Attributes:
        log_weights: smoothed and truncated, *unnormalised* log weights with the input's
            shape; entries outside the tail are the input values bit-for-bit (read-only).
        k_hat: estimated GPD shape (``inf``: no fit possible; ``-inf``: constant tail).
        threshold: ``min(1 - 1/log10(S), 0.7)`` (``-inf`` for ``S == 1``).
        ess: PSIS effective sample size ``(sum w)^2 / sum w^2`` of the smoothed weights.
        ess_raw: the same (Kish) effective sample size of the raw weights.
        tail_length: ``M = ceil(min(0.2 S, 3 sqrt(S)))``.
        min_sample_size: ``10^(1/(1 - max(0, k_hat)))`` for ``k_hat < 1``, else ``inf``.
        verdict: ``"good"``, ``"ok"`` or ``"unreliable"`` (rule in the module docstring).
        reason: why the tail was not smoothed, or ``None`` when it was.
    """

    log_weights: np.ndarray
    k_hat: float | np.ndarray
    threshold: float
    ess: float | np.ndarray
    ess_raw: float | np.ndarray
    tail_length: int
    min_sample_size: float | np.ndarray
    verdict: str | list[str]
    reason: str | None | list[str | None]

    def to_dict(self) -> dict[str, Any]:
        """Diagnostics as JSON-serialisable plain Python values (log weights excluded).

        Non-finite floats are rendered as the strings ``"inf"``, ``"-inf"`` (JSON has no
        infinity); for 2-D results the per-vector entries are lists.
        """
        return {
            "n_draws": int(self.log_weights.shape[-1]),
            "k_hat": _json_floats(self.k_hat),
            "threshold": _json_floats(self.threshold),
            "ess": _json_floats(self.ess),
            "ess_raw": _json_floats(self.ess_raw),
            "tail_length": int(self.tail_length),
            "min_sample_size": _json_floats(self.min_sample_size),
            "verdict": self.verdict if isinstance(self.verdict, str) else list(self.verdict),
            "reason": self.reason if not isinstance(self.reason, list) else list(self.reason),
        }


def psis(log_weights: ArrayLike) -> PsisResult:
    """Pareto-smooth importance log weights and diagnose their reliability.

    Args:
        log_weights: 1-D array of ``S`` log weights, or 2-D array with one weight vector per
            row (shape ``(n_vectors, S)``). Must be finite; not modified.

    Returns:
        A :class:`PsisResult` (see the module docstring for the exact algorithm).

    Raises:
        ValueError: if the input is empty, not 1-D/2-D, or contains NaN or infinities.
    """
    lw = _validated(log_weights)
    row_max = _finite_row_max(lw)
    rows = lw.reshape(1, -1) if lw.ndim == 1 else lw
    n_vectors, n_draws = rows.shape
    m_tail = math.ceil(min(0.2 * n_draws, 3.0 * math.sqrt(n_draws)))

    out = np.array(rows, dtype=np.float64, order="C", copy=True)
    k_hat = np.empty(n_vectors)
    ess = np.empty(n_vectors)
    ess_raw = np.empty(n_vectors)
    status = np.empty(n_vectors, dtype=np.int8)
    block = max(1, _BLOCK_ELEMENTS // n_draws)
    for start in range(0, n_vectors, block):
        sl = slice(start, start + block)
        k_hat[sl], ess[sl], ess_raw[sl], status[sl] = _smooth_block(
            rows[sl], row_max[sl], out[sl], m_tail
        )

    threshold = -math.inf if n_draws == 1 else min(1.0 - 1.0 / math.log10(n_draws), 0.7)
    with np.errstate(divide="ignore", over="ignore"):  # k -> 1: 10^(1/(1-k)) -> inf
        min_ss = np.where(k_hat < 1.0, 10.0 ** (1.0 / (1.0 - np.maximum(k_hat, 0.0))), np.inf)
    good_limit = min(threshold, 0.5)
    verdicts = [
        "good" if k <= good_limit else "ok" if k <= threshold else "unreliable" for k in k_hat
    ]
    reasons = [_reason(int(s), m_tail, n_draws) for s in status]

    out = out.reshape(lw.shape)
    for arr in (out, k_hat, ess, ess_raw, min_ss):
        arr.flags.writeable = False
    if lw.ndim == 1:
        return PsisResult(
            log_weights=out,
            k_hat=float(k_hat[0]),
            threshold=threshold,
            ess=float(ess[0]),
            ess_raw=float(ess_raw[0]),
            tail_length=m_tail,
            min_sample_size=float(min_ss[0]),
            verdict=verdicts[0],
            reason=reasons[0],
        )
    return PsisResult(
        log_weights=out,
        k_hat=k_hat,
        threshold=threshold,
        ess=ess,
        ess_raw=ess_raw,
        tail_length=m_tail,
        min_sample_size=min_ss,
        verdict=verdicts,
        reason=reasons,
    )


def normalised_weights(log_weights: ArrayLike) -> np.ndarray:
    """Self-normalised weights with mean 1: ``exp(lw - logsumexp(lw)) * S`` along the last axis.

    Accepts the same 1-D / 2-D (one vector per row) finite input as :func:`psis`, e.g.
    ``psis(lw).log_weights``.
    """
    lw = _validated(log_weights)
    row_max = _finite_row_max(lw)
    rows = lw.reshape(1, -1) if lw.ndim == 1 else lw
    w = np.exp(rows - row_max[:, None])
    w *= rows.shape[1] / w.sum(axis=1, keepdims=True)
    return w.reshape(lw.shape)


def _validated(log_weights: ArrayLike) -> np.ndarray:
    lw = np.asarray(log_weights, dtype=np.float64)
    if lw.ndim not in (1, 2):
        raise ValueError(
            "log weights must be a 1-D array or a 2-D array with one weight vector per row; "
            f"got shape {lw.shape}"
        )
    if lw.size == 0:
        raise ValueError(f"log weights must not be empty; got shape {lw.shape}")
    return lw


def _finite_row_max(lw: np.ndarray) -> np.ndarray:
    """Maximum of each weight vector (shape ``(n_vectors,)``) of a 1-D or 2-D array, after
    checking that every entry is finite.

    min and max propagate NaN, so both finite <=> all entries finite (no temporary array).
    """
    row_max = np.atleast_1d(lw.max(axis=-1))
    if np.isfinite(row_max).all() and np.isfinite(lw.min()):
        return row_max
    bad = np.argwhere(~np.isfinite(lw))
    shown = ", ".join(
        f"{tuple(int(i) for i in pos) if lw.ndim == 2 else int(pos[0])} ({lw[tuple(pos)]})"
        for pos in bad[:5]
    )
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    raise ValueError(f"log weights must be finite; found NaN/inf at {shown}{more}")


def _smooth_block(
    lw: np.ndarray, lw_max: np.ndarray, out: np.ndarray, m_tail: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PSIS for the rows of ``lw`` (row maxima ``lw_max``); writes smoothed tails into
    ``out`` (a copy of ``lw``). Returns ``(k_hat, ess, ess_raw, status)`` per row.
    """
    n_rows = lw.shape[0]
    if m_tail < _MIN_TAIL:
        sum1, sum2 = _power_sums(lw, lw_max)
        ess_raw = np.exp(2.0 * np.log(sum1) - np.log(sum2))
        status = np.full(n_rows, _TOO_FEW, dtype=np.int8)
        return np.full(n_rows, np.inf), ess_raw, ess_raw.copy(), status

    rows = np.arange(n_rows)[:, None]
    cutoff, tail_idx = select_tail(lw, m_tail)
    tail = lw[rows, tail_idx]
    by_value_then_index = np.lexsort((tail_idx, tail), axis=1)
    tail_idx = tail_idx[rows, by_value_then_index]
    tail = tail[rows, by_value_then_index]

    # Work relative to the maximum (which is the last tail element, so tail_s[:, -1] == 0).
    tail_s = tail - lw_max[:, None]
    cutoff_s = cutoff - lw_max
    k_hat = np.full(n_rows, np.inf)
    status = np.full(n_rows, _FIT_FAILED, dtype=np.int8)
    constant = -tail_s[:, 0] < _CONSTANT_TOL
    k_hat[constant] = -np.inf
    status[constant] = _CONSTANT

    smoothed_s = tail_s.copy()
    new_tail = tail.copy()
    fit_rows = np.flatnonzero(~constant)
    if fit_rows.size:
        exp_cutoff = np.exp(cutoff_s[fit_rows])
        k, sigma = gpdfit(np.exp(tail_s[fit_rows]) - exp_cutoff[:, None])
        ok = np.isfinite(k) & np.isfinite(sigma) & (sigma > 0.0)
        rows_ok = fit_rows[ok]
        k_hat[rows_ok] = k[ok]
        status[rows_ok] = _SMOOTHED
        q = gpd_quantiles(m_tail, k[ok], sigma[ok])
        smoothed_s[rows_ok] = np.minimum(np.log(exp_cutoff[ok][:, None] + q), 0.0)
        new_tail[rows_ok] = smoothed_s[rows_ok] + lw_max[rows_ok, None]

    # ESS: body (non-tail) sums scaled by exp(-cutoff), so the largest body term is exactly 1,
    # and tail sums in log space, combined with logaddexp: no cancellation, no overflow. The
    # tail entries of the output copy are set to -inf (contributing exp(-inf) = 0) for the
    # body pass, then receive their final values.
    out[rows, tail_idx] = -np.inf
    body1, body2 = _power_sums(out, cutoff)
    out[rows, tail_idx] = new_tail
    log_body1 = np.log(body1) + cutoff_s
    log_body2 = np.log(body2) + 2.0 * cutoff_s
    ess_raw = _ess(log_body1, log_body2, tail_s)
    ess = _ess(log_body1, log_body2, smoothed_s)
    return k_hat, ess, ess_raw, status


def _power_sums(a: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, ``sum exp(a - shift)`` and ``sum exp(2 (a - shift))``, in one chunked pass
    (no full-size temporary)."""
    n_rows, n_draws = a.shape
    width = min(n_draws, max(_CHUNK_ELEMENTS // n_rows, _MIN_CHUNK_WIDTH))
    sum1 = np.zeros(n_rows)
    sum2 = np.zeros(n_rows)
    buf = np.empty((n_rows, width))
    for start in range(0, n_draws, width):
        z = buf[:, : min(width, n_draws - start)]
        np.subtract(a[:, start : start + width], shift[:, None], out=z)
        np.exp(z, out=z)
        sum1 += z.sum(axis=1)
        sum2 += np.vecdot(z, z)
    return sum1, sum2


def _ess(log_body1: np.ndarray, log_body2: np.ndarray, tail_s: np.ndarray) -> np.ndarray:
    """``(sum w)^2 / sum w^2`` from log body sums and the (max-shifted) tail log weights."""
    log_sum1 = np.logaddexp(log_body1, _logsumexp_rows(tail_s))
    log_sum2 = np.logaddexp(log_body2, _logsumexp_rows(2.0 * tail_s))
    return np.exp(2.0 * log_sum1 - log_sum2)


def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    top = a.max(axis=1)
    return top + np.log(np.exp(a - top[:, None]).sum(axis=1))


def _reason(status: int, m_tail: int, n_draws: int) -> str | None:
    if status == _TOO_FEW:
        return (
            f"too few draws: tail length {m_tail} < {_MIN_TAIL} for S = {n_draws} weights, "
            "so no generalized Pareto fit is possible; weights left unsmoothed"
        )
    if status == _CONSTANT:
        return (
            f"all {m_tail} tail log weights are equal: bounded tail, k_hat = -inf; "
            "weights left unsmoothed"
        )
    if status == _FIT_FAILED:
        return (
            "generalized Pareto fit failed (first-quartile tail exceedance is 0, e.g. a quarter "
            "or more of the tail tied with the cutoff); weights left unsmoothed"
        )
    return None


def _json_floats(value: float | np.ndarray) -> float | str | list[float | str]:
    if isinstance(value, np.ndarray):
        return [_json_float(float(v)) for v in value]
    return _json_float(float(value))


def _json_float(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)
