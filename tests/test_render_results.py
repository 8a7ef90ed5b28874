"""benchmarks/render_results.py renders the fidelity study's CSV and metadata into the benchmarks
page: the run's metadata, each method's mean ± standard error over the seeds, and the default's
paired standing against the best peer of each metric, in that metric's direction."""

from __future__ import annotations

import csv
import importlib.util
import json
from datetime import datetime
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "render_results.py"
COLUMNS = ("tvd1", "tvd2", "tvd3", "bmse_w", "bmse_u", "tstr", "cpu", "peak_mb")
# Per method, TVD1 and TSTR of seeds 0, 1, 2 (every other metric is 1.0): the best peer is
# opendp-aim for TVD1 (lower is better) and opendp-mst for TSTR (higher is better).
VALUES = {
    "real-train": ((0.05, 0.05, 0.05), (0.9, 0.9, 0.9)),
    "dprelease": ((0.10, 0.12, 0.14), (0.5, 0.6, 0.7)),
    "opendp-mst": ((0.20, 0.20, 0.23), (0.8, 0.8, 0.8)),
    "opendp-aim": ((0.15, 0.16, 0.17), (0.1, 0.2, 0.3)),
}
DATE = datetime(2031, 1, 2, 3, 4).strftime("%Y-%m-%d %H:%M")


def _render(tmp_path: Path) -> str:
    spec = importlib.util.spec_from_file_location("render_results", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = tmp_path / "results"
    results.mkdir()
    with (results / "fidelity-e1.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "role", "method", "seed", *COLUMNS])
        for method, (tvd1, tstr) in VALUES.items():
            for seed in range(3):
                metrics = dict.fromkeys(COLUMNS, 1.0) | {"tvd1": tvd1[seed], "tstr": tstr[seed]}
                writer.writerow(["boston", "tuning", method, seed, *metrics.values()])
    meta = {
        "commit": "0123abcd" * 5,
        "dirty": False,
        "date": DATE,
        "machine": {
            "cpu": "Test CPU 9000",
            "cores": 2,
            "ram_gb": 23.4,
            "python": "3.11.7",
            "packages": {"dprelease": "0.1.0", "opendp": "0.16.0"},
        },
        "epsilon": 1.0,
        "delta": 1e-6,
        "n_synthetic": 20_000,
        "seeds": [0, 1, 2],
        "tables": ["boston"],
        "methods": list(VALUES),
        "peers": ["opendp-mst", "opendp-aim"],
    }
    (results / "fidelity-e1.meta.json").write_text(json.dumps(meta))
    page = tmp_path / "benchmarks.md"
    module.render(results, page)
    return page.read_text()


def test_the_page_has_the_runs_metadata_means_and_standard_errors(tmp_path):
    page = _render(tmp_path)
    assert "## epsilon = 1, delta = 1e-06, 20,000 synthetic rows" in page
    assert f"Commit: `{'0123abcd' * 5}`" in page and "uncommitted" not in page
    assert f"Date (UTC): {DATE}" in page
    assert "Test CPU 9000, 2 cores, 23.4 GB RAM; Python 3.11.7; dprelease 0.1.0" in page
    assert "Seeds: 0, 1, 2; tables: boston" in page
    assert "- boston (tuning): real-train: 0, 1, 2; dprelease: 0, 1, 2;" in page
    # dprelease's TVD1: mean 0.12, SD 0.02, SE 0.02 / sqrt(3) = 0.0115; TSTR 0.6 ± 0.0577;
    # real-train's constant values have SE 0.
    assert "| dprelease | 3 | 0.12 ± 0.012 | 1 ± 0 | 1 ± 0 | 1 ± 0 | 0.6 ± 0.058 |" in page
    assert "| real-train | 3 | 0.05 ± 0 |" in page


def test_the_standing_pairs_the_default_with_the_best_peer_in_each_direction(tmp_path):
    page = _render(tmp_path)
    # TVD1: differences -0.05, -0.04, -0.03 against opendp-aim (mean 0.16 < opendp-mst's 0.21).
    assert (
        "| boston | TVD1 | dprelease | 0.12 ± 0.012 | opendp-aim | 0.16 ± 0.0058 | "
        "-0.04 ± 0.00577 (3) | better |"
    ) in page
    # TSTR: differences -0.3, -0.2, -0.1 against opendp-mst (0.8 > opendp-aim's 0.2).
    assert (
        "| boston | TSTR | dprelease | 0.6 ± 0.058 | opendp-mst | 0.8 ± 0 | "
        "-0.2 ± 0.0577 (3) | worse |"
    ) in page
    # TVD2: equal everywhere, a zero difference with zero SE.
    assert "| boston | TVD2 | dprelease | 1 ± 0 | opendp-mst | 1 ± 0 | 0 ± 0 (3) |" in page
