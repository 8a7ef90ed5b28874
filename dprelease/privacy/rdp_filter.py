"""The Rényi filter: how the `rdp` accountant enforces a dataset's cap (docs/privacy-model.md 7).

Why a filter. Every release is planned after the earlier ones were published, so the cap check
decides adaptively which mechanisms run, with which parameters: it is a privacy filter (Rogers,
Roth, Ullman and Vadhan 2016). A composition bound may enforce the cap only if it is proven
for mechanisms AND privacy parameters chosen adaptively. Basic composition is (Rogers et al.
2016); PLD composition is proven for a sequence fixed in advance only, and the "natural"
filter that composes whole privacy profiles and stops when a target profile is crossed is not
valid in general (Regehr, Hu, Leeman, Manurangsi, Tholoniat and Lécuyer 2026; Tran, Koskela,
Räisä and Honkela 2026 for f-DP). So PLD figures are reported (`dprelease.privacy.pld`) but
never admit a release. The proof in full: docs/explanation/renyi-filter.md; the accountants
compared: docs/decisions/0026-accountants.md.

The theorem used (Feldman and Zrnic 2021, "Individual privacy accounting via a Rényi filter",
their composition theorem for adaptively chosen Rényi parameters): fix ONE order alpha > 1 and
a budget B. If each mechanism M_t, and its Rényi-DP parameter rho_t at alpha, is chosen as a
function of the outputs of M_1 .. M_{t-1}, and on every sequence of outputs
sum_t rho_t <= B, then the whole interaction is (alpha, B)-RDP. The order is fixed: the
theorem says nothing about using, afterwards, whichever order happens to certify.

The filter. A public grid of orders Lambda (`FILTER_ORDERS`, 16 orders from 1.5 to 256; part
of the accountant's definition, never changed for a dataset) and the cap (epsilon, delta),
whose delta is split once and for all into delta_A = delta / 2 (`APPROX_SHARE`) for the
entries known only by (epsilon_i, delta_i > 0) (`ApproxDP`: no Rényi curve) and
delta_R = delta - delta_A for the conversion, itself split over the orders. For each alpha,
B_alpha is the largest Rényi budget that the conversion of Canonne, Kamath and Steinke 2020
(Proposition 12; dp-accounting's `compute_epsilon`) turns into (epsilon, delta_R / |Lambda|)-DP:

    B_alpha = epsilon - log(1 - 1/alpha) + log(alpha delta_R / |Lambda|) / (alpha - 1).

Each entry is charged a curve rho_i (below); an ApproxDP entry is charged randomized
response's curve at epsilon_i plus log(1 / (1 - delta_i)), and its delta_i against delta_A.
A plan is admitted iff, for the WHOLE history plus the plan, the ApproxDP deltas sum to at
most delta_A, and some order alpha has sum_i rho_i(alpha) <= B_alpha (the composed curve is
checked order by order, never a sum of per-entry epsilons) or every entry is pure or ApproxDP
and their epsilons (ApproxDP ones plus log(1 / (1 - delta_i))) sum to at most epsilon (the
order "infinity": pure-DP basic composition, which needs no delta_R). The filter stops as soon
as no order certifies.

Claim: every interaction this filter allows is (epsilon, delta)-DP. Proof. Fix neighbours D, D'.
(1) ApproxDP entries. Each (epsilon_i, delta_i)-DP pair of output laws is a post-processing of
the canonical pair (Kairouz, Oh and Viswanath 2015), which is delta_i times an atom plus
(1 - delta_i) times randomized response: P_i = delta_i U_i + (1 - delta_i) P~_i and
Q_i = delta_i V_i + (1 - delta_i) Q~_i with (P~_i, Q~_i) epsilon_i-DP. Let M~(D) be the
interaction on D with every ApproxDP step drawn from P~_i. The part of M(D) in which no atom
fired has a density at most M~(D)'s, and an atom fires with probability at most
E[sum of delta_i] <= delta_A, so P[M(D) in S] <= P[M~(D) in S] + delta_A. Compare M~(D) with
the real M(D'): at an ApproxDP step Q_i >= (1 - delta_i) Q~_i, so the Rényi divergence of any
order (and the max divergence) of (P~_i, Q_i) is at most that of (P~_i, Q~_i), randomized
response's at epsilon_i, plus log(1 / (1 - delta_i)): exactly the charge. Other steps keep
their curves.
(2) The pair (M~(D), M(D')) is an adaptive composition under the filter whose stepwise
divergences are bounded by the charges. Let F_alpha be the filter that admits a plan iff the
order alpha alone certifies it (with the delta_A condition), and F_inf the pure one. By the
theorem F_alpha is (alpha, B_alpha)-RDP for this pair, hence (epsilon, delta_R / |Lambda|)-DP;
F_inf is (epsilon, 0)-DP (Rogers et al. 2016, basic composition filter). An order's sum only
grows as entries are added (charges >= 0), so an order that certifies the final history
certified every earlier one. Split S by the first order, in a fixed ranking, that certifies a
transcript's final history: S = union of S_alpha (every final history was certified when it
was admitted). On S_alpha our filter and F_alpha decide alike at every step (what we admit
alpha certifies; what we refuse no order certifies, alpha included), so they produce these
transcripts with the same probability:
P[M~(D) in S_alpha] <= e^epsilon P[M(D') in S_alpha] + delta_R / |Lambda|.
Summing over alpha (0 for F_inf) and with (1), P[M(D) in S] <= e^epsilon P[M(D') in S] +
delta_R + delta_A, and the same with D and D' exchanged.
Splitting delta_R over the orders is the price of choosing the order after seeing the
history; checking every order against the whole delta (the natural filter) is not covered by
this argument, and by the results above it is not valid in general. Reserving delta_A costs
little (at a cap of (6, 1e-6): 36 instead of 37 DP-GAN releases, benchmarks/accounting.py).
An entry's charge must not grow once it was admitted (the filter decided with it):
`Ledger.commit` keeps the generic description of an ApproxDP reservation with delta > 0 on an
rdp dataset (a Gaussian refining it has a larger curve at high orders); refining one with
delta 0 to a Laplace or pure description only lowers it.

Rényi curves (add/remove-one; each a valid bound for the mechanism at every order):
- Gaussian(sigma, D): alpha D^2 / (2 sigma^2) (Mironov 2017, Proposition 7); a vector query
  depends only on its L2 shift.
- Laplace(b, D): Mironov 2017, Proposition 6 at epsilon = D / b. The curve is convex in
  epsilon with value 0 at 0, hence superadditive, so a vector shift of L1 norm D is worst
  when it sits in one coordinate: the scalar curve at D / b bounds every vector query.
- PoissonSubsampledGaussian: Opacus' RDP analysis (`compute_rdp`; Mironov, Talwar and Zhang
  2019), the accountant that calibrated DP-SGD (`privacy.calibration`).
- ZCDP(rho): rho alpha (the definition, Bun and Steinke 2016).
- PureEpsilon(epsilon, count), ApproxDP(epsilon, 0): count times the curve of randomized
  response at epsilon, the canonical epsilon-DP pair that every epsilon-DP mechanism is a
  post-processing of (Kairouz, Oh and Viswanath 2015), so the data-processing inequality
  makes it a bound for any of them; it is below both epsilon and alpha epsilon^2 / 2.
  Written here because dp-accounting's randomized-response event assumes replace-one.
- ApproxDP(epsilon, delta > 0) (a mechanism known only by its (epsilon, delta)): that curve
  plus log(1 / (1 - delta)), and delta against delta_A (the proof above).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from dprelease.errors import require
from dprelease.privacy import mechanisms as mech
from dprelease.privacy.accounting import Spend, at_most
from dprelease.privacy.calibration import DPSGD_ACCOUNTING

FILTER_ORDERS = (
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    12.0,
    16.0,
    20.0,
    32.0,
    64.0,
    256.0,
)
APPROX_SHARE = 0.5  # delta_A / delta: the cap's delta reserved for ApproxDP entries


def approx_delta(mechanism: mech.Mechanism) -> float:
    """The delta an entry takes from delta_A (only ApproxDP entries, known by (eps, delta))."""
    return mechanism.delta if isinstance(mechanism, mech.ApproxDP) else 0.0


def pure_epsilon(mechanism: mech.Mechanism) -> float | None:
    """Its charge at the order infinity (max divergence), or None when it has none: the
    pure-DP epsilon, plus log(1 / (1 - delta)) for ApproxDP (module docstring)."""
    if isinstance(mechanism, mech.Laplace):
        return mechanism.epsilon
    if isinstance(mechanism, mech.PureEpsilon):
        return mechanism.epsilon * mechanism.count
    if isinstance(mechanism, mech.ApproxDP):
        return mechanism.epsilon - math.log1p(-mechanism.delta)
    return None


@functools.lru_cache(maxsize=4096)
def rdp_curve(mechanism: mech.Mechanism) -> tuple[float, ...]:
    """The mechanism's charge at every order of `FILTER_ORDERS`: its Rényi DP, or for ApproxDP
    the bound of the module docstring."""
    orders = np.asarray(FILTER_ORDERS)
    if isinstance(mechanism, mech.Gaussian):
        curve = orders * (mechanism.l2_sensitivity / mechanism.sigma) ** 2 / 2
    elif isinstance(mechanism, mech.Laplace):
        curve = np.array([_laplace_rdp(mechanism.epsilon, a) for a in FILTER_ORDERS])
    elif isinstance(mechanism, mech.PoissonSubsampledGaussian):
        require("torch", DPSGD_ACCOUNTING)
        from opacus.accountants.analysis.rdp import compute_rdp

        curve = np.asarray(
            compute_rdp(
                q=mechanism.sample_rate,
                noise_multiplier=mechanism.noise_multiplier,
                steps=mechanism.steps,
                orders=list(FILTER_ORDERS),
            ),
            dtype=float,
        )
    elif isinstance(mechanism, mech.ZCDP):
        curve = mechanism.rho * orders
    elif isinstance(mechanism, mech.PureEpsilon):
        curve = mechanism.count * np.array(
            [_randomized_response_rdp(mechanism.epsilon, a) for a in FILTER_ORDERS]
        )
    elif isinstance(mechanism, mech.ApproxDP):
        curve = np.array([_randomized_response_rdp(mechanism.epsilon, a) for a in FILTER_ORDERS])
        curve = curve - math.log1p(-mechanism.delta)
    else:
        raise ValueError(f"no Rényi curve for {mechanism!r}")
    return tuple(float(x) for x in curve)


def _laplace_rdp(epsilon: float, alpha: float) -> float:
    """Mironov 2017, Proposition 6, in log space:
    (1/(a-1)) log(a/(2a-1) e^{(a-1) eps} + (a-1)/(2a-1) e^{-a eps})."""
    if epsilon == 0:
        return 0.0
    terms = (
        math.log(alpha / (2 * alpha - 1)) + (alpha - 1) * epsilon,
        math.log((alpha - 1) / (2 * alpha - 1)) - alpha * epsilon,
    )
    return float(np.logaddexp(*terms)) / (alpha - 1)


def _randomized_response_rdp(epsilon: float, alpha: float) -> float:
    """D_alpha of randomized response, p = e^eps / (1 + e^eps), q = 1 - p:
    (1/(a-1)) log(p^a q^(1-a) + q^a p^(1-a))."""
    if epsilon == 0:
        return 0.0
    log_p, log_q = -math.log1p(math.exp(-epsilon)), -math.log1p(math.exp(epsilon))
    terms = (
        alpha * log_p + (1 - alpha) * log_q,
        alpha * log_q + (1 - alpha) * log_p,
    )
    return float(np.logaddexp(*terms)) / (alpha - 1)


def conversion_offsets(delta: float) -> np.ndarray:
    """c_alpha with (alpha, r)-RDP => (r + c_alpha, delta_R / |Lambda|)-DP at every order
    (Canonne et al. 2020, Prop. 12), delta_R = (1 - APPROX_SHARE) delta:
    c_alpha = log(1 - 1/a) - log(a delta_R / |Lambda|) / (a - 1). The filter's budget at
    order alpha is B_alpha = epsilon - c_alpha."""
    orders = np.asarray(FILTER_ORDERS)
    share = (1 - APPROX_SHARE) * delta / len(FILTER_ORDERS)
    return np.log1p(-1 / orders) - np.log(orders * share) / (orders - 1)


def filter_spend(
    mechanisms: Sequence[mech.Mechanism], delta: float, counts: Sequence[int] | None = None
) -> Spend:
    """The smallest epsilon at which the filter certifies the history at the cap's `delta`.

    Infinite when the ApproxDP deltas exceed delta_A. Otherwise the smaller of the pure sum
    (every entry pure or ApproxDP; its delta is then the ApproxDP deltas' sum) and the minimum
    over the orders of the composed curve plus the conversion offset (at `delta`). A history
    fits a cap (epsilon, delta) iff this epsilon is at most the cap's: the same condition as
    in the module docstring. `counts[i]` (default 1) says how many times mechanism i occurs:
    every term is additive, so k copies cost one evaluation (`releases_that_fit`).
    """
    counts = [1] * len(mechanisms) if counts is None else counts
    tally = math.fsum(c * approx_delta(m) for m, c in zip(mechanisms, counts, strict=True))
    if not at_most(tally, APPROX_SHARE * delta):
        return Spend(math.inf, delta)
    pure = [p for p in map(pure_epsilon, mechanisms) if p is not None]
    candidates = []
    if len(pure) == len(mechanisms):
        pure_sum = math.fsum(c * p for p, c in zip(pure, counts, strict=True))
        candidates.append(Spend(pure_sum, tally))
    if delta > 0:
        composed = np.zeros(len(FILTER_ORDERS))
        for mechanism, count in zip(mechanisms, counts, strict=True):
            composed += count * np.asarray(rdp_curve(mechanism))
        candidates.append(Spend(float(np.min(composed + conversion_offsets(delta))), delta))
    if not candidates:
        return Spend(math.inf, delta)
    return min(candidates, key=lambda spend: (spend.epsilon, spend.delta))
