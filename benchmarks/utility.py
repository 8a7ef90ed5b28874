"""Side-by-side utility: OpenDP's AIM and MST against dprelease's generators x private weights.

`python benchmarks/utility.py [--seeds 5] [--epsilons 1 3] [--tables diabetes breast randhie]`

One process; for every table, epsilon and seed the same 80/20 split of a real public table
(train = the private table, test = held-out real rows) and the same public configuration:
delta = 1e-5, N_G = 20,000 synthetic rows (a public choice, many more than the small tables'
rows), numeric columns in the generators' public bins (16 equal-width bins of the schema
bounds).

Methods:
- `opendp-aim`, `opendp-mst`: the peers, straight from OpenDP (`dp.mbi.AIM` / `MST` through
  `Context.query().contingency_table(keys=categories, cuts=the same public bin edges)`,
  `synthesize(method="sample")`, OpenDP's own within-bin decoding, then clipped to the schema
  bounds), unweighted, with the whole (epsilon, delta) converted to rho.
- `<generator>+<weights>`: dprelease's generator on (1 - F) of the budget and the weight
  method on F (F = `--fraction`, default 0.2); `+none` is the same synthetic rows unweighted.
Run time is bounded for AIM (ours and the peer alike): at most `--aim-rounds` rounds and
`--iters` mirror-descent iterations per model fit (both generators and peers).

Metrics (evaluation only: they read the real rows without privacy and never enter a release):
- beta-MSE: the target model (least squares on the [0, 1]-scaled target for a numeric
  target, L2 logistic regression (C = 1) for a categorical one; features scaled with the
  public bounds, one-hot) fitted on the (weighted) synthetic rows against the same model on
  the test rows;
- TVD2: mean total variation distance of all 2-way marginals over the public cells (16 bins),
  weighted synthetic vs train rows;
- downstream: the synthetic-trained target model on the test rows, MSE (numeric target) or
  AUC (categorical target);
- ESS / N_G of the weights, and the wall time of generator + weights.
Prints the mean and standard error over seeds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from dprelease import weights as weight_methods
from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.generators.domain import cell_index, public_cells
from dprelease.generators.mbi import counted_estimator, fit_contingency_table, zcdp_rho
from dprelease.schema import CategoricalColumn, IntegerColumn, Schema, load_schema
from dprelease.weights.tilting import ess

ROOT = Path(__file__).parent.parent
DELTA = 1e-5
N_SYNTHETIC = 20_000
BINS = 16
PAPER_BETA_DEBIASED = "beta_debiased_ungated"


@dataclass(frozen=True)
class Table:
    name: str
    frame: pd.DataFrame
    schema: Schema


def diabetes() -> Table:
    from sklearn.datasets import load_diabetes

    frame = load_diabetes(scaled=False, as_frame=True).frame
    frame["sex"] = frame["sex"].astype(int).astype(str)
    frame = frame.rename(columns={"target": "progression"})
    # Public bounds: clinical plausibility ranges rounded outward (not read off the data).
    bounds = {
        "age": (18, 90), "bmi": (15, 50), "bp": (50, 140), "s1": (90, 320), "s2": (40, 250),
        "s3": (20, 100), "s4": (1, 10), "s5": (3, 6.5), "s6": (55, 130),
        "progression": (0, 400),
    }  # fmt: skip
    columns: dict = {"sex": {"type": "categorical", "categories": ["1", "2"]}}
    columns |= {c: {"type": "continuous", "min": lo, "max": hi} for c, (lo, hi) in bounds.items()}
    schema = {"dataset": "diabetes", "budget": {"epsilon": 100, "delta": 1e-3}}
    schema |= {"target": "progression", "columns": columns}
    return Table("diabetes", frame[list(columns)], Schema.model_validate(schema))


def breast() -> Table:
    from dprelease.datasets import breast_cancer

    full = load_schema(ROOT / "data" / "breast_cancer.yaml").public_dict()
    names = [c for c in full["columns"] if c.startswith("mean_")] + ["diagnosis"]
    schema = full | {"columns": {c: full["columns"][c] for c in names}}
    return Table("breast(mean_*)", breast_cancer()[names], Schema.model_validate(schema))


def randhie() -> Table:
    import statsmodels.api as sm

    frame = sm.datasets.randhie.load_pandas().data
    for c in ("idp", "hlthg", "hlthf", "hlthp"):
        frame[c] = frame[c].astype(int).astype(str)
    frame["mdvis"] = frame["mdvis"].astype(int)
    # Public bounds from the RAND HIE variable definitions (log coinsurance of 0-100 %, log
    # incentive payment, log max deductible, disease count), rounded outward.
    columns: dict = {
        "mdvis": {"type": "integer", "min": 0, "max": 80},
        "lncoins": {"type": "continuous", "min": 0, "max": 4.7},
        "lpi": {"type": "continuous", "min": 0, "max": 8},
        "fmde": {"type": "continuous", "min": 0, "max": 9},
        "physlm": {"type": "continuous", "min": 0, "max": 1},
        "disea": {"type": "continuous", "min": 0, "max": 60},
    }
    for c in ("idp", "hlthg", "hlthf", "hlthp"):
        columns[c] = {"type": "categorical", "categories": ["0", "1"]}
    schema = {"dataset": "randhie", "budget": {"epsilon": 100, "delta": 1e-3}}
    schema |= {"target": "mdvis", "columns": columns}
    return Table("randhie", frame[list(columns)], Schema.model_validate(schema))


TABLES = {"diabetes": diabetes, "breast": breast, "randhie": randhie}


class Evaluator:
    """Target model, 2-way TVD and downstream metric against fixed train/test rows."""

    def __init__(self, encoder: Encoder, train: np.ndarray, test: np.ndarray) -> None:
        self.encoder = encoder
        target = encoder.schema.target
        self.target = next(c for c in encoder.columns if c.name == target)
        self.categorical = self.target.is_categorical
        self.cells = [public_cells(column, BINS) for column in encoder.columns]
        self.train_cells = self._cells(train)
        self.beta_test = self._fit(test, np.ones(len(test)))[0]
        self.test = test

    def _cells(self, x: np.ndarray) -> list[np.ndarray]:
        return [cell_index(c, x) for c in self.cells]

    def _design(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        parts = []
        for column in self.encoder.columns:
            if column is self.target:
                continue
            block = x[:, column.start : column.stop]
            parts.append(block[:, 1:] if column.is_categorical else block)
        design = np.hstack(parts)
        # a categorical target: its second level (binary targets); numeric: the scaled value
        index = self.target.start + 1 if self.categorical else self.target.value_index
        return design, x[:, index]

    def _fit(self, x: np.ndarray, w: np.ndarray):
        design, y = self._design(x)
        if self.categorical:
            from sklearn.linear_model import LogisticRegression

            model = LogisticRegression(C=1.0, max_iter=2000).fit(design, y, sample_weight=w)
            return np.r_[model.intercept_, model.coef_.ravel()], model
        a = np.hstack([np.ones((len(design), 1)), design])
        sw = np.sqrt(w)[:, None]
        beta = np.linalg.lstsq(a * sw, y * sw[:, 0], rcond=None)[0]
        return beta, None

    def score(self, synthetic: np.ndarray, w: np.ndarray) -> dict[str, float]:
        beta, model = self._fit(synthetic, w)
        design, y = self._design(self.test)
        if self.categorical:
            from sklearn.metrics import roc_auc_score

            downstream = roc_auc_score(y, model.predict_proba(design)[:, 1])
        else:
            downstream = float(np.mean((beta[0] + design @ beta[1:] - y) ** 2))
        return {
            "beta_mse": float(np.mean((beta - self.beta_test) ** 2)),
            "tvd2": self._tvd2(synthetic, w),
            "downstream": float(downstream),
            "ess": ess(np.log(w)) / len(w),
        }

    def _tvd2(self, synthetic: np.ndarray, w: np.ndarray) -> float:
        syn = self._cells(synthetic)
        out = []
        for i, j in combinations(range(len(self.cells)), 2):
            shape = (self.cells[i].size, self.cells[j].size)
            p = np.bincount(
                np.ravel_multi_index((self.train_cells[i], self.train_cells[j]), shape),
                minlength=shape[0] * shape[1],
            )
            q = np.bincount(
                np.ravel_multi_index((syn[i], syn[j]), shape),
                weights=w,
                minlength=shape[0] * shape[1],
            )
            out.append(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())
        return float(np.mean(out))


def opendp_peer(
    algorithm_name: str, table: Table, train: pd.DataFrame, epsilon: float, args, seed: int
) -> pd.DataFrame:
    """OpenDP's AIM/MST on the raw training rows with public keys and cuts."""
    import opendp.prelude as dp
    import polars as pl

    keys, cuts, frame = {}, {}, {}
    for name, spec in table.schema.columns.items():
        if isinstance(spec, CategoricalColumn):
            keys[name] = list(spec.categories)
            frame[name] = train[name].astype(str).to_numpy()
            continue
        column = next(c for c in Encoder(table.schema).columns if c.name == name)
        cells = public_cells(column, BINS)
        edges = cells.edges * (spec.max - spec.min) + spec.min
        # OpenDP's bins are left-open, (a, b]; ours are [a, b): a value on an edge (integers,
        # rounded measurements) belongs to the upper bin, so cut just below each edge. The
        # bounds are cuts too: OpenDP decodes its two outer bins as 1 unit beyond the outer
        # cuts (it does not know the bounds), so they must be the empty ones outside.
        cuts[name] = [float(v) for v in np.nextafter(edges[:-1], -np.inf)] + [float(edges[-1])]
        frame[name] = train[name].to_numpy(dtype=float)
    estimator = counted_estimator(args.iters, lambda: None)
    if algorithm_name == "aim":
        algorithm = dp.mbi.AIM(estimator=estimator, rounds=args.aim_rounds)
    else:
        algorithm = dp.mbi.MST(estimator=estimator)
    rho, _ = zcdp_rho(epsilon, DELTA)
    released = fit_contingency_table(pl.DataFrame(frame), rho, algorithm, keys=keys, cuts=cuts)
    np.random.seed(seed)  # OpenDP's synthesize samples with numpy's global state
    out = released.synthesize(N_SYNTHETIC, method="sample").to_pandas()
    for name, spec in table.schema.columns.items():
        if isinstance(spec, CategoricalColumn):
            # rows in OpenDP's extra null key (noise mass) get the first category
            out[name] = out[name].fillna(spec.categories[0])
        else:
            values = out[name].astype(float).fillna(spec.min).clip(spec.min, spec.max)
            out[name] = np.rint(values) if isinstance(spec, IntegerColumn) else values
    return out


