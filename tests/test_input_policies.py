"""The out-of-bounds policy under each invalid-row policy: `reject` under `drop` drops the rows
with a number outside the bounds (never the whole table), and the privacy statement, the
report and stderr name the policy that applied, never how many rows. The invalid-row policy's
defaults (`drop` for the configs, `refuse` for the CLI) and what the statement says of each."""

from __future__ import annotations

import pandas as pd
import pytest
from release_fixtures import TINY_SCHEMA, publish_table

from dprelease.config import InputPolicy, SyntheticConfig
from dprelease.errors import InputError
from dprelease.io.stream import load_validated
from dprelease.release.files import REPORT_FILE

TABLE = pd.DataFrame({"x": [0.5, 7.0, 0.2], "k": [1, 2, 3], "y": ["a", "b", "a"]})


def test_reject_under_drop_drops_only_the_out_of_bounds_rows():
    kept = load_validated(
        TABLE, TINY_SCHEMA, InputPolicy(on_out_of_bounds="reject", on_invalid_rows="drop")
    )
    assert kept["x"].tolist() == [0.5, 0.2]
    with pytest.raises(InputError, match="outside the schema's bounds"):
        load_validated(
            TABLE, TINY_SCHEMA, InputPolicy(on_out_of_bounds="reject", on_invalid_rows="refuse")
        )
    clipped = load_validated(TABLE, TINY_SCHEMA, InputPolicy(on_invalid_rows="drop"))
    assert clipped["x"].tolist() == [0.5, 1.0, 0.2]


def _release(tmp_path, **policy: str) -> tuple[dict, str]:
    config = SyntheticConfig(
        epsilon=1.0, weights="none", n_synthetic=100, allow_unreliable_weights=True, **policy
    )
    release, manifest = publish_table(tmp_path, TINY_SCHEMA, config, TABLE)
    return manifest, (release / REPORT_FILE).read_text()


@pytest.mark.parametrize(
    ("policy", "statement", "report"),
    [
        ({}, "outside the schema's bounds were clipped", "Out-of-bounds numbers: **clip**"),
        (
            {"on_out_of_bounds": "reject", "on_invalid_rows": "drop"},
            "outside the schema's bounds were dropped with the invalid rows",
            "Out-of-bounds numbers: **reject** under `drop`",
        ),
    ],
)
def test_the_statement_and_report_name_the_out_of_bounds_policy(
    policy, statement, report, tmp_path
):
    manifest, text = _release(tmp_path, **policy)
    assert statement in manifest["privacy_statement"]
    assert report in text
    assert manifest["on_out_of_bounds"] == policy.get("on_out_of_bounds", "clip")
