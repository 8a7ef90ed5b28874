"""Great Expectations' validation of a table against a suite, in the form a release stores.

`validate(table, suite)` runs GX on a pandas DataFrame: an ephemeral Data Context (nothing
written to disk, no progress bars), a pandas data source holding the whole frame as one batch,
result format BASIC (for each expectation its success, how many values were unexpected and up
to 20 of them). It returns a `record` (JSON-able), what `expectations.json` holds:

- `great_expectations_version`, `success` (every expectation holds);
- `suite`: the suite, GX's own JSON;
- `result`: GX's own validation result JSON (`ExpectationSuiteValidationResult`; GX's
  renderers read it back), without the two things it holds that are not about the table:
  the batch's load time (`meta.batch_markers.ge_load_time`, a clock reading) and exception
  tracebacks (paths of the machine that ran it); exception messages stay;
- `outcomes`: one row per expectation in the suite's order (GX returns them in its own):
  `expectation` (GX's type), `column`, `success`, `rule` (the expectation's arguments in
  words) and `observed` (the unexpected count, GX's observed value, or the exception).

`summary(record)` is the short form the manifest carries. Both read only the record; only
`validate` imports GX. What the record may reveal is the table's: a release validates its
synthetic table (a DP output), so the record may be published; a record of the real table
never may (docs/privacy-model.md section 8).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dprelease.expectations import require_gx

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations import ExpectationSuite

RESULT_FORMAT = "BASIC"
SHOWN_VALUES = 6  # values of a list shown in a rule or an observation
SHOWN_UNEXPECTED = 3  # unexpected values shown in an observation


def validate(table: pd.DataFrame, suite: ExpectationSuite | dict) -> dict:
    """GX's validation of `table` against `suite` (an `ExpectationSuite` or its JSON), as the
    record of the module docstring."""
    gx = require_gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    if isinstance(suite, dict):
        suite = gx.ExpectationSuite(**suite)
    batch = (
        context.data_sources.add_pandas("dprelease")
        .add_dataframe_asset("table")
        .add_batch_definition_whole_dataframe("whole table")
        .get_batch(batch_parameters={"dataframe": table})
    )
    result = _without_clock_and_paths(batch.validate(suite, result_format=RESULT_FORMAT))
    suite_json = suite.to_json_dict()
    return {
        "great_expectations_version": gx.__version__,
        "success": bool(result["success"]),
        "suite": suite_json,
        "result": result,
        "outcomes": _outcomes(suite_json["expectations"], result["results"]),
    }


def summary(record: dict) -> dict:
    """The manifest's `expectations` entry: whether every expectation held, how many were
    evaluated and held, GX's version and suite name, and the outcomes that failed."""
    outcomes = record["outcomes"]
    return {
        "checked": True,
        "success": record["success"],
        "expectations": len(outcomes),
        "held": sum(1 for outcome in outcomes if outcome["success"]),
        "suite": record["suite"]["name"],
        "great_expectations_version": record["great_expectations_version"],
        "failed": [outcome for outcome in outcomes if not outcome["success"]],
    }


def _without_clock_and_paths(result: Any) -> dict:
    record = result.to_json_dict()
    record.get("meta", {}).get("batch_markers", {}).pop("ge_load_time", None)
    for row in record["results"]:
        _drop_tracebacks(row.get("exception_info"))
    return record


def _drop_tracebacks(info: Any) -> None:
    if isinstance(info, dict):
        if "exception_traceback" in info:
            info["exception_traceback"] = None
        for value in info.values():
            _drop_tracebacks(value)


def _key(config: dict) -> str:
    kwargs = {k: v for k, v in config["kwargs"].items() if k != "batch_id"}
    return json.dumps([config["type"], kwargs], sort_keys=True, default=str)


def _outcomes(expectations: list[dict], results: list[dict]) -> list[dict]:
    by_key = {_key(row["expectation_config"]): row for row in results}
    outcomes = []
    for expectation in expectations:
        row = by_key[_key(expectation)]
        kwargs = expectation["kwargs"]
        outcomes.append(
            {
                "expectation": expectation["type"],
                "column": kwargs.get("column"),
                "success": bool(row["success"]),
                "rule": _rule(expectation["type"], kwargs),
                "observed": _observed(row),
            }
        )
    return outcomes


def _listed(values: Iterable[Any]) -> str:
    values = list(values)
    shown = ", ".join(str(value) for value in values[:SHOWN_VALUES])
    return shown if len(values) <= SHOWN_VALUES else f"{shown}, ... ({len(values)} in all)"


def _rule(kind: str, kwargs: dict) -> str:
    """An expectation's arguments in words."""
    if kind == "expect_table_columns_to_match_set":
        return f"exactly the schema's {len(kwargs['column_set'])} columns"
    if kind == "expect_table_columns_to_match_ordered_list":
        return "the schema's column order"
    if kind == "expect_column_values_to_not_be_null":
        return "no missing values"
    if kind == "expect_column_values_to_be_in_type_list":
        return "an integer type"
    if kind == "expect_column_values_to_be_between":
        return f"between {_number(kwargs['min_value'])} and {_number(kwargs['max_value'])}"
    if kind == "expect_column_values_to_be_in_set":
        return f"one of {_listed(kwargs['value_set'])}"
    return kind


def _number(value: Any) -> str:
    """A bound as the schema wrote it (GX stores 17 as 17.0)."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _observed(row: dict) -> str:
    """What GX observed: the exception that stopped it, the columns missing, not in the
    schema or out of order, the unexpected values (their count, and a few of them when there
    are any), or its observed value."""
    message = _exception_message(row.get("exception_info"))
    if message is not None:
        return f"not evaluated: {message}"
    result = row.get("result") or {}
    mismatched = (result.get("details") or {}).get("mismatched")
    if isinstance(mismatched, dict):  # the column set
        return "; ".join(
            f"{label}: {_listed(mismatched[key])}"
            for key, label in (("missing", "missing"), ("unexpected", "not in the schema"))
            if mismatched.get(key)
        )
    if isinstance(mismatched, list) and mismatched:  # the column order
        first = mismatched[0]
        return (
            f"position {first['Expected Column Position'] + 1}: {first['Found']} where "
            f"{first['Expected']} belongs ({len(mismatched)} positions differ)"
        )
    if "unexpected_count" in result:
        count, total = result["unexpected_count"], result.get("element_count", 0)
        text = f"{count:,} of {total:,} values unexpected"
        examples = result.get("partial_unexpected_list") or []
        if count:
            text += f", e.g. {_listed(examples[:SHOWN_UNEXPECTED])}"
        return text
    observed = result.get("observed_value")
    return f"{len(observed)} columns as expected" if isinstance(observed, list) else str(observed)


def _exception_message(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for value in info.values():
        message = _exception_message(value)
        if message is not None:
            return message
    return None