def run(args) -> dict:
    results: dict = defaultdict(lambda: defaultdict(list))
    for table_name in args.tables:
        table = TABLES[table_name]()
        encoder = Encoder(table.schema)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            rng = np.random.default_rng(seed)
            order = rng.permutation(len(table.frame))
            cut = int(0.8 * len(order))
            train_frame = table.frame.iloc[order[:cut]].reset_index(drop=True)
            test_frame = table.frame.iloc[order[cut:]].reset_index(drop=True)
            train = encoder.encode(_clip(train_frame, table.schema))
            test = encoder.encode(_clip(test_frame, table.schema))
            evaluator = Evaluator(encoder, train, test)
            for epsilon in args.epsilons:
                key = (table.name, epsilon)
                for peer in args.peers:
                    start = time.perf_counter()
                    synthetic = opendp_peer(peer, table, train_frame, epsilon, args, seed)
                    encoded = encoder.encode(synthetic)
                    row = evaluator.score(encoded, np.ones(len(encoded)))
                    row["time"] = time.perf_counter() - start
                    _record(results[key], f"opendp-{peer}", row, args)
                for generator_name in args.generators:
                    start = time.perf_counter()
                    options = _generator_options(generator_name, args)
                    generator = make_generator(
                        generator_name,
                        encoder,
                        (1 - args.fraction) * epsilon,
                        (1 - args.fraction) * DELTA,
                        **options,
                    )
                    fitted = generator.fit(train)
                    synthetic = fitted.sample(N_SYNTHETIC, np.random.default_rng(seed))
                    generator_time = time.perf_counter() - start
                    for method in args.weights:
                        start = time.perf_counter()
                        w = _weights(method, train, synthetic, encoder, epsilon, args)
                        row = evaluator.score(synthetic, w)
                        row["time"] = generator_time + time.perf_counter() - start
                        _record(results[key], f"{generator_name}+{method}", row, args)
                print(f"# done {table.name} eps={epsilon} seed={seed}", flush=True)
        _print_table(results, table.name, args)
    return results


