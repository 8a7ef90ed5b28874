"""Utility metrics of weighted synthetic data against held-out real rows (main paper
section 4.2): WST, beta-MSE and downstream performance; and the fidelity study's metrics
(benchmarks/fidelity.py): mean k-way marginal TVD, standardized beta-MSE, and TSTR with
gradient boosting.

Every metric takes the encoded synthetic matrix with its weights and the encoded real test
matrix; weights of 1 give the unweighted metric. These numbers are computed on real data:
they are for evaluation, never for a release (docs/privacy-model.md section 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from dprelease.encoding import Encoder
from dprelease.generators.domain import marginal_tvd

DEFAULT_WST_ROWS = 2000


@dataclass(frozen=True)
class Task:
    """A supervised task on the encoded matrix: target features and the other features."""

    kind: str  # "classification" or "regression"
    # Encoded columns of the target: its one-hot block, or its numeric block (the missing
    # indicator of a nullable column, then the scaled value, which is the label).
    target: slice

    def split(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(features without the target, label) of encoded rows."""
        keep = np.ones(matrix.shape[1], dtype=bool)
        keep[self.target] = False
        block = matrix[:, self.target]
        label = np.argmax(block, axis=1) if self.kind == "classification" else block[:, -1]
        return matrix[:, keep], label


def wasserstein(
    synthetic: np.ndarray,
    weights: np.ndarray,
    real: np.ndarray,
    *,
    max_rows: int = DEFAULT_WST_ROWS,
    rng: np.random.Generator,
) -> float:
    """Exact 1-Wasserstein distance (Euclidean ground cost) between the weighted synthetic
    rows and the real rows, with POT's network-simplex EMD (`ot.emd2`).

    Tables larger than `max_rows` are subsampled uniformly without replacement (the
    synthetic subsample keeps its weights, renormalised): exact EMD costs O(n^3).
    """
    import ot

    synthetic_rows = _subsample(len(synthetic), max_rows, rng)
    real_rows = _subsample(len(real), max_rows, rng)
    a = np.asarray(weights, dtype=float)[synthetic_rows]
    if not a.sum() > 0:
        raise ValueError("the weights of the synthetic subsample sum to zero")
    a = a / a.sum()
    b = np.full(len(real_rows), 1.0 / len(real_rows))
    cost = ot.dist(synthetic[synthetic_rows], real[real_rows], metric="euclidean")
    return float(ot.emd2(a, b, cost, numItermax=10_000_000))


def beta_mse(
    synthetic: np.ndarray,
    weights: np.ndarray,
    real: np.ndarray,
    task: Task,
    *,
    standardize: bool = False,
) -> float:
    """Mean squared difference between the coefficients (intercept included) of the same
    linear model fitted on the weighted synthetic rows and on the real rows: logistic
    regression for a categorical target (binary: one coefficient vector; multiclass: all),
    least squares otherwise (scikit-learn; the logistic model has the default L2 penalty,
    C = 1, so that separable synthetic data still has finite coefficients).

    `standardize`: every feature column (and a numeric label) is first mapped by the real
    rows' affine standardisation x -> (x - mean_real) / sd_real (columns constant on the real
    rows are dropped), the same map on both sides, so the coefficients are per real standard
    deviation and comparable across tables."""
    x_syn, y_syn = task.split(synthetic)
    x_real, y_real = task.split(real)
    if standardize:
        mean, sd = x_real.mean(axis=0), x_real.std(axis=0)
        keep = sd > 0
        x_syn, x_real = ((x[:, keep] - mean[keep]) / sd[keep] for x in (x_syn, x_real))
        if task.kind == "regression":
            y_mean, y_sd = y_real.mean(), y_real.std() or 1.0
            y_syn, y_real = (y_syn - y_mean) / y_sd, (y_real - y_mean) / y_sd
    synthetic_coef = _linear_coefficients(x_syn, y_syn, weights, task)
    real_coef = _linear_coefficients(x_real, y_real, np.ones(len(real)), task)
    return float(np.mean((synthetic_coef - real_coef) ** 2))


