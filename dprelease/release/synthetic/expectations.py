"""The synthetic release's Great Expectations check: its synthetic table validated by GX
against the public schema's Expectation Suite (`dprelease.expectations`), the step
`check-expectations` after `bundle` (a Prefect task under the flows).

What is validated is the table written to `synthetic.parquet` without its `weight` and
`log_weight` columns (the suite is the schema's: a table of the schema's columns; `dprelease
verify` checks the weights). With the gx extra installed, GX is imported by this step (its
import costs a few seconds of CPU: docs/decisions/0031-great-expectations-check.md), and the
release gets:

- `expectations.json`: GX's suite and validation result (`expectations.validation.validate`);
- the manifest's `expectations`: its summary (`validation.summary`), which the report and
  the Prefect artifacts show.

Without the extra, or when GX fails, the release is written without `expectations.json` and
the manifest's `expectations` says the check did not run and why (`pip install
'dprelease[gx]'`). A failed expectation is recorded, never a refusal: the synthetic rows have
passed dprelease's own validator already (`io.validate.check_synthetic`), and GX's verdict on
them is published beside them.

Everything here is a DP output or public (the synthetic rows, the public schema), so the
result may be published; nothing reads the real table.
"""

from __future__ import annotations

from dataclasses import replace

from dprelease.expectations import GX_MISSING, MissingExtraError
from dprelease.expectations.suite import expectation_suite
from dprelease.expectations.validation import summary, validate
from dprelease.release.files import (
    EXPECTATIONS_FILE,
    EXPECTATIONS_KEY,
    SYNTHETIC_FILE,
    WEIGHT_COLUMNS,
)
from dprelease.release.pipeline import BundleCheck
from dprelease.release.writer import ReleaseBundle


def check_expectations(bundle: ReleaseBundle) -> ReleaseBundle:
    """The bundle with GX's validation of its synthetic table (module docstring)."""
    table = bundle.tables[SYNTHETIC_FILE].drop(columns=list(WEIGHT_COLUMNS))
    try:
        record = validate(table, expectation_suite(bundle.schema))
    except MissingExtraError:
        reason = GX_MISSING
    except Exception as error:  # noqa: BLE001 - GX failing must not lose a release that spent
        reason = f"Great Expectations failed ({type(error).__name__})"
    else:
        return replace(
            bundle,
            json_files={**bundle.json_files, EXPECTATIONS_FILE: record},
            manifest_extra={**bundle.manifest_extra, EXPECTATIONS_KEY: summary(record)},
        )
    return replace(
        bundle,
        manifest_extra={
            **bundle.manifest_extra,
            EXPECTATIONS_KEY: {"checked": False, "reason": reason},
        },
    )


EXPECTATIONS_CHECK = BundleCheck("check-expectations", check_expectations)
