"""Checks every generator's fitted state must pass (shared by the generator tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dprelease.generators.base import FittedGenerator
from dprelease.io.validate import check_synthetic


def sampling_is_reproducible(fitted: FittedGenerator, n: int, batch_rows: int) -> pd.DataFrame:
    """Two draws with the same seed (in batches) are equal encoded rows of the right width
    that decode to a table satisfying the schema; return that table."""
    first = fitted.sample(n, np.random.default_rng(5), batch_rows=batch_rows)
    second = fitted.sample(n, np.random.default_rng(5), batch_rows=batch_rows)
    np.testing.assert_array_equal(first, second)
    encoder = fitted.generator.encoder
    assert first.shape == (n, encoder.width)
    table = encoder.decode(first)
    check_synthetic(table, encoder.schema)
    return table
