"""DP-GAN and DP-CGAN: calibration before training, exact accounting, discriminator weights,
saving, reproducible sampling, utility and refusals.

Training runs are short and use one torch thread. The utility checks seed the torch generators
that production seeds from OS entropy (Poisson sampling, gradient noise, fake batches) so that
they are reproducible; like `SeededNoise`, that seeding exists only in tests.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from itertools import count
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from dprelease import weights
from dprelease.datasets import census_like
from dprelease.encoding import Encoder, column_dtypes, in_codebook
from dprelease.errors import InputError
from dprelease.generators import GENERATORS, make_generator
from dprelease.generators.domain import marginal_tvd
from dprelease.generators.gan import nets
from dprelease.generators.gan.cgan import DPCGAN
from dprelease.generators.gan.dpgan import DPGAN
from dprelease.privacy import dpsgd as dpsgd_module
from dprelease.privacy.accounting import compose
from dprelease.privacy.calibration import dpsgd_epsilon, dpsgd_noise_multiplier
from dprelease.schema import Schema, load_schema

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
ENCODER = Encoder(SCHEMA)
DELTA = 1e-5
SMALL = {"hidden": (16, 16), "latent_dim": 8, "batch_size": 32, "sample_rate": 0.1}


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def seeded_entropy(monkeypatch):
    """Replace the OS-entropy torch generators of DP-SGD by seeded ones (tests only)."""
    seeds = count(1000)

    def seeded() -> torch.Generator:
        return torch.Generator().manual_seed(next(seeds))

    monkeypatch.setattr(nets, "entropy_generator", seeded)
    monkeypatch.setattr(dpsgd_module, "entropy_generator", seeded)


def encoded_census(n: int, seed: int) -> np.ndarray:
    return ENCODER.encode(census_like(n, seed).astype(column_dtypes(SCHEMA)))


def schema_with(**changes: object) -> Schema:
    return SCHEMA.model_copy(update=changes)


def test_registry_and_import_do_not_need_torch():
    assert {"dpgan", "dpcgan", "privbayes", "marginals"} <= set(GENERATORS)
    assert GENERATORS["dpgan"].has_discriminator and GENERATORS["dpcgan"].has_discriminator
    code = "import sys, dprelease.generators; assert 'torch' not in sys.modules, 'torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_sigma_is_calibrated_at_construction_from_public_quantities():
    generator = DPGAN(ENCODER, 3.0, DELTA, steps=200, batch_size=256)
    q = 256 / SCHEMA.max_rows  # the default: batch_size / max_rows
    (spend,) = generator.planned_spends()
    sigma = dpsgd_noise_multiplier(3.0, DELTA, q, 200)
    assert spend.params["sample_rate"] == q
    assert spend.params["noise_multiplier"] == sigma
    assert spend.params["steps"] == 200 and spend.params["accountant"] == "rdp"
    assert spend.params["max_grad_norm"] == 1.0 and spend.params["expected_batch_size"] == 512
    reported = dpsgd_epsilon(sigma, DELTA, q, 200)
    assert spend.epsilon == reported == spend.params["epsilon_reported"]
    assert 0.98 * 3.0 <= reported <= 3.0 and spend.delta == DELTA


def test_dpcgan_splits_the_budget_between_labels_and_dpsgd():
    generator = DPCGAN(ENCODER, 2.0, DELTA, steps=100, sample_rate=0.01, label_fraction=0.25)
    labels, dpsgd = generator.planned_spends()
    assert labels.mechanism == "laplace-histogram" and labels.delta == 0.0
    assert labels.epsilon == 0.5 and labels.params["laplace_scale"] == 2.0
    assert labels.params["l1_sensitivity"] == 1.0 and labels.params["cells"] == 2
    assert dpsgd.params["epsilon_target"] == 1.5
    assert 0.98 * 1.5 <= dpsgd.epsilon <= 1.5
    assert compose([labels, dpsgd]).epsilon <= 2.0


@pytest.mark.parametrize("name", ["dpgan", "dpcgan"])
def test_every_private_step_is_accounted(name, monkeypatch, capsys, seeded_noise):
    from opacus.optimizers import DPOptimizer

    calls = []
    original = DPOptimizer.step
    monkeypatch.setattr(
        DPOptimizer, "step", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    generator = make_generator(name, ENCODER, 4.0, DELTA, steps=25, **SMALL)
    spends = generator.fit(encoded_census(300, seed=1), seeded_noise(0)).spends
    dpsgd = spends[-1]
    history = dpsgd.params["opacus_history"]
    assert history == [[generator.noise_multiplier, 0.1, 25]]
    assert len(calls) == dpsgd.params["private_steps"] == history[0][2] == 25
    reported = dpsgd.params["opacus_epsilon"]
    assert reported == pytest.approx(dpsgd.epsilon, rel=1e-12)
    assert 0.98 * generator.dpsgd_target <= reported <= generator.dpsgd_target
    assert compose(spends).epsilon <= 4.0
    assert capsys.readouterr().err == ""  # no progress bar unless asked for


def test_label_histogram_noises_every_category(seeded_noise):
    requests = []

    class Recording(seeded_noise):
        def add_laplace(self, values, scale, *, counts=False):  # noqa: ANN001, ANN201
            requests.append((scale, np.shape(values), counts))
            return super().add_laplace(values, scale, counts=counts)

    generator = DPCGAN(ENCODER, 1.0, DELTA, steps=2, **SMALL)
    only_no = encoded_census(40, seed=0)
    only_no = only_no[only_no[:, -2] == 1.0]  # every row has high_earner = "no"
    labels = generator.fit(only_no, Recording(0)).state.labels
    assert requests == [(generator.label_scale, (2,), True)]  # the empty "yes" cell too
    assert labels is not None
    assert labels.shape == (2,)


def triangle_encoder() -> Encoder:
    schema = Schema.model_validate(
        {
            "dataset": "triangle",
            "budget": {"epsilon": 10.0, "delta": DELTA},
            "columns": {
                "x1": {"type": "continuous", "min": 0, "max": 1},
                "x2": {"type": "continuous", "min": 0, "max": 1},
            },
        }
    )
    return Encoder(schema)


def test_discriminator_weights_move_mass_onto_the_triangle(seeded_entropy):
    """Real rows: uniform on x1 + x2 < 1. Synthetic rows: uniform on the square.

    G's learning rate is ~0, so the fake rows D is trained against stay near G's initial,
    near-uniform output (triangle mass 0.49): the toy's synthetic distribution. Measured
    weighted triangle mass 0.94; uniform weights give 0.50; bound 0.7.
    """
    rng = np.random.default_rng(0)
    square = rng.random((8000, 2))
    real = square[square.sum(axis=1) < 1][:3000]
    encoder = triangle_encoder()
    generator = make_generator(
        "dpgan",
        encoder,
        10.0,
        DELTA,
        steps=100,
        batch_size=150,
        sample_rate=0.05,
        hidden=(32, 32),
        latent_dim=8,
        learning_rate_d=3e-3,
        learning_rate_g=1e-6,
        seed=0,
    )
    fitted = generator.fit(real)
    fake = fitted.sample(4000, np.random.default_rng(2))
    assert abs((fake.sum(axis=1) < 1).mean() - 0.5) < 0.05
    synthetic = np.random.default_rng(1).random((4000, 2))
    estimate = weights.estimate(
        "discriminator", None, synthetic, discriminator=fitted.discriminator
    )
    assert estimate.epsilon_spent == 0.0 and estimate.delta_spent == 0.0
    w = estimate.weights
    on_triangle = synthetic.sum(axis=1) < 1
    assert abs(on_triangle.mean() - 0.5) < 0.02
    assert w[on_triangle].sum() / w.sum() > 0.7


@pytest.mark.parametrize("name", ["dpgan", "dpcgan"])
def test_census_utility_at_epsilon_10(name, seeded_entropy, seeded_noise):
    """Max 1-way TVD (16 public bins), n = 5,000, 300 steps: 0.17 - 0.28 in 10 runs; bound 0.35."""
    real = encoded_census(5000, seed=7)
    options = {"steps": 300, "batch_size": 128, "sample_rate": 128 / 5000, "seed": 0}
    generator = make_generator(name, ENCODER, 10.0, DELTA, **options)
    synthetic = generator.fit(real, seeded_noise(0)).sample(5000, np.random.default_rng(1))
    assert max(marginal_tvd(ENCODER, real, synthetic).values()) < 0.35
    table = ENCODER.decode(synthetic)
    assert table["age"].between(17, 90).all() and table["wage"].between(0, 20000).all()
    missing = synthetic[:, ENCODER.columns[6].missing_index] == 1.0
    assert (synthetic[missing, ENCODER.columns[6].value_index] == 0.0).all()


def test_sampling_is_reproducible_and_survives_save_and_load(tmp_path, seeded_noise):
    generator = make_generator("dpcgan", ENCODER, 2.0, DELTA, steps=5, **SMALL, seed=3)
    fitted = generator.fit(encoded_census(200, seed=2), seeded_noise(0))
    first = fitted.sample(300, np.random.default_rng(9), batch_rows=128)
    np.testing.assert_array_equal(
        first, fitted.sample(300, np.random.default_rng(9), batch_rows=128)
    )
    blocks = [first[:, c.start : c.stop] for c in ENCODER.columns if c.is_categorical]
    assert all(((b == 0) | (b == 1)).all() and (b.sum(axis=1) == 1).all() for b in blocks)
    assert ((first >= 0) & (first <= 1)).all()

    generator.save(fitted, tmp_path)
    architecture = json.loads((tmp_path / "gan.json").read_text())
    assert architecture["generator"] == "dpcgan" and architecture["options"]["steps"] == 5
    loaded = DPCGAN.load(tmp_path, ENCODER)
    np.testing.assert_array_equal(
        first, loaded.sample(300, np.random.default_rng(9), batch_rows=128)
    )
    np.testing.assert_array_equal(
        fitted.discriminator.logit(first), loaded.discriminator.logit(first)
    )
    with pytest.raises(InputError, match="not a saved dpgan"):
        DPGAN.load(tmp_path, ENCODER)
    other = Encoder(schema_with(columns={"age": SCHEMA.columns["age"]}))
    with pytest.raises(InputError, match="different schema encoding"):
        DPCGAN.load(tmp_path, other)


def test_refusals_name_the_problem():
    no_max_rows = Encoder(schema_with(max_rows=None))
    with pytest.raises(InputError, match="set the option sample_rate, or max_rows"):
        make_generator("dpgan", no_max_rows, 1.0, DELTA)
    assert make_generator("dpgan", no_max_rows, 1.0, DELTA, sample_rate=0.01, steps=10)
    with pytest.raises(InputError, match="must be a categorical column"):
        make_generator("dpcgan", Encoder(schema_with(target="wage")), 1.0, DELTA)
    with pytest.raises(InputError, match="must be a categorical column"):
        make_generator("dpcgan", Encoder(schema_with(target=None)), 1.0, DELTA)
    with pytest.raises(InputError, match="DP-SGD needs 0 < delta < 1"):
        make_generator("dpgan", ENCODER, 1.0, 0.0)
    with pytest.raises(InputError, match="unexpected keyword argument 'early_stopping'"):
        make_generator("dpgan", ENCODER, 1.0, DELTA, early_stopping=True)
    assert not hasattr(DPGAN(ENCODER, 1.0, DELTA, steps=10), "discriminator")  # fit first


def test_mechanism_randomness_is_not_the_user_seed():
    """The seed fixes the initial weights only: two fits differ (Poisson batches and noise come
    from OS entropy), and the caller's global torch RNG is left untouched."""
    generator = make_generator("dpgan", ENCODER, 2.0, DELTA, steps=3, **SMALL, seed=5)
    first, second = (generator.build_networks()[1].state_dict() for _ in range(2))
    assert all(torch.equal(first[key], second[key]) for key in first)
    real = encoded_census(100, seed=0)
    state = torch.get_rng_state()
    fits = []
    for _ in range(2):
        fits.append(generator.fit(real).discriminator.logit(real))
    assert torch.equal(state, torch.get_rng_state())
    assert not np.allclose(fits[0], fits[1])