def mean_marginal_tvd(
    encoder: Encoder,
    real: np.ndarray,
    synthetic: np.ndarray,
    weights: np.ndarray,
    *,
    order: int,
    bins: int = 10,
    max_groups: int = 200,
    seed: int = 0,
) -> float:
    """Mean TVD of the `order`-way marginals of the weighted synthetic rows against the real
    rows over the public cells (`domain.public_cells` with `bins` equal-width bins of the
    schema bounds; integers with at most `bins` values one cell per value). With more than
    `max_groups` column sets, a uniform sample of `max_groups` of them drawn with the public
    `seed` (the same sets for every method)."""
    groups = list(combinations(range(len(encoder.columns)), order))
    if len(groups) > max_groups:
        chosen = np.random.default_rng(seed).choice(len(groups), max_groups, replace=False)
        groups = [groups[i] for i in np.sort(chosen)]
    tvds = marginal_tvd(encoder, real, synthetic, bins=bins, weights=weights, groups=groups)
    return float(np.mean(list(tvds.values())))


def tstr(
    synthetic: np.ndarray, weights: np.ndarray, real: np.ndarray, task: Task, *, seed: int
) -> float:
    """Train on synthetic, test on real: scikit-learn's histogram gradient boosting (default
    hyperparameters, `sample_weight` = the weights) fitted on the synthetic rows and scored
    on the real rows: ROC-AUC for a categorical target (one-vs-rest macro for more than two
    classes), R^2 for a numeric one."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import r2_score

    x_train, y_train = task.split(synthetic)
    x_test, y_test = task.split(real)
    weights = np.asarray(weights, dtype=float)
    if task.kind == "regression":
        model = HistGradientBoostingRegressor(random_state=seed)
        model.fit(x_train, y_train, sample_weight=weights)
        return float(r2_score(y_test, model.predict(x_test)))
    if len(np.unique(y_train)) < 2 or len(np.unique(y_test)) < 2:
        return float("nan")  # AUC is undefined with a single class
    model = HistGradientBoostingClassifier(random_state=seed)
    model.fit(x_train, y_train, sample_weight=weights)
    return _auc(model, x_test, y_test)


def downstream(
    synthetic: np.ndarray,
    weights: np.ndarray,
    real: np.ndarray,
    task: Task,
    *,
    seed: int,
    hidden: tuple[int, ...] = (32, 32),
) -> float:
    """Train an MLP on the weighted synthetic rows (`sample_weight`), score it on the real
    rows: ROC-AUC (one-vs-rest macro for more than two classes) or MSE."""
    from sklearn.metrics import mean_squared_error
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    x_train, y_train = task.split(synthetic)
    x_test, y_test = task.split(real)
    weights = np.asarray(weights, dtype=float)
    if task.kind == "regression":
        model = MLPRegressor(hidden_layer_sizes=hidden, max_iter=300, random_state=seed)
        model.fit(x_train, y_train, sample_weight=weights)
        return float(mean_squared_error(y_test, model.predict(x_test)))
    if len(np.unique(y_train)) < 2 or len(np.unique(y_test)) < 2:
        return float("nan")  # AUC is undefined with a single class
    model = MLPClassifier(hidden_layer_sizes=hidden, max_iter=300, random_state=seed)
    model.fit(x_train, y_train, sample_weight=weights)
    return _auc(model, x_test, y_test)


def _auc(model, x_test: np.ndarray, y_test: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    scores = model.predict_proba(x_test)
    if scores.shape[1] == 2:
        return float(roc_auc_score(y_test, scores[:, 1]))
    return float(
        roc_auc_score(y_test, scores, multi_class="ovr", labels=model.classes_, average="macro")
    )


def _linear_coefficients(
    features: np.ndarray, label: np.ndarray, weights: np.ndarray, task: Task
) -> np.ndarray:
    from sklearn.linear_model import LinearRegression, LogisticRegression

    if task.kind == "regression":
        model = LinearRegression().fit(features, label, sample_weight=weights)
        return np.concatenate([[model.intercept_], np.ravel(model.coef_)])
    n_classes = task.target.stop - task.target.start
    if len(np.unique(label)) < 2:
        return np.full((n_classes if n_classes > 2 else 1) * (features.shape[1] + 1), np.nan)
    model = LogisticRegression(C=1.0, max_iter=2000).fit(features, label, sample_weight=weights)
    coefficients = np.column_stack([model.intercept_, model.coef_])
    if n_classes > 2 and coefficients.shape[0] < n_classes:
        full = np.zeros((n_classes, coefficients.shape[1]))
        full[model.classes_] = coefficients
        coefficients = full
    return coefficients.ravel()


def _subsample(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    if n <= size:
        return np.arange(n)
    return np.sort(rng.choice(n, size=size, replace=False))
