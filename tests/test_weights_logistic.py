"""Logistic-regression weights: objective, sensitivity, calibration, Proposition 2, refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.special import expit

from dprelease.diagnostics import normalised_weights
from dprelease.errors import InputError
from dprelease.privacy.calibration import gaussian_sigma
from dprelease.weights import estimate, plan
from dprelease.weights.base import augment
from dprelease.weights.logistic.method import (
    coefficient_sensitivity,
    fit_coefficients,
    log_weight_sensitivities,
)
from dprelease.weights.logistic.noise import (
    gated_log_weights,
    log_bias_correction,
    log_mgf,
    perturb_log_weights,
)
from dprelease.weights.toy import triangle_example, triangle_mass

LOGISTIC_PRIVATE = ("beta_noised", "beta_debiased", "weight_noised")


@pytest.fixture(scope="module")
def toy():
    return triangle_example(2000, 2000, np.random.default_rng(7))


def objective_gradient(beta, real, synthetic, lam, n0):
    """Gradient of J(beta) = (1/n0) sum log(1 + exp(-y' beta^T x)) + lam/2 ||beta||^2."""
    x = augment(np.vstack([real, synthetic]))
    y_sign = np.concatenate([np.ones(len(real)), -np.ones(len(synthetic))])
    margins = y_sign * (x @ beta)
    return -(x * (y_sign * expit(-margins))[:, None]).sum(axis=0) / n0 + lam * beta


def test_fit_is_the_minimiser_of_J(toy):
    real, synthetic = toy
    for lam, n0 in ((0.01, 2000.0), (0.3, 500.0)):
        beta = fit_coefficients(real, synthetic, lam, n0)
        assert np.linalg.norm(objective_gradient(beta, real, synthetic, lam, n0)) < 1e-8
        # not trivially zero: the toy's coefficients are far from the origin
        assert np.linalg.norm(beta) > 0.5


def random_fit_problem(
    rng: np.random.Generator, max_d: int, max_log_lam: float
) -> tuple[int, float, float, np.ndarray, np.ndarray]:
    """A random small logistic problem: d, lam in [0.01, 10^max_log_lam], n0, real and
    synthetic rows in [0, 1]^d."""
    d = int(rng.integers(1, max_d + 1))
    lam = float(10.0 ** rng.uniform(-2, max_log_lam))
    n0 = float(rng.integers(5, 40))
    real = rng.uniform(size=(int(rng.integers(3, 30)), d))
    synthetic = rng.uniform(size=(int(rng.integers(3, 30)), d))
    return d, lam, n0, real, synthetic


def test_sensitivity_bound_holds_for_neighbouring_datasets():
    rng = np.random.default_rng(11)
    ratios = []
    for trial in range(120):
        d, lam, n0, real, synthetic = random_fit_problem(rng, max_d=4, max_log_lam=1)
        if trial % 2:  # well separated classes: large coefficients
            real, synthetic = real**3, synthetic**0.3
        extra = np.ones((1, d)) if trial % 3 == 0 else rng.uniform(size=(1, d))
        beta = fit_coefficients(real, synthetic, lam, n0)
        beta_added = fit_coefficients(np.vstack([real, extra]), synthetic, lam, n0)
        ratios.append(np.linalg.norm(beta - beta_added) / coefficient_sensitivity(d, n0, lam))
    assert max(ratios) <= 1.0
    # the pairs exercise the bound (a Delta_2 loose by a factor >= 3 would be caught)
    assert max(ratios) > 0.33


def test_bias_correction_by_hand():
    x = np.array([[0.5, 0.0, 1.0], [1.0, 0.2, 1.0]])
    rho = 0.4
    laplace = [(1 - 0.16 * 0.25) * 1 * (1 - 0.16), (1 - 0.16) * (1 - 0.16 * 0.04) * (1 - 0.16)]
    np.testing.assert_allclose(np.exp(log_bias_correction(x, "laplace", rho)), laplace)
    sigma = 0.5
    gaussian = [math.exp(-0.25 * 1.25 / 2), math.exp(-0.25 * 2.04 / 2)]
    np.testing.assert_allclose(np.exp(log_bias_correction(x, "gaussian", sigma)), gaussian)


def test_weight_noised_sensitivities_by_hand():
    x_aug = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    l1, l2 = log_weight_sensitivities(x_aug, 0.5)
    assert l1 == pytest.approx(0.5 * (math.sqrt(2) + 1))
    # X X^T = [[2, 1], [1, 1]]: largest eigenvalue (3 + sqrt 5) / 2, its root the golden ratio
    assert l2 == pytest.approx(0.5 * (1 + math.sqrt(5)) / 2)


def test_plan_calibration_follows_the_privacy_model():
    d, n_g, lam, eps, delta = 4, 1000, 0.05, 1.5, 1e-6
    # Certified: R / (n0 lam) + 2 g_max / lam with the public g_max = 1e-6 R / n0.
    g_max = 1e-6 * math.sqrt(d + 1) / n_g
    delta_2 = math.sqrt(d + 1) / (n_g * lam) + 2 * g_max / lam
    lap = plan("beta_debiased", eps, None, d, n_g, lam=lam, mechanism="laplace")
    assert lap["sensitivity"] == pytest.approx(math.sqrt(d + 1) * delta_2, rel=1e-12)
    assert lap["noise_scale"] == pytest.approx(math.sqrt(d + 1) * delta_2 / eps, rel=1e-12)
    assert lap["coefficient_l2_sensitivity"] == pytest.approx(delta_2, rel=1e-12)
    assert lap["gradient_norm_bound"] == pytest.approx(g_max, rel=1e-12)
    assert (lap["epsilon_spent"], lap["delta_spent"]) == (eps, 0.0)
    gau = plan("beta_debiased", eps, delta, d, n_g, lam=lam, n0=400)
    assert gau["mechanism"] == "gaussian"
    assert gau["sensitivity"] == pytest.approx(
        math.sqrt(d + 1) / (400 * lam) + 2e-6 * math.sqrt(d + 1) / 400 / lam, rel=1e-12
    )
    assert gau["gradient_norm_bound"] == pytest.approx(1e-6 * math.sqrt(d + 1) / 400)
    assert gau["noise_scale"] == pytest.approx(gaussian_sigma(gau["sensitivity"], eps, delta))
    assert (gau["epsilon_spent"], gau["delta_spent"]) == (eps, delta)


def test_default_lambda_keeps_laplace_defined():
    # lam = max(0.01, 4 c (d + 1) / (n0 epsilon)), c = 1 + 2e-6 (certification) => rho <= 1/4
    p = plan("beta_debiased", 1.0, None, 20, 2000, mechanism="laplace")
    assert p["lambda"] == pytest.approx(4 * (1 + 2e-6) * 21 / 2000, rel=1e-12)
    assert p["noise_scale"] == pytest.approx(0.25, rel=1e-12)
    assert p["weight_variance_finite"] is True
    assert plan("beta_debiased", 1.0, 1e-5, 2, 50_000)["lambda"] == 0.01
    assert plan("logreg", None, None, 20, 100)["lambda"] == 0.01


def unnormalised_estimates(beta_hat, x_aug, h, mechanism, scale, noise, debias, draws):
    """I_N(h | w) = (1/N) sum_i w(x_i) h(x_i), one value per noise draw."""
    return np.array(
        [
            np.mean(
                np.exp(
                    gated_log_weights(
                        beta_hat, x_aug, mechanism, scale, noise, debias=debias, gate=False
                    )[0]
                )
                * h
            )
            for _ in range(draws)
        ]
    )


@pytest.mark.parametrize(("mechanism", "scale"), [("gaussian", 0.5), ("laplace", 0.3)])
def test_proposition_2_debiased_is_unbiased_and_beta_noised_is_not(mechanism, scale, seeded_noise):
    rng = np.random.default_rng(3)
    x_aug = augment(rng.uniform(size=(200, 2)))
    beta_hat = np.array([1.0, -2.0, 0.5])
    h = x_aug[:, 0]
    target = np.mean(np.exp(x_aug @ beta_hat) * h)  # I_N(h | w_hat)
    draws = 4000
    debiased = unnormalised_estimates(
        beta_hat, x_aug, h, mechanism, scale, seeded_noise(1), True, draws
    )
    noised = unnormalised_estimates(
        beta_hat, x_aug, h, mechanism, scale, seeded_noise(1), False, draws
    )
    se_debiased = debiased.std(ddof=1) / math.sqrt(draws)
    se_noised = noised.std(ddof=1) / math.sqrt(draws)
    assert abs(debiased.mean() - target) < 3 * se_debiased
    assert noised.mean() - target > 5 * se_noised
    # supplement B.2.4: debiasing does not increase the variance (same noise draws)
    assert debiased.var(ddof=1) <= noised.var(ddof=1)


@pytest.mark.parametrize(("mechanism", "scale"), [("gaussian", 0.6), ("laplace", 0.3)])
def test_weight_noise_keeps_the_estimate_unbiased(mechanism, scale, seeded_noise):
    rng = np.random.default_rng(5)
    log_w = rng.normal(size=50)
    h = rng.uniform(size=50)
    noise = seeded_noise(2)
    draws = 4000
    estimates = np.array(
        [
            np.mean(np.exp(perturb_log_weights(log_w, mechanism, scale, noise)) * h)
            for _ in range(draws)
        ]
    )
    target = np.mean(np.exp(log_w) * h)
    se = estimates.std(ddof=1) / math.sqrt(draws)
    assert abs(estimates.mean() - target) < 3 * se
    # without the location shift, eta = z: biased upwards by E[exp(z)] = M(1) > 1
    unshifted = estimates * math.exp(log_mgf(mechanism, scale, 1.0))
    assert unshifted.mean() - target > 5 * unshifted.std(ddof=1) / math.sqrt(draws)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_large_epsilon_recovers_logreg(toy, mechanism, seeded_noise):
    real, synthetic = toy
    reference = estimate("logreg", real, synthetic, lam=0.01).weights
    for method, eps in (("beta_noised", 1e4), ("beta_debiased", 1e4), ("weight_noised", 1e6)):
        est = estimate(
            method,
            real,
            synthetic,
            epsilon=eps,
            delta=1e-5,
            lam=0.01,
            mechanism=mechanism,
            noise=seeded_noise(4),
        )
        np.testing.assert_allclose(est.weights, reference, rtol=0.02)
    assert triangle_mass(reference, synthetic) > 0.75


def test_estimate_uses_the_plan_and_publishes_nothing_private(toy, seeded_noise):
    real, synthetic = toy
    for method in LOGISTIC_PRIVATE:
        options = {"epsilon": 1.0, "delta": 1e-5}
        expected = plan(
            method, options["epsilon"], options["delta"], 2, len(synthetic), synthetic=synthetic
        )
        details = [
            estimate(method, r, synthetic, noise=seeded_noise(0), **options).details
            for r in (real, real[:1234])
        ]
        # details depend on public quantities only: the same for different real tables,
        # except the noise gate's statistic, a post-processing of the DP coefficients
        gates = [d.pop("noise_gate", None) for d in details]
        assert details[0] == details[1]
        if method == "beta_debiased":
            assert all(
                set(g) == {"statistic", "degrees_of_freedom", "threshold", "flat"} for g in gates
            )
        assert {k: details[0][k] for k in expected} == expected
        json.dumps(details[0])


def test_budget_is_ignored_by_non_private_logreg(toy):
    real, synthetic = toy
    est = estimate("logreg", real, synthetic, epsilon=1.0, delta=1e-5)
    assert (est.epsilon_spent, est.delta_spent) == (0.0, 0.0)
    assert est.details["non_private"] is True
    assert est.log_weights.shape == (len(synthetic),)


def test_refusals(toy):
    real, synthetic = toy
    for method in LOGISTIC_PRIVATE:
        with pytest.raises(InputError, match="positive finite epsilon"):
            estimate(method, real, synthetic, delta=1e-5)
        with pytest.raises(InputError, match="positive finite epsilon"):
            estimate(method, real, synthetic, epsilon=0.0, delta=1e-5)
        with pytest.raises(InputError, match="delta"):
            estimate(method, real, synthetic, epsilon=1.0, mechanism="gaussian")
        with pytest.raises(InputError, match=r"outside \[0, 1\]"):
            estimate(method, real + 0.5, synthetic, epsilon=1e6, delta=1e-5)
        with pytest.raises(InputError, match="different number of encoded features"):
            estimate(method, real[:, :1], synthetic, epsilon=1e6, delta=1e-5)
        # No real rows (an empty table under --on-invalid-rows drop) is not a refusal: the
        # release must still publish.
        empty = estimate(method, real[:0], synthetic, epsilon=1e6, delta=1e-5)
        assert np.isfinite(empty.log_weights).all()
        with pytest.raises(InputError, match="unexpected keyword"):
            estimate(method, real, synthetic, epsilon=1.0, delta=1e-5, lamda=0.1)
    with pytest.raises(InputError, match="unknown weight method"):
        estimate("betadebiased", real, synthetic, epsilon=1.0)


def test_laplace_refusal_comes_from_the_plan_before_the_data(toy):
    real, synthetic = toy
    message = r"rho = .* >= 1.*increase epsilon, increase lam, or use mechanism='gaussian'"
    with pytest.raises(InputError, match=message):
        plan("beta_debiased", 1.0, None, 2, 2000, lam=0.001, mechanism="laplace")
    # the refusal precedes any look at the real rows (these would be refused too)
    with pytest.raises(InputError, match=message):
        estimate("beta_debiased", real + 5, synthetic, epsilon=1.0, lam=0.001, mechanism="laplace")
    # BetaNoised needs no correction and is not refused
    assert (
        plan("beta_noised", 1.0, None, 2, 2000, lam=0.001, mechanism="laplace")["noise_scale"] > 1
    )


def test_weight_noised_laplace_refusal(toy):
    real, synthetic = toy
    with pytest.raises(InputError, match=r"log-weight noise scale s = .* >= 1"):
        estimate("weight_noised", real, synthetic, epsilon=10.0, mechanism="laplace")
    with pytest.raises(InputError, match="pass synthetic="):
        plan("weight_noised", 10.0, None, 2, 2000, mechanism="laplace")


def test_normalised_weights_are_stable():
    lw = np.array([1000.0, 1001.0, 999.0, -5000.0])
    w = normalised_weights(lw)
    assert w.mean() == pytest.approx(1.0)
    np.testing.assert_allclose(w[:3] / w[0], [1.0, math.e, 1 / math.e])
    assert w[3] == pytest.approx(0.0, abs=1e-300)
    with pytest.raises(ValueError):
        normalised_weights(np.array([np.nan, 0.0]))


def test_gradient_norm_bounds_the_distance_to_the_minimiser(toy):
    """Strong convexity: ||beta - beta*|| <= ||grad J(beta)|| / lam for any beta, the step
    that certifies an approximate fit."""
    real, synthetic = toy
    lam, n0 = 0.05, 1000.0
    beta_star = fit_coefficients(real, synthetic, lam, n0)
    rng = np.random.default_rng(3)
    ratios = []
    for scale in (1e-4, 1e-2, 1.0, 10.0):
        for _ in range(5):
            beta = beta_star + scale * rng.normal(size=3)
            g = np.linalg.norm(objective_gradient(beta, real, synthetic, lam, n0))
            ratios.append(np.linalg.norm(beta - beta_star) * lam / g)
    assert max(ratios) <= 1.0
    assert max(ratios) > 0.5  # the bound is nearly tight along flat directions


def test_an_early_stopped_fit_is_refined_to_the_certified_tolerance(toy, monkeypatch):
    from dprelease.weights.logistic import solver as logistic_solver

    real, synthetic = toy
    lam, n0 = 0.01, 2000.0
    converged = fit_coefficients(real, synthetic, lam, n0)
    g_max = logistic_solver.gradient_bound(2, n0)
    monkeypatch.setattr(logistic_solver, "SOLVER_MAX_ITER", 1)  # scikit-learn stops early
    with pytest.warns(Warning, match="converge"):
        refined = fit_coefficients(real, synthetic, lam, n0)
    assert np.linalg.norm(objective_gradient(refined, real, synthetic, lam, n0)) <= g_max
    assert np.linalg.norm(refined - converged) <= 2 * g_max / lam
    # Without refinement steps the uncertified coefficients are refused, naming no value.
    monkeypatch.setattr(logistic_solver, "MAX_NEWTON_STEPS", 0)
    with (
        pytest.warns(Warning, match="converge"),
        pytest.raises(
            RuntimeError, match="could not be certified: the gradient norm of J did not reach"
        ) as refused,
    ):
        estimate("beta_debiased", real, synthetic, epsilon=1.0, delta=1e-5, lam=lam)
    assert not any(ch.isdigit() for ch in str(refused.value))


def test_certified_sensitivity_holds_for_early_stopped_neighbouring_fits(monkeypatch):
    """Neighbouring fits, each stopped after one scikit-learn iteration then certified, differ
    by at most the certified Delta_2 (the exact-minimiser bound alone is not what is used)."""
    from dprelease.weights.logistic import solver as logistic_solver

    monkeypatch.setattr(logistic_solver, "SOLVER_MAX_ITER", 1)
    rng = np.random.default_rng(12)
    ratios = []
    for trial in range(40):
        d, lam, n0, real, synthetic = random_fit_problem(rng, max_d=3, max_log_lam=0)
        real, synthetic = real**3, synthetic**0.3
        extra = np.ones((1, d)) if trial % 2 else rng.uniform(size=(1, d))
        with pytest.warns(Warning, match="converge"):
            beta = fit_coefficients(real, synthetic, lam, n0)
            beta_added = fit_coefficients(np.vstack([real, extra]), synthetic, lam, n0)
        ratios.append(np.linalg.norm(beta - beta_added) / coefficient_sensitivity(d, n0, lam))
    assert max(ratios) <= 1.0


def test_noise_gate_flattens_pure_noise_and_keeps_signal(seeded_noise):
    """Slopes that are pure DP noise are flattened; a real signal passes; the paper's
    estimator (gate off) is unchanged. Gaussian: T ~ chi^2_d, threshold d + 2 sqrt(2d)."""
    from dprelease.weights.logistic.gate import noise_gate
    from dprelease.weights.logistic.noise import coefficient_log_weights, noisy_coefficients

    d, scale = 50, 0.3
    x_aug = np.hstack([np.random.default_rng(0).uniform(size=(200, d)), np.ones((200, 1))])
    flats = [
        gated_log_weights(
            np.zeros(d + 1), x_aug, "gaussian", scale, seeded_noise(seed), debias=True, gate=True
        )[1]["noise_gate"]["flat"]
        for seed in range(200)
    ]
    # P(chi^2_50 > 50 + 2 sqrt(100)) = 0.024: about 98 % of pure-noise draws are flattened.
    assert 0.94 <= np.mean(flats) <= 1.0
    signal = np.full(d + 1, 0.3)  # T ~ noncentral chi^2 with lambda = 50: far above
    log_w, extra = gated_log_weights(
        signal, x_aug, "gaussian", scale, seeded_noise(1), debias=True, gate=True
    )
    assert not extra["noise_gate"]["flat"] and np.std(log_w) > 0
    flat, _ = gated_log_weights(
        np.zeros(d + 1), x_aug, "gaussian", scale, seeded_noise(2), debias=True, gate=True
    )
    assert np.all(flat == 0)
    ungated, none = gated_log_weights(
        np.zeros(d + 1), x_aug, "gaussian", scale, seeded_noise(2), debias=True, gate=False
    )
    beta_tilde = noisy_coefficients(np.zeros(d + 1), "gaussian", scale, seeded_noise(2))
    paper = coefficient_log_weights(beta_tilde, x_aug, "gaussian", scale, debias=True)
    assert none == {} and np.array_equal(ungated, paper)
    # Laplace: Var(z^2)/Var(z)^2 = 5, threshold d + 2 sqrt(5 d); the intercept is ignored.
    verdict = noise_gate(np.r_[np.zeros(d), 100.0], "laplace", 0.1)
    assert verdict["flat"] and verdict["threshold"] == pytest.approx(d + 2 * np.sqrt(5 * d))
