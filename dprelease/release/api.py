"""The Python entry point: publish a release of any kind from a file or a DataFrame.

`publish(source, schema, config)` runs the release kind that `config`'s type names
(`SyntheticConfig`: DP synthetic data; `TruncationConfig`: the adaptive-truncation posterior;
`ABCDPConfig`: ABCDP posterior samples) through its pipeline in the guarded order that every
release follows (`dprelease.release.pipeline`: plan, check the cap, load and validate,
reserve, run, commit, write), in this process and without Prefect. The CLI and the Prefect
flows run the same pipelines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dprelease.config import ABCDPConfig, SyntheticConfig, TruncationConfig
from dprelease.schema import Schema


def publish(
    source: str | Path | pd.DataFrame,
    schema: str | Path | Schema,
    config: SyntheticConfig | TruncationConfig | ABCDPConfig,
    *,
    out_dir: str | Path = "releases",
    ledger_url: str | None = None,
) -> Path:
    """Publish one release; return its directory, `out_dir/<dataset>/<release_id>/`.

    Args:
        source: the real table: a CSV or Parquet path, a directory of Parquet files, or a
            pandas DataFrame.
        schema: the public schema, a YAML path or a `Schema`.
        config: a `SyntheticConfig`, `TruncationConfig` or `ABCDPConfig`; its type selects the
            release kind. The configs default to `on_invalid_rows="drop"`: invalid rows are
            dropped inside the mechanism, so whether a release exists never depends on one
            row.
        out_dir: where releases go; refused when it lies inside an existing release, before
            anything is read or spent.
        ledger_url: a SQLAlchemy URL; None: `$DPRELEASE_LEDGER_URL`, else
            `$DPRELEASE_HOME/ledger.sqlite`, else the per-user default ledger.

    Raises:
        InputError: bad input or settings (nothing spent unless the message says so).
        BudgetExceededError: the dataset's cap refuses the release, before the data is read.
        UnreliableWeightsError: PSIS refuses the weights; the spend stays in the ledger.
    """
    from dprelease.release.pipeline import publish_release

    return publish_release(
        _pipeline_for(config), schema, config, source, out_dir=out_dir, ledger_url=ledger_url
    )


def _pipeline_for(config: SyntheticConfig | TruncationConfig | ABCDPConfig) -> Any:
    if isinstance(config, SyntheticConfig):
        from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE

        return SYNTHETIC_PIPELINE
    if isinstance(config, TruncationConfig):
        from dprelease.release.truncation import TRUNCATION_PIPELINE

        return TRUNCATION_PIPELINE
    if isinstance(config, ABCDPConfig):
        from dprelease.release.abcdp import ABCDP_PIPELINE

        return ABCDP_PIPELINE
    raise TypeError(
        f"config must be a SyntheticConfig, TruncationConfig or ABCDPConfig, not "
        f"{type(config).__name__}"
    )
