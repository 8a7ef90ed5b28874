"""Benchmark: DP-GAN discriminator weights on a small mixed-type table.

A 1,000-row, 12-column table (the census-like demo table plus two integer, one categorical
and one continuous column, all public synthetic data), schema max_rows 1,000, so the DP-GAN's
default sampling rate is q = 256 / 1,000. At epsilon 1 (delta 1e-5) it fits `dpgan` with the
default number of steps (`gan.default_steps`) and with a fixed T = 2,000, then prints per
run: T, the noise on D's averaged gradient sigma / (2L), the distinct synthetic rows among
1,000 sampled, the distinct discriminator log weights in the PSIS tail, k-hat and the
verdict, and the max / mean 1-way total variation distance to the real table (16 public
bins). A collapsed generator (few distinct rows) makes the PSIS fit meaningless or failing,
so the distinct rows are the figure to read first. The measurements that chose the default
number of steps: docs/decisions/0023-other-generators-defaults.md.

Run: ``.venv/bin/python benchmarks/gan_discriminator_weights.py`` (a few minutes, one core).
"""

from __future__ import annotations

import math
import time

import numpy as np

EPSILON, DELTA, N_ROWS = 1.0, 1e-5, 1000


def table_and_encoder() -> tuple[np.ndarray, object]:
    from dprelease.datasets import census_like
    from dprelease.encoding import Encoder, column_dtypes
    from dprelease.schema import Schema

    rng = np.random.default_rng(1)
    frame = census_like(N_ROWS, seed=3)
    frame["tenure"] = rng.integers(0, 40, N_ROWS)
    frame["kids"] = rng.integers(0, 5, N_ROWS)
    frame["married"] = np.where(rng.random(N_ROWS) < 0.5, "yes", "no")
    frame["score"] = np.round(rng.random(N_ROWS) * 100, 3)
    columns = {
        "age": {"type": "integer", "min": 17, "max": 90},
        "education": {"type": "integer", "min": 0, "max": 20},
        "hours": {"type": "integer", "min": 1, "max": 99},
        "sex": {"type": "categorical", "categories": ["female", "male"]},
        "region": {"type": "categorical", "categories": ["northeast", "midwest", "south", "west"]},
        "wage": {"type": "continuous", "min": 0, "max": 20000},
        "capital_gain": {"type": "continuous", "min": 0, "max": 100000, "nullable": True},
        "high_earner": {"type": "categorical", "categories": ["no", "yes"]},
        "tenure": {"type": "integer", "min": 0, "max": 40},
        "kids": {"type": "integer", "min": 0, "max": 10},
        "married": {"type": "categorical", "categories": ["no", "yes"]},
        "score": {"type": "continuous", "min": 0, "max": 100},
    }
    schema = Schema.model_validate(
        {
            "dataset": "bench",
            "max_rows": N_ROWS,
            "budget": {"epsilon": 10.0, "delta": DELTA},
            "columns": columns,
        }
    )
    encoder = Encoder(schema)
    return encoder.encode(frame.astype(column_dtypes(schema))), encoder


def run(steps: int | None) -> dict[str, object]:
    import torch

    from dprelease import weights
    from dprelease.diagnostics import psis
    from dprelease.generators import make_generator
    from dprelease.generators.domain import marginal_tvd

    torch.set_num_threads(1)
    real, encoder = table_and_encoder()
    options = {} if steps is None else {"steps": steps}
    generator = make_generator("dpgan", encoder, EPSILON, DELTA, **options)
    started = time.perf_counter()
    fitted = generator.fit(real)
    seconds = time.perf_counter() - started
    synthetic = fitted.sample(N_ROWS, np.random.default_rng(0))
    log_weights = weights.estimate(
        "discriminator", None, synthetic, discriminator=fitted.discriminator
    ).log_weights
    result = psis(log_weights)
    tail = np.sort(log_weights)[-math.ceil(min(0.2 * N_ROWS, 3 * math.sqrt(N_ROWS))) :]
    tvd = list(marginal_tvd(encoder, real, synthetic).values())
    return {
        "T": generator.options.steps,
        "noise/step": generator.noise_multiplier / (2 * generator.options.batch_size),
        "distinct rows": len(np.unique(synthetic, axis=0)),
        "distinct tail": f"{len(np.unique(tail))}/{len(tail)}",
        "k-hat": result.k_hat,
        "verdict": result.verdict,
        "tvd max": max(tvd),
        "tvd mean": float(np.mean(tvd)),
        "fit s": seconds,
    }


def main() -> None:
    rows = [("default", run(None)), ("T=2000", run(2000))]
    header = ["run", *rows[0][1]]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for name, row in rows:
        cells = [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()]
        print("| " + " | ".join([name, *cells]) + " |")


if __name__ == "__main__":
    main()