def _generator_options(name: str, args) -> dict:
    if name == "aim":
        return {"iters": args.iters, "rounds": args.aim_rounds}
    if name == "mst":
        return {"iters": args.iters}
    return {}


def _weights(method, train, synthetic, encoder, epsilon, args) -> np.ndarray:
    if method == "none":
        return np.ones(len(synthetic))
    options = {"encoder": encoder} if method == "calibration" else {}
    if method == PAPER_BETA_DEBIASED:  # the paper's estimator without the noise gate
        method, options = "beta_debiased", {"noise_gate": False}
    estimate = weight_methods.estimate(
        method,
        train,
        synthetic,
        epsilon=args.fraction * epsilon,
        delta=args.fraction * DELTA,
        **options,
    )
    return estimate.weights


def _clip(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    frame = frame.copy()
    for name, spec in schema.columns.items():
        if not isinstance(spec, CategoricalColumn):
            frame[name] = frame[name].clip(spec.min, spec.max)
    return frame


def _record(bucket: dict, method: str, row: dict, args) -> None:
    bucket[method].append(row)
    if args.verbose:
        print(f"  {method}: " + ", ".join(f"{k}={v:.4g}" for k, v in row.items()), flush=True)


def _print_table(results: dict, table_name: str, args) -> None:
    for (name, epsilon), methods in results.items():
        if name != table_name:
            continue
        print(f"\n## {name}, epsilon = {epsilon:g} ({len(next(iter(methods.values())))} seeds)")
        print(
            "| method | beta-MSE | TVD2 | downstream (MSE or AUC) | ESS/N_G | time s |\n"
            "|---|---|---|---|---|---|"
        )
        for method, rows in methods.items():
            cells = []
            for metric in ("beta_mse", "tvd2", "downstream", "ess", "time"):
                values = np.array([r[metric] for r in rows])
                se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.nan
                cells.append(f"{values.mean():.4g} ± {se:.2g}")
            print(f"| {method} | " + " | ".join(cells) + " |")
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--peers", nargs="*", default=["aim", "mst"])
    parser.add_argument("--generators", nargs="*", default=["mst", "marginals"])
    parser.add_argument("--weights", nargs="+", default=["none", "calibration", "beta_debiased"])
    parser.add_argument("--fraction", type=float, default=0.2)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--aim-rounds", type=int, default=40)
    parser.add_argument("--verbose", action="store_true")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
