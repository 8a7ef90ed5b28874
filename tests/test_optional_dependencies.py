"""Without the optional extras (torch, mbi, dask, evaluate) the registries, the CLI and its
plan stage import, and a method that needs a missing extra is refused in one line naming the
extra (exit 2), before Prefect is imported and before the ledger is touched.

The extras' absence is simulated in a fresh interpreter by a finder at the front of
`sys.meta_path` that refuses their modules, as a core install without them would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dprelease.errors import EXTRAS, InputError, require

DATA = Path(__file__).parent.parent / "data"
BLOCKED = sorted({"jax", "jaxlib", *(m for modules in EXTRAS.values() for m in modules)})

SCRIPT = """
import importlib.abc, json, sys

BLOCKED = set(sys.argv[1].split(","))


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Absent())

import dprelease
from dprelease.generators import GENERATORS
from dprelease.weights import METHODS
from dprelease.cli.app import app
from typer.testing import CliRunner

cases = json.loads(sys.argv[2])
out = {"generators": sorted(GENERATORS), "weights": list(METHODS), "cli": {}}
for name, args in cases.items():
    result = CliRunner().invoke(app, args)
    out["cli"][name] = [result.exit_code, result.stderr]
try:
    dprelease.publish(
        sys.argv[3], sys.argv[4], dprelease.SyntheticConfig(epsilon=1, generator="dpgan"),
        out_dir=sys.argv[5], ledger_url="sqlite:///" + sys.argv[5] + "/api-ledger.sqlite",
    )
except dprelease.InputError as error:
    out["api"] = str(error)
out["imported"] = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED | {"prefect"})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def without_extras(tmp_path_factory):
    """The registries, the CLI's refusals and a `publish` refusal, run without the extras."""
    home = tmp_path_factory.mktemp("home")
    table, schema = str(DATA / "breast_cancer.csv"), str(DATA / "breast_cancer.yaml")
    release = ["release", table, "--schema", schema, "--epsilon", "1", "--out", str(home)]
    abcdp_model = f"{DATA / 'models' / 'breast_cancer_radius.py'}:RadiusByDiagnosis"
    cases = {
        "dpgan": [*release, "--generator", "dpgan"],
        "dpcgan": [*release, "--generator", "dpcgan"],
        "mst": [*release, "--generator", "mst"],
        "aim": [*release, "--generator", "aim"],
        "dp_mlp": [*release, "--weights", "dp_mlp"],
        "evaluate": ["evaluate", table, "--schema", schema, "--out", str(home / "ev")],
        "abcdp": [
            *["infer", "abcdp", table, "--schema", schema, "--model", abcdp_model],
            *["--epsilon", "1", "--n-samples", "5", "--threshold", "0.07"],
        ],
    }
    env = {k: v for k, v in os.environ.items() if k != "DPRELEASE_LEDGER_URL"}
    env["DPRELEASE_HOME"] = str(home)
    process = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            ",".join(BLOCKED),
            json.dumps(cases),
            table,
            schema,
            str(home),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout.splitlines()[-1]), home


def test_registries_and_cli_import_without_the_extras(without_extras):
    out, _ = without_extras
    assert {"pgm", "dpgan", "dpcgan", "mst", "aim"} <= set(out["generators"])
    assert {"calibration", "dp_mlp", "mlp"} <= set(out["weights"])
    assert out["imported"] == []  # no optional module, and Prefect never started


@pytest.mark.parametrize(
    ("case", "what", "extra"),
    [
        ("dpgan", "generator 'dpgan'", "torch"),
        ("dpcgan", "generator 'dpcgan'", "torch"),
        ("mst", "generator 'mst'", "mbi"),
        ("aim", "generator 'aim'", "mbi"),
        ("dp_mlp", "weight method 'dp_mlp'", "torch"),
        ("evaluate", "dprelease evaluate", "evaluate"),
        ("abcdp", "ABCDP kernel 'gaussian_rff'", "torch"),
    ],
)
def test_a_method_without_its_extra_is_refused_in_one_line_naming_it(
    without_extras, case, what, extra
):
    out, _ = without_extras
    exit_code, stderr = out["cli"][case]
    assert exit_code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"error: {what}")
    assert lines[0].endswith(f"pip install 'dprelease[{extra}]'")


def test_a_refusal_for_a_missing_extra_spends_nothing(without_extras):
    out, home = without_extras
    assert out["api"] == (
        "generator 'dpgan' needs the optional dependency torch: pip install 'dprelease[torch]'"
    )
    assert list(home.glob("*.sqlite")) == []  # neither the CLI nor `publish` opened a ledger


def test_require_names_the_package_and_the_extra(monkeypatch):
    monkeypatch.setitem(EXTRAS, "evaluate", {"dprelease_no_such_module": "POT"})
    with pytest.raises(InputError) as refused:
        require("evaluate", "the metric")
    assert str(refused.value) == (
        "the metric needs the optional dependency POT: pip install 'dprelease[evaluate]'"
    )
    require("torch", "anything")  # installed: nothing raised
