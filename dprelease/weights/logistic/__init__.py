"""Logistic-regression importance weights (paper section 3.3; supplement A.1, B.1-B.4).

- `method`: the weight methods (`beta_noised`, `beta_debiased`, `weight_noised`, `logreg`);
- `solver`: the regularised logistic fit and its certificate;
- `noise`: the noise on the coefficients or the log weights, and debiasing;
- `gate`: flat weights when the noise dominates the fitted slopes;
- `stream`: the same fit by exact Newton passes over the real table's chunks.
"""

from dprelease.weights.logistic.method import BETA_DEBIASED, BETA_NOISED, LOGREG, WEIGHT_NOISED

__all__ = ["BETA_DEBIASED", "BETA_NOISED", "LOGREG", "WEIGHT_NOISED"]
