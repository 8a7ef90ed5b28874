"""ABCDP toy model (Park et al., ABCDP section 6.1; docs/abcdp.md section 6.2): a mixture of
uniforms.

Prior theta ~ Dirichlet(1, 1, 1, 1, 1); given theta, each row y is drawn from
sum_i theta_i Uniform[i - 1, i], i = 1..5 (schema `toy_mixture.yaml`, y in [0, 5]).
`python data/models/toy_mixture.py` writes the bundled observed table `toy_mixture.csv`:
5000 rows from theta* = [0.25, 0.04, 0.33, 0.04, 0.34] (the paper's truth), seed 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

TRUE_THETA = (0.25, 0.04, 0.33, 0.04, 0.34)
N_COMPONENTS = 5


class DirichletUniformMixture:
    """Batched simulator of the ABCDP protocol (dprelease.inference.abcdp.model)."""

    batched = True
    parameter_names = tuple(f"theta_{i}" for i in range(1, N_COMPONENTS + 1))
    columns = ("y",)

    def sample_prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.dirichlet(np.ones(N_COMPONENTS), size=size)

    def simulate(self, theta: np.ndarray, m: int, rng: np.random.Generator) -> pd.DataFrame:
        theta = np.atleast_2d(theta)
        cumulative = np.cumsum(theta, axis=1)[:, :-1]
        uniforms = rng.random((len(theta), m))
        component = (uniforms[:, :, None] > cumulative[:, None, :]).sum(axis=2)
        y = component + rng.random((len(theta), m))
        return pd.DataFrame({"y": np.clip(y, 0.0, float(N_COMPONENTS)).ravel()})


def observed_table(n_rows: int = 5000, seed: int = 0) -> pd.DataFrame:
    """The bundled 'real' table: n_rows draws at the true theta."""
    model = DirichletUniformMixture()
    return model.simulate(np.array([TRUE_THETA]), n_rows, np.random.default_rng(seed))


if __name__ == "__main__":
    target = Path(__file__).with_suffix(".csv")
    observed_table().to_csv(target, index=False)
    print(f"wrote {target}")
