"""zCDP <-> (epsilon, delta): OpenDP's conversion, and one ledger entry for mechanisms that
compose in zCDP.

A Gaussian mechanism of L2 sensitivity D and scale s is rho = D^2 / (2 s^2)-zCDP, and rho-zCDP
mechanisms compose by adding their rhos, also when each is chosen after the earlier outputs
(Bun and Steinke 2016, Proposition 1.6 and Lemma 2.3). rho-zCDP is (epsilon, delta)-DP for
the epsilon of OpenDP's `make_zCDP_to_approxDP` + `make_fix_delta` (the conversion of
Canonne, Kamath and Steinke 2020), read from OpenDP's own privacy maps.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.mechanisms import ZCDP, Gaussian, Mechanism

CONVERSION = "OpenDP make_zCDP_to_approxDP + make_fix_delta (Canonne, Kamath and Steinke 2020)"


@functools.lru_cache(maxsize=256)
def zcdp_rho(epsilon: float, delta: float) -> tuple[float, float]:
    """(rho, epsilon'): the largest rho whose OpenDP conversion at delta is epsilon' <= epsilon.

    OpenDP's `binary_search_param` finds the scale s of a sensitivity-1 Gaussian whose
    converted map meets (epsilon, delta); rho = 1 / (2 s^2) and epsilon' are that map's.
    Cached: the search takes 0.13 s here, and a release plans with it twice (its rho, and
    the generator's from its share), a CLI release plans twice (the checks, then the run)."""
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    _check_delta(delta)
    from opendp.mod import binary_search_param

    scale = binary_search_param(
        lambda s: _approx(_gaussian(s), delta), d_in=1.0, d_out=(epsilon, delta), T=float
    )
    spent_epsilon, _ = _approx(_gaussian(scale), delta).map(1.0)
    return float(_gaussian(scale).map(1.0)), float(spent_epsilon)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The epsilon at which rho-zCDP is (epsilon, delta)-DP (OpenDP's conversion)."""
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"rho must be a positive finite number, got {rho!r}")
    _check_delta(delta)
    epsilon, _ = _approx(_gaussian(1.0 / math.sqrt(2.0 * rho)), delta).map(1.0)
    return float(epsilon)


def rho_of(description: Mechanism | None) -> float:
    """The rho of a Gaussian (D^2 / (2 sigma^2)) or zCDP description; ValueError otherwise."""
    if isinstance(description, ZCDP):
        return description.rho
    if isinstance(description, Gaussian):
        return description.l2_sensitivity**2 / (2.0 * description.sigma**2)
    raise ValueError(f"{description} is not accounted in zCDP")


def composed_in_zcdp(spends: Sequence[PlannedSpend], delta: float) -> PlannedSpend:
    """One spend for mechanisms of one release that compose in zCDP: ZCDP(sum of rhos),
    recorded at (zcdp_epsilon(sum, delta), delta), the components kept in its params.

    Each component's own (epsilon_i, delta_i) is valid alone, but their sums are not what the
    composition costs: recorded separately, a basic ledger would charge sum(epsilon_i). Both
    accountants charge this entry exactly what the release is: rho-zCDP."""
    rho = math.fsum(rho_of(spend.description) for spend in spends)
    return PlannedSpend(
        mechanism=" + ".join(spend.mechanism for spend in spends),
        epsilon=zcdp_epsilon(rho, delta),
        delta=delta,
        params={
            "component": "release",
            "composition": "zCDP: the rhos add (Bun and Steinke 2016, Lemma 2.3)",
            "rho": rho,
            "conversion": CONVERSION,
            "components": [
                {
                    "mechanism": spend.mechanism,
                    "epsilon": spend.epsilon,
                    "delta": spend.delta,
                    "rho": rho_of(spend.description),
                    "params": spend.params,
                }
                for spend in spends
            ],
        },
        description=ZCDP(rho),
    )


def _check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise ValueError(
            "zCDP mechanisms (AIM, MST, pgm's Gaussian rounds) are not pure epsilon-DP: give "
            "the release a delta > 0 (rho converts to (epsilon, delta))"
        )


def _gaussian(scale: float) -> Any:
    # The modules themselves, not `opendp.prelude` (which imports OpenDP's scikit-learn
    # extras: 1.1 s of every release's start against 0.09 s here).
    from opendp import domains, measurements, metrics
    from opendp.mod import enable_features

    enable_features("contrib")
    domain, metric = domains.atom_domain(T=float, nan=False), metrics.absolute_distance(T=float)
    return measurements.make_gaussian(domain, metric, scale)


def _approx(gaussian: Any, delta: float) -> Any:
    from opendp import combinators

    return combinators.make_fix_delta(combinators.make_zCDP_to_approxDP(gaussian), delta)
