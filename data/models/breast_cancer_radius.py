"""ABCDP model for the bundled breast-cancer table: nucleus radius by diagnosis.

Columns `mean_radius` and `diagnosis` of `data/breast_cancer.yaml`. Parameters: the share of
malignant tumours p, the mean radius of benign and of malignant nuclei, and a common standard
deviation. Given them, each row is diagnosis ~ Bernoulli(p) ("malignant"), radius ~
N(mean of its class, sd), clipped to the schema bounds [0, 40] (the simulator's own rule, so
its output always satisfies the schema). Priors (public, from domain ranges, not the data):
p ~ U(0, 1), both means ~ U(5, 30), sd ~ U(0.5, 6).

Two classes, one model: `RadiusByDiagnosis` simulates a batch of draws in one call
(`batched = True`, theta of shape (B, 4), B * m rows, draw-major); `RadiusByDiagnosisPerDraw`
is the same model written one draw at a time (`batched = False`, theta of shape (4,), m rows),
the way most simulators are written: dprelease calls it once per draw (slower, same
distribution).

Use: `dprelease infer abcdp data/breast_cancer.csv --schema data/breast_cancer.yaml
--model data/models/breast_cancer_radius.py:RadiusByDiagnosis --epsilon 1 --n-samples 10
--threshold 0.07` (or `...:RadiusByDiagnosisPerDraw`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

LOW, HIGH = 0.0, 40.0


class RadiusByDiagnosis:
    """Batched simulator of the ABCDP protocol (dprelease.inference.abcdp.model)."""

    batched = True
    parameter_names = ("p_malignant", "mean_benign", "mean_malignant", "sd")
    columns = ("mean_radius", "diagnosis")

    def sample_prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.column_stack(
            [
                rng.uniform(0.0, 1.0, size),
                rng.uniform(5.0, 30.0, size),
                rng.uniform(5.0, 30.0, size),
                rng.uniform(0.5, 6.0, size),
            ]
        )

    def simulate(self, theta: np.ndarray, m: int, rng: np.random.Generator) -> pd.DataFrame:
        theta = np.atleast_2d(theta)
        malignant = rng.random((len(theta), m)) < theta[:, [0]]
        centre = np.where(malignant, theta[:, [2]], theta[:, [1]])
        radius = np.clip(centre + theta[:, [3]] * rng.standard_normal((len(theta), m)), LOW, HIGH)
        return pd.DataFrame(
            {
                "mean_radius": radius.ravel(),
                "diagnosis": np.where(malignant.ravel(), "malignant", "benign"),
            }
        )


class RadiusByDiagnosisPerDraw(RadiusByDiagnosis):
    """The same model, simulated one parameter draw at a time."""

    batched = False

    def simulate(self, theta: np.ndarray, m: int, rng: np.random.Generator) -> pd.DataFrame:
        p_malignant, mean_benign, mean_malignant, sd = theta
        malignant = rng.random(m) < p_malignant
        radius = np.where(malignant, mean_malignant, mean_benign) + sd * rng.standard_normal(m)
        return pd.DataFrame(
            {
                "mean_radius": np.clip(radius, LOW, HIGH),
                "diagnosis": np.where(malignant, "malignant", "benign"),
            }
        )