def test_secure_noise_turns_on_opacus_secure_mode(monkeypatch):
    from opacus.optimizers import DPOptimizer

    from dprelease.privacy.noise import NoiseSource

    modes = []
    original = DPOptimizer.__init__

    def spy(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        modes.append(kwargs["secure_mode"])
        original(self, *args, **kwargs)

    monkeypatch.setattr(DPOptimizer, "__init__", spy)
    generator = make_generator("dpcgan", ENCODER, 2.0, DELTA, steps=2, **SMALL)
    labels, dpsgd = generator.fit(encoded_census(60, seed=0), NoiseSource(secure=True)).spends
    assert modes == [True] and dpsgd.params["secure_noise"] is True
    # Each spend records the noise it really drew: OpenDP's Laplace for the label histogram,
    # Opacus' secure-mode Gaussian (not OpenDP) for DP-SGD.
    assert labels.params["noise_source"] == "opendp"
    assert dpsgd.params["noise_source"] == (
        "opacus DPOptimizer secure-mode gaussian, torch generator seeded from OS entropy"
    )


def test_generator_features_match_the_discriminator_feature_map():
    """D sees G's cell one-hots in training and recomputed cells at inference: they agree,
    even with saturated outputs (values at the edge of their bin)."""
    features = nets.FeatureMap(ENCODER, 16)
    generator = nets.TabularGenerator(ENCODER, features, 8, (16,), None)
    with torch.no_grad():
        for parameter in generator.parameters():
            parameter.normal_(0.0, 5.0, generator=torch.Generator().manual_seed(0))
        phi = generator.sample(5000, None, torch.Generator().manual_seed(1)).numpy()
    np.testing.assert_array_equal(features(phi[:, : ENCODER.width].astype(float)), phi)


def test_progress_bar_on_request(capsys, seeded_noise):
    generator = make_generator("dpgan", ENCODER, 2.0, DELTA, steps=2, progress=True, **SMALL)
    generator.fit(encoded_census(50, seed=0), seeded_noise(0))
    assert "dpgan DP-SGD" in capsys.readouterr().err


def test_saturated_discriminator_gives_untied_log_weights_and_a_finite_k_hat():
    """A saturated D has large logits: P(real | x) rounds to 1 and float32 logits tie, but
    the log weights (float64 logits) stay distinct in the PSIS tail and k-hat is finite."""
    from dprelease.diagnostics import psis

    generator = DPGAN(ENCODER, 2.0, DELTA, steps=2, seed=0, **SMALL)
    _, net = generator.build_networks()
    last = net[-1]
    with torch.no_grad():
        last.weight.mul_(0.1)
        last.bias.add_(50000.0)  # saturated: logit ~ 50,000 for every row
    rows = encoded_census(2000, seed=3)
    discriminator = nets.DiscriminatorLogit(net, generator.feature_map())
    log_weights = weights.estimate(
        "discriminator", None, rows, discriminator=discriminator
    ).log_weights
    features = torch.from_numpy(generator.feature_map()(rows))
    with torch.no_grad():
        float32_logits = net(features).squeeze(-1).numpy()
    assert (torch.sigmoid(torch.from_numpy(float32_logits)) == 1.0).all()  # saturated
    tail = np.sort(log_weights)[-math.ceil(min(0.2 * 2000, 3 * math.sqrt(2000))) - 1 :]
    assert len(np.unique(tail)) == len(tail)  # no ties in the tail or at its cutoff
    np.testing.assert_allclose(log_weights, float32_logits, rtol=1e-6)  # the same function
    assert len(np.unique(float32_logits)) < 0.5 * len(rows)  # float32 would tie them
    result = psis(log_weights)
    assert np.isfinite(result.k_hat)
    assert not np.isfinite(psis(float32_logits.astype(float)).k_hat)


def test_numeric_columns_may_be_named_like_module_attributes():
    """Column names such as "children" (an nn.Module method) or "a.b" build a generator."""
    schema = Schema.model_validate(
        {
            "dataset": "names",
            "max_rows": 1000,
            "budget": {"epsilon": 10.0, "delta": DELTA},
            "columns": {
                "children": {"type": "integer", "min": 0, "max": 10},
                "income.total": {"type": "continuous", "min": 0, "max": 1, "nullable": True},
                "training": {"type": "categorical", "categories": ["no", "yes"]},
            },
        }
    )
    encoder = Encoder(schema)
    generator = DPGAN(encoder, 2.0, DELTA, steps=2, seed=0, **SMALL)
    net, _ = generator.build_networks()
    with torch.no_grad():
        rows = net.sample(50, None, torch.Generator().manual_seed(0))[:, : encoder.width]
    table = encoder.decode(rows.double().numpy())
    assert table["children"].between(0, 10).all() and list(table.columns) == list(schema.columns)


def test_default_steps_keep_the_per_step_noise_small_on_small_tables():
    """With max_rows 1,000 (q = 0.256) at epsilon 1, T = 2,000 puts noise 0.09 on D's averaged
    gradient and G collapsed (tied discriminator weights); the default T keeps it near 0.04.
    Large tables keep T = 2,000."""
    from dprelease.generators.gan.steps import (
        DEFAULT_MAX_STEPS,
        NOISE_PER_STEP_TARGET,
        default_steps,
    )

    small = DPGAN(Encoder(schema_with(max_rows=1000)), 1.0, DELTA)
    steps = small.options.steps
    assert 100 < steps < DEFAULT_MAX_STEPS
    noise = small.noise_multiplier / (2 * 256)
    assert 0.9 * NOISE_PER_STEP_TARGET <= noise <= 1.05 * NOISE_PER_STEP_TARGET
    (spend,) = small.planned_spends()
    assert spend.params["steps"] == steps and small.public_options()["steps"] == steps
    assert default_steps(1.0, DELTA, 256 / 100_000, 256) == DEFAULT_MAX_STEPS


def test_gan_samples_keep_a_long_codebook(seeded_noise):
    codebook = [float(v) for v in np.linspace(15.0, 60.0, 40)]  # more values than cells
    schema = Schema.model_validate(
        {
            "dataset": "coded",
            "max_rows": 1_000,
            "budget": {"epsilon": 10.0, "delta": 1e-5},
            "columns": {
                "age": {"type": "continuous", "min": 0, "max": 60, "values": codebook},
                "group": {"type": "categorical", "categories": ["a", "b"]},
            },
        }
    )
    encoder = Encoder(schema)
    rng = np.random.default_rng(0)
    real = pd.DataFrame({"age": rng.choice(codebook, 200), "group": rng.choice(["a", "b"], 200)})
    generator = make_generator("dpgan", encoder, 4.0, DELTA, steps=5, **SMALL)
    rows = generator.fit(encoder.encode(real), seeded_noise(0)).sample(300, rng)
    assert in_codebook(rows[:, 0] * 60.0, tuple(codebook)).all()
