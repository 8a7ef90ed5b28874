"""Benchmark: the DP synthetic-data generators on the census demo table.

For pgm, marginals, privbayes, dpgan and dpcgan at epsilon 1 and 6 (delta 1e-5 for the GANs) on
`census_like(30000)`: fit time, sample time (30,000 rows), peak resident memory of the run,
and the mean and max 1-way and mean 2-way total variation distance between the real and the
synthetic table over the public cells (16 bins per numeric column). Each run is a fresh
process, so its peak RSS (`resource.getrusage`) is its own; the table also shows the RSS
before fitting (interpreter, libraries, data), so the fit's own footprint is the difference.

The GANs use their defaults except `sample_rate` = 256 / 30,000: the schema's public max_rows
(100,000) would give q = 256 / 100,000 and an expected real lot of 77 rows against 256 fake
ones; a curator who knows the table's order of magnitude sets q like this (it is public
configuration, not read from the data).

Then DP-SGD throughput: the same GAN step (one DP-SGD discriminator step on a Poisson batch of
real rows plus 256 fake rows, then one generator step) run by our `train_dpsgd` and by a plain
Opacus loop (`PrivacyEngine.make_private` with Poisson sampling) with the same models, in
discriminator rows per second (best of 3), to show the wrapper adds no overhead.

Run: ``.venv/bin/python benchmarks/generators.py`` (several minutes).
"""

from __future__ import annotations

import resource
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
N_ROWS = 30_000
EPSILONS = (1.0, 6.0)
DELTA = 1e-5
GENERATORS = ("pgm", "marginals", "privbayes", "dpgan", "dpcgan")
GAN_OPTIONS = {"sample_rate": 256 / N_ROWS}
THROUGHPUT_STEPS = 300
REPEATS = 3


def _census() -> tuple[object, np.ndarray]:
    from dprelease.datasets import census_like
    from dprelease.encoding import Encoder, column_dtypes
    from dprelease.schema import load_schema

    schema = load_schema(ROOT / "data" / "census.yaml")
    encoder = Encoder(schema)
    return encoder, encoder.encode(census_like(N_ROWS, seed=0).astype(column_dtypes(schema)))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_generator(name: str, epsilon: float) -> dict[str, float | str]:
    """Fit and sample one generator in this (fresh) process; return times, memory, TVDs."""
    import torch

    from dprelease.generators import make_generator
    from dprelease.generators.domain import marginal_tvd

    torch.set_num_threads(1)
    encoder, real = _census()
    is_gan = name in ("dpgan", "dpcgan")
    delta = DELTA if is_gan else 0.0
    generator = make_generator(name, encoder, epsilon, delta, **(GAN_OPTIONS if is_gan else {}))
    rss_before = _peak_rss_mb()
    start = time.perf_counter()
    fitted = generator.fit(real)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    synthetic = fitted.sample(N_ROWS, np.random.default_rng(0))
    sample_seconds = time.perf_counter() - start
    one_way = list(marginal_tvd(encoder, real, synthetic).values())
    two_way = list(marginal_tvd(encoder, real, synthetic, order=2).values())
    return {
        "generator": name,
        "epsilon": epsilon,
        "fit_s": fit_seconds,
        "sample_s": sample_seconds,
        "rss_before_mb": rss_before,
        "peak_rss_mb": _peak_rss_mb(),
        "tvd1_mean": float(np.mean(one_way)),
        "tvd1_max": float(np.max(one_way)),
        "tvd2_mean": float(np.mean(two_way)),
    }


