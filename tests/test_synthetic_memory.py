"""The number of synthetic rows a plan may ask for: the default is capped whatever the
schema's `max_rows`, and a number whose estimated memory exceeds the machine's is refused by
the plan, before the cap is checked and before any data is read."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dprelease.cli import support
from dprelease.cli.app import app
from dprelease.config import SyntheticConfig
from dprelease.datasets import census_like
from dprelease.errors import InputError
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.release import memory
from dprelease.release.synthetic.plan import MAX_DEFAULT_N_SYNTHETIC, plan_release
from dprelease.schema import Schema, load_schema

CENSUS = Path(__file__).parent.parent / "data" / "census.yaml"
GB = 10**9


def _census(max_rows: int) -> Schema:
    return load_schema(CENSUS).model_copy(update={"max_rows": max_rows})


@pytest.fixture
def machine(monkeypatch):
    """Sets the machine's available memory (bytes)."""

    def set_available(available: int | None) -> None:
        monkeypatch.setattr(memory, "available_bytes", lambda: available)

    return set_available


def test_the_default_number_of_rows_is_capped_whatever_max_rows(machine):
    machine(64 * GB)
    plan = plan_release(_census(10**9), SyntheticConfig(epsilon=1.0))
    assert plan.n_synthetic == MAX_DEFAULT_N_SYNTHETIC == 1_000_000
    assert plan.configuration()["release"]["n_synthetic"] == MAX_DEFAULT_N_SYNTHETIC


def test_rows_beyond_the_machines_memory_are_refused_in_the_plan(machine):
    machine(16 * GB)
    config = SyntheticConfig(epsilon=1.0, n_synthetic=10**9)
    with pytest.raises(InputError) as error:
        plan_release(_census(10**9), config)
    message = str(error.value)
    assert "1,000,000,000 synthetic rows need about 1,081.1 GB of memory" in message
    assert "more than the 16.0 GB available on this machine" in message
    assert "pass a smaller --n-synthetic (at most about 13,800,000 here)" in message
    assert "\n" not in message
    fits = SyntheticConfig(epsilon=1.0, n_synthetic=13_800_000)
    assert plan_release(_census(10**9), fits).n_synthetic == 13_800_000


def test_the_estimate_grows_with_the_schemas_width_and_columns():
    assert memory.peak_bytes(0, 14, 8) == memory.BASE_BYTES
    assert memory.peak_bytes(10, 14, 8) == memory.BASE_BYTES + 10 * 1_080
    assert memory.bytes_per_row(32, 31) == 3_740 and memory.bytes_per_row(303, 3) == 6_360


def test_the_machines_memory_is_read_without_psutil():
    available = memory.available_bytes()
    assert available is not None and available > 0


def test_the_command_refuses_before_the_cap_and_before_the_data(tmp_path, machine, monkeypatch):
    machine(8 * GB)
    monkeypatch.setattr(support, "run_flow", lambda *a, **k: pytest.fail("Prefect started"))
    monkeypatch.setattr(support, "check_budget", lambda *a: pytest.fail("cap checked"))
    schema = tmp_path / "census.yaml"
    schema.write_text(yaml.safe_dump(_census(10**9).public_dict()))
    table = tmp_path / "census.csv"
    census_like(40, seed=3).to_csv(table, index=False)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    result = CliRunner().invoke(
        app,
        [
            "release",
            str(table),
            "--schema",
            str(schema),
            "--epsilon",
            "1",
            "--ledger",
            ledger,
            "--n-synthetic",
            "1000000000",
        ],
    )
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: 1,000,000,000 synthetic rows need about")
    assert "--n-synthetic" in result.output
    with Ledger(ledger) as book:
        assert book.cap("census") is None
