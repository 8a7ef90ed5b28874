"""The release bundle of a DP synthetic-data release (the main paper's release kind).

Files besides the shared ones of `dprelease.release`:
- `synthetic.parquet`: the schema's columns with their types, plus `weight` (Pareto-smoothed,
  self-normalised to mean 1) and `log_weight` (the raw debiased log weights);
- `diagnostics.json`: PSIS diagnostics of the released weights;
- `report.md` and its figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd

from dprelease.diagnostics import normalised_weights
from dprelease.privacy.accounting import Spend
from dprelease.privacy.ledger import LedgerEntry
from dprelease.release import ReleaseBundle
from dprelease.report import write_report

KIND = "synthetic"
SYNTHETIC_FILE = "synthetic.parquet"
DIAGNOSTICS_FILE = "diagnostics.json"


def synthetic_bundle(
    *,
    dataset: str,
    release_id: str,
    synthetic: pd.DataFrame,
    log_weights: np.ndarray,
    smoothed_log_weights: np.ndarray,
    ledger_entries: Sequence[LedgerEntry],
    release_entry_ids: Sequence[int],
    cap: Spend,
    schema: dict,
    configuration: dict,
    diagnostics: dict,
    invalid_rows: str = "refuse",
) -> ReleaseBundle:
    """Bundle the decoded synthetic rows, their DP weights and PSIS diagnostics."""
    weights = normalised_weights(smoothed_log_weights)
    table = synthetic.assign(
        weight=np.asarray(weights, dtype=float),
        log_weight=np.asarray(log_weights, dtype=float),
    )
    return ReleaseBundle(
        kind=KIND,
        dataset=dataset,
        release_id=release_id,
        ledger_entries=ledger_entries,
        release_entry_ids=release_entry_ids,
        cap=cap,
        schema=schema,
        configuration=configuration,
        report=partial(
            write_report,
            synthetic=synthetic,
            weights=weights,
            raw_log_weights=log_weights,
            smoothed_log_weights=smoothed_log_weights,
        ),
        tables={SYNTHETIC_FILE: table},
        json_files={DIAGNOSTICS_FILE: diagnostics},
        manifest_extra={"n_synthetic": len(synthetic), "diagnostics": diagnostics},
        invalid_rows=invalid_rows,
    )