def run_throughput() -> dict[str, float]:
    """D rows per second of `train_dpsgd` and of a plain Opacus loop (best of REPEATS)."""
    import warnings

    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    from dprelease.generators.gan.dpgan import DPGAN
    from dprelease.generators.gan.nets import ADAM_BETAS, DPSGDPlan, train_dpsgd

    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    torch.set_num_threads(1)
    encoder, real = _census()
    gan = DPGAN(encoder, 6.0, DELTA, steps=THROUGHPUT_STEPS, seed=0, **GAN_OPTIONS)
    features = gan.feature_map()(real)
    size = gan.options.batch_size
    plan = DPSGDPlan(
        noise_multiplier=gan.noise_multiplier,
        sample_rate=gan.sample_rate,
        steps=THROUGHPUT_STEPS,
        delta=DELTA,
        max_grad_norm=gan.options.max_grad_norm,
        batch_size=size,
        learning_rate_d=gan.options.learning_rate_d,
        learning_rate_g=gan.options.learning_rate_g,
        average_decay=gan.options.average_decay,
        secure=False,
        progress=False,
        label="benchmark",
    )

    def ours() -> None:
        generator, discriminator = gan.build_networks()
        train_dpsgd(generator, discriminator, features, gan.conditions, plan)

    def plain() -> None:
        generator, discriminator = gan.build_networks()
        d_optimizer = torch.optim.Adam(
            discriminator.parameters(), lr=plan.learning_rate_d, betas=ADAM_BETAS
        )
        g_optimizer = torch.optim.Adam(
            generator.parameters(), lr=plan.learning_rate_g, betas=ADAM_BETAS
        )
        loader = DataLoader(TensorDataset(torch.from_numpy(features)), batch_size=size)
        d_model, d_optimizer, loader = PrivacyEngine(accountant="rdp").make_private(
            module=discriminator,
            optimizer=d_optimizer,
            data_loader=loader,
            noise_multiplier=plan.noise_multiplier,
            max_grad_norm=plan.max_grad_norm,
            poisson_sampling=True,
        )
        bce = torch.nn.BCEWithLogitsLoss()
        noise = torch.Generator().manual_seed(0)
        done = 0
        while done < plan.steps:
            for (real_rows,) in loader:
                with torch.no_grad():
                    fake = generator.sample(size, None, noise)
                labels = torch.cat([torch.ones(len(real_rows)), torch.zeros(size)])
                d_optimizer.zero_grad()
                bce(d_model(torch.cat([real_rows, fake])).squeeze(-1), labels).backward()
                d_optimizer.step()
                d_model.disable_hooks()
                d_model.requires_grad_(False)
                g_optimizer.zero_grad()
                fake = generator.sample(size, None, noise)
                bce(d_model(fake).squeeze(-1), torch.ones(size)).backward()
                g_optimizer.step()
                d_model.requires_grad_(True)
                d_model.enable_hooks()
                done += 1
                if done == plan.steps:
                    break

    best = {"ours": float("inf"), "plain_opacus": float("inf")}
    for _ in range(REPEATS):
        for label, loop in (("ours", ours), ("plain_opacus", plain)):
            start = time.perf_counter()
            loop()
            best[label] = min(best[label], time.perf_counter() - start)
    rows = THROUGHPUT_STEPS * 2 * size  # expected real lot plus fake rows per D step
    return {label: rows / seconds for label, seconds in best.items()}


def main() -> None:
    runs = [(name, epsilon) for epsilon in EPSILONS for name in GENERATORS]
    context = get_context("spawn")
    results = []
    for name, epsilon in runs:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            results.append(pool.submit(run_generator, name, epsilon).result())
        print(f"done: {name} at epsilon {epsilon}", flush=True)
    header = (
        f"{'generator':>10} {'eps':>4} {'fit [s]':>8} {'sample [s]':>10} {'RSS0 [MB]':>9} "
        f"{'peak [MB]':>9} {'TVD1 mean':>9} {'TVD1 max':>8} {'TVD2 mean':>9}"
    )
    print(f"census_like({N_ROWS}); 16 public bins per numeric column")
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['generator']:>10} {r['epsilon']:4.0f} {r['fit_s']:8.2f} {r['sample_s']:10.2f} "
            f"{r['rss_before_mb']:9.0f} {r['peak_rss_mb']:9.0f} {r['tvd1_mean']:9.3f} "
            f"{r['tvd1_max']:8.3f} {r['tvd2_mean']:9.3f}"
        )
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        throughput = pool.submit(run_throughput).result()
    print(f"\nDP-SGD GAN step throughput, {THROUGHPUT_STEPS} steps, best of {REPEATS}:")
    for label, rate in throughput.items():
        print(f"{label:>13}: {rate:10,.0f} discriminator rows/s")
    print(f"{'ratio':>13}: {throughput['ours'] / throughput['plain_opacus']:10.2f}")


if __name__ == "__main__":
    main()
