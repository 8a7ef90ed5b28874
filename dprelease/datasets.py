"""Demo tables: the public breast-cancer table and a census-like table with a known model.

`census_like(n, seed)` draws from a fixed data-generating process, so tests and benchmarks
know the truth:

- region ~ Categorical(0.18, 0.22, 0.37, 0.23) over northeast, midwest, south, west
- sex ~ Bernoulli(0.5) over female, male
- age ~ round(clip(N(42, 13), 17, 90))
- education ~ round(clip(N(13 + 0.6 [region = northeast], 2.8), 0, 20))
- hours ~ round(clip(N(38 + 4 [sex = male], 9), 1, 99))
- log wage ~ N(5.9 + 0.09 education + 0.025 age - 0.00025 age^2 + 0.01 hours
  + 0.15 [sex = male], 0.45), wage clipped to [0, 20000]
- capital_gain: missing with probability 0.6, otherwise Exponential(mean 3000) clipped to
  [0, 100000] (exercises nullable numeric columns)
- high_earner = "yes" when wage > 3000, else "no" (the schema's target)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

REGIONS = ("northeast", "midwest", "south", "west")


def census_like(n: int, seed: int = 0) -> pd.DataFrame:
    """n rows of the census-like table (see the module docstring for the model)."""
    rng = np.random.default_rng(seed)
    region = rng.choice(len(REGIONS), size=n, p=[0.18, 0.22, 0.37, 0.23])
    male = rng.random(n) < 0.5
    age = np.rint(np.clip(rng.normal(42, 13, n), 17, 90))
    education = np.rint(np.clip(rng.normal(13 + 0.6 * (region == 0), 2.8, n), 0, 20))
    hours = np.rint(np.clip(rng.normal(38 + 4 * male, 9, n), 1, 99))
    log_wage = (
        5.9
        + 0.09 * education
        + 0.025 * age
        - 0.00025 * age**2
        + 0.01 * hours
        + 0.15 * male
        + rng.normal(0, 0.45, n)
    )
    wage = np.clip(np.exp(log_wage), 0, 20000)
    gain = np.clip(rng.exponential(3000, n), 0, 100000)
    gain[rng.random(n) < 0.6] = np.nan
    return pd.DataFrame(
        {
            "age": age.astype(int),
            "education": education.astype(int),
            "hours": hours.astype(int),
            "sex": np.where(male, "male", "female"),
            "region": np.asarray(REGIONS)[region],
            "wage": np.round(wage, 2),
            "capital_gain": np.round(gain, 2),
            "high_earner": np.where(wage > 3000, "yes", "no"),
        }
    )


def breast_cancer() -> pd.DataFrame:
    """scikit-learn's copy of the Wisconsin diagnostic breast-cancer table (569 rows)."""
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer(as_frame=True)
    frame = bunch.frame.rename(columns=lambda name: name.replace(" ", "_"))
    frame["diagnosis"] = np.asarray(bunch.target_names)[frame.pop("target")]
    return frame
