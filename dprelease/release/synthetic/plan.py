"""The plan of a synthetic release, fixed before the real data is read.

`plan_release` turns the public schema and the settings (`dprelease.config.SyntheticConfig`)
into a `SyntheticPlan`: the
budget split between the generator and the weights, the generator (calibrated at
construction), the weights' calibration, and the list of `PlannedSpend`s that the ledger
reserves before any mechanism sees the data (docs/privacy-model.md section 7). Everything here is
computed from public quantities: schema, configuration, the public synthetic size N_G.

Defaults (all public functions of the schema and the arguments; the manifest records the
values actually used):
- delta: `default_delta` = the cap's delta times this release's share of the cap's epsilon,
  `cap.delta * min(1, epsilon / cap.epsilon)`, so epsilon and delta run out together. A pure
  epsilon cap (delta 0) gives delta 0.
- generator and weights: `DEFAULT_GENERATOR` (`pgm`: a tree-structured graphical model on
  fine one-way and coarser target-interaction marginals; fast, streams the input; chosen on
  public benchmark tables: docs/decisions/0001-default-generator-and-weights.md) with
  `DEFAULT_WEIGHTS` (calibration weights: they correct what the model's coarse tables still
  miss on the target). Both work with delta 0 (Laplace noise), so no input and no cap is
  refused for the defaults' sake.
- synthetic rows: the schema's `max_rows`, but at least `DEFAULT_N_SYNTHETIC` (weights need
  many more synthetic rows than real ones to help; the number is public and free) and at most
  `MAX_DEFAULT_N_SYNTHETIC` (1,000,000: about 1.1 GB for the census-like schema's 8 columns,
  `release.memory`; a bound of 1e9 rows would otherwise plan a 112 GB encoded matrix). A
  larger `--n-synthetic` is taken as given. Every plan's estimated peak memory is checked
  against the machine's available memory (`release.memory.check_fits`, InputError) before
  the cap is checked and before any data is read.

Budget split: a private weight method gets the fraction F of the release's budget and the
generator the rest; `none` and `discriminator` weights leave the whole budget to the
generator. When both are Gaussian mechanisms accounted in zCDP (a `zcdp_with_delta`
generator with delta > 0 and `calibration` weights with the Gaussian mechanism), the split is
of the release's rho = `zcdp_rho(epsilon, delta)`: the generator gets (1 - F) rho, the weights
F rho, and the release is ONE ledger entry, ZCDP(rho), recorded at (epsilon, delta)
(`privacy.zcdp.composed_in_zcdp`; rhos add under composition, Bun and Steinke 2016, Lemma
2.3). Splitting epsilon and delta instead converts each part on its own and composes the
parts by adding epsilons, which wastes budget: at (1, 1e-6) the parts (0.8, 8e-7) and
(0.2, 2e-7) are rho 0.0157 + 0.0012 (the weights' analytic Gaussian), 69 % of the 0.0244 that
(1, 1e-6) allows. Otherwise the fraction F of epsilon and of delta goes to the weights.

Default fractions. Of rho, `DEFAULT_ZCDP_WEIGHTS_FRACTION` = 0.05: at (1, 1e-6) about the
noise the weights would have at 0.2 of epsilon and delta (4.8 % of the rho), the rest to the
generator. A larger share lowers the weights' noise until they act on the small tables at
their ESS floor and move the target model's coefficients away from the data's; at 0.05 no
tuning table's weighted coefficient error is above its unweighted one. Of epsilon and delta,
`DEFAULT_WEIGHTS_FRACTION` = 0.2, at which the calibration weights on top of independent
marginals beat the unweighted rows and OpenDP's AIM on the target model's coefficients on
three public tables. The paper's beta_debiased weights do best at F = 0.1
(benchmarks/weights_fraction.py); pass --weights-fraction when choosing them. Measurements:
docs/decisions/0018-weights-budget-share.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from dprelease import weights as weight_methods
from dprelease.config import SyntheticConfig
from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.generators import GENERATORS, Generator, make_generator
from dprelease.generators.base import CountsGenerator
from dprelease.privacy.accounting import PlannedSpend, Spend, compose, default_delta
from dprelease.privacy.mechanisms import DESCRIPTION_KEY
from dprelease.privacy.zcdp import composed_in_zcdp, zcdp_epsilon, zcdp_rho
from dprelease.release.memory import check_fits
from dprelease.release.pipeline import KindPlan
from dprelease.schema import Schema
from dprelease.weights.logistic.stream import STREAMING_WEIGHTS

DEFAULT_N_SYNTHETIC = 20_000
MAX_DEFAULT_N_SYNTHETIC = 1_000_000  # the default's cap (module docstring)
DEFAULT_GENERATOR = "pgm"
DEFAULT_WEIGHTS = "calibration"
DEFAULT_WEIGHTS_FRACTION = 0.2  # of epsilon and delta
DEFAULT_ZCDP_WEIGHTS_FRACTION = 0.05  # of the release's rho (module docstring)
BUDGET_FREE_WEIGHTS = ("none", "discriminator")
# The parts' rhos are recovered through OpenDP's conversions (the generator's by binary
# search); this margin keeps their sum within the release's rho despite floating point.
ROUNDING_MARGIN = 1e-12
ZCDP_WEIGHTS = ("calibration",)  # Gaussian weights that take a zCDP budget (`zcdp_rho`)
SYNTHETIC_CALIBRATED_WEIGHTS = "weight_noised"


def weights_mechanism(method: str) -> str:
    """The ledger's mechanism name of a weight method's spend."""
    return f"weights:{method}"


@dataclass(frozen=True)
class SyntheticPlan(KindPlan):
    """The public plan of one synthetic release: the settings with their defaults resolved,
    the calibrated (unfitted) generator, the weights' calibration, and the spends."""

    config: SyntheticConfig
    encoder: Encoder
    generator: Generator
    n_synthetic: int
    weights_fraction: float
    weights_budget: Spend
    weights_plan: dict
    weights_settings: dict  # the weight method's resolved options (`weights_options`)
    zcdp_rho: float | None = None  # the release's rho when it is one zCDP entry (docstring)

    @property
    def streams(self) -> bool:
        """Whether the release reads the real table in chunks (`dprelease.io.stream`,
        memory bounded by the chunk): a generator fitted from summed cell counts with weights
        that read the real rows in chunks (`calibration`, the logistic ones) or not at all."""
        return isinstance(self.generator, CountsGenerator) and self.config.weights in (
            *STREAMING_WEIGHTS,
            *weight_methods.CHUNKED_METHODS,
            "none",
        )

    @property
    def generator_spends(self) -> list[PlannedSpend]:
        return self.generator.planned_spends()

    @property
    def weights_spend(self) -> PlannedSpend | None:
        if self.weights_budget.epsilon == 0:
            return None
        assert self.config.weights is not None  # resolved (`resolve_defaults`)
        return PlannedSpend(
            mechanism=weights_mechanism(self.config.weights),
            epsilon=self.weights_budget.epsilon,
            delta=self.weights_budget.delta,
            params={"component": "weights", **self.weights_plan},
            description=self.weights_plan.get(DESCRIPTION_KEY),
        )

    def actual_weights_spends(self, estimate: weight_methods.WeightEstimate) -> list[PlannedSpend]:
        """What the weights actually spent, to commit against their reservation."""
        if self.weights_spend is None:
            return []
        return [
            PlannedSpend(
                mechanism=self.weights_spend.mechanism,
                epsilon=estimate.epsilon_spent,
                delta=estimate.delta_spent,
                params={"component": "weights", **estimate.details},
                description=estimate.details.get(DESCRIPTION_KEY),
            )
        ]

    @property
    def planned_spends(self) -> list[PlannedSpend]:
        spends = list(self.generator_spends)
        if self.weights_spend is not None:
            spends.append(self.weights_spend)
        return self.ledger_entries(spends)

    def ledger_entries(self, spends: list[PlannedSpend]) -> list[PlannedSpend]:
        """The generator's and the weights' spends as the ledger records them: one zCDP
        entry when the release is accounted in zCDP (module docstring), else as they are."""
        if self.zcdp_rho is None:
            return spends
        assert self.config.delta is not None  # resolved (`resolve_defaults`)
        return [composed_in_zcdp(spends, self.config.delta)]

    @property
    def total(self) -> Spend:
        return compose(self.planned_spends)

    def configuration(self) -> dict:
        """The public configuration recorded in the manifest."""
        config = self.config.model_dump(mode="json")
        return {
            "release": {
                key: config[key]
                for key in (
                    "epsilon",
                    "delta",
                    "n_synthetic",
                    "seed",
                    "on_out_of_bounds",
                    "on_invalid_rows",
                    "drop_extra_columns",
                    "temper",
                    "allow_unreliable_weights",
                    "secure_noise",
                )
            }
            | {"n_synthetic": self.n_synthetic},
            "generator": self.generator.config()
            | {"epsilon": self.generator.epsilon, "delta": self.generator.delta},
            "budget_split": {
                "of": "rho (one zCDP entry)" if self.zcdp_rho else "epsilon and delta",
                "rho": self.zcdp_rho,
            },
            "weights": {
                "method": self.config.weights,
                "fraction": self.weights_fraction,
                "epsilon": self.weights_budget.epsilon,
                "delta": self.weights_budget.delta,
                **self.weights_plan,
            },
        }


def resolve_defaults(schema: Schema, config: SyntheticConfig) -> SyntheticConfig:
    """Fill in delta, generator, weights and the number of rows left unset (see the module
    docstring)."""
    delta = default_delta(schema.budget, config.epsilon) if config.delta is None else config.delta
    return config.model_copy(
        update={
            "delta": delta,
            "generator": config.generator or DEFAULT_GENERATOR,
            "weights": config.weights or DEFAULT_WEIGHTS,
            "n_synthetic": config.n_synthetic or default_n_synthetic(schema),
        }
    )


def plan_release(
    schema: Schema, config: SyntheticConfig, *, evaluation: bool = False
) -> SyntheticPlan:
    """Validate the configuration and calibrate every mechanism from public quantities.

    `evaluation=True` (the evaluation harness only; no release path sets it) admits the
    non-private reference weights `logreg` and `mlp`, which a release refuses."""
    config = resolve_defaults(schema, config)
    assert config.delta is not None and config.n_synthetic is not None
    assert config.generator is not None and config.weights is not None
    if config.weights in weight_methods.NON_PRIVATE_METHODS and not evaluation:
        raise InputError(
            f"weights {config.weights!r} are not differentially private; they exist for "
            "benchmarks only and a release refuses them (use calibration, beta_debiased or dp_mlp)"
        )
    if config.weights not in weight_methods.METHODS:
        known = ", ".join(
            m for m in weight_methods.METHODS if m not in weight_methods.NON_PRIVATE_METHODS
        )
        raise InputError(f"unknown weights method {config.weights!r}; choose one of: {known}")
    rho = _release_rho(config)
    fraction = _weights_fraction(config, rho is not None)
    if rho is not None:
        delta = config.delta
        weights_budget = Spend(zcdp_epsilon(fraction * rho, delta), delta)
        generator_budget = Spend(zcdp_epsilon((1 - fraction) * rho, delta), delta)
    if rho is None or not min(weights_budget.epsilon, generator_budget.epsilon) > 0:
        # (With a delta so large that a part converts to epsilon 0, split epsilon and delta.)
        rho = None
        weights_budget = Spend(fraction * config.epsilon, fraction * config.delta)
        generator_budget = Spend(
            config.epsilon - weights_budget.epsilon, config.delta - weights_budget.delta
        )
    encoder = Encoder(schema)
    check_fits(config.n_synthetic, encoder.width, len(schema.columns))
    generator = make_generator(
        config.generator,
        encoder,
        generator_budget.epsilon,
        generator_budget.delta,
        **config.generator_options,
    )
    if config.weights == "discriminator" and not generator.has_discriminator:
        raise InputError(
            f"generator {config.generator!r} has no probabilistic discriminator; choose "
            "another weights method or a DP-GAN generator"
        )
    weights_rho = None if rho is None else fraction * rho
    settings = weights_options(
        config.weights, config.weights_options, encoder, generator, weights_rho
    )
    weights_plan = _plan_weights(config, weights_budget, encoder.width, settings)
    return SyntheticPlan(
        schema=schema,
        config=config,
        encoder=encoder,
        generator=generator,
        n_synthetic=config.n_synthetic,
        weights_fraction=fraction,
        weights_budget=weights_budget,
        weights_plan=weights_plan,
        weights_settings=settings,
        zcdp_rho=rho,
    )


def _release_rho(config: SyntheticConfig) -> float | None:
    """The release's rho when its generator and weights are both accounted in zCDP (module
    docstring), else None."""
    gaussian_weights = config.weights_options.get("mechanism") in (None, "gaussian")
    assert config.generator is not None  # resolved (`resolve_defaults`)
    generator = GENERATORS.get(config.generator)
    if not (
        config.delta
        and config.weights in ZCDP_WEIGHTS
        and gaussian_weights
        and getattr(generator, "zcdp_with_delta", False)
    ):
        return None
    rho, _ = zcdp_rho(config.epsilon, config.delta)
    return rho * (1 - ROUNDING_MARGIN)


def _weights_fraction(config: SyntheticConfig, of_rho: bool) -> float:
    """The weights' share: the configured one, else the default of the split (docstring)."""
    if config.weights in BUDGET_FREE_WEIGHTS:
        if config.weights_fraction not in (None, 0):
            raise InputError(f"weights {config.weights!r} take no budget; drop --weights-fraction")
        return 0.0
    default = DEFAULT_ZCDP_WEIGHTS_FRACTION if of_rho else DEFAULT_WEIGHTS_FRACTION
    fraction = default if config.weights_fraction is None else config.weights_fraction
    if not 0 < fraction < 1:
        raise InputError(
            f"--weights-fraction must be strictly between 0 and 1 (got {fraction}): both the "
            "generator and the weights need a positive share of the budget"
        )
    return fraction


def _plan_weights(config: SyntheticConfig, budget: Spend, width: int, options: dict) -> dict:
    """The weights' public calibration (`weight_methods.plan`) with their resolved options."""
    assert config.weights is not None and config.n_synthetic is not None  # resolved
    if config.weights in BUDGET_FREE_WEIGHTS:
        return {"mechanism": "none" if config.weights == "none" else "post-processing"}
    if config.weights == SYNTHETIC_CALIBRATED_WEIGHTS:
        # Its noise scale depends on the synthetic design matrix, a DP output that exists only
        # after the generator ran; the reservation holds (epsilon, delta) and the commit the
        # scale. A refusal of that scale comes after the generator's spend.
        return {
            "method": config.weights,
            "calibration": "from the public synthetic design matrix, after sampling",
        }
    return weight_methods.plan(
        config.weights, budget.epsilon, budget.delta, width, config.n_synthetic, **options
    )


def default_n_synthetic(schema: Schema) -> int:
    """The schema's public `max_rows`, but at least `DEFAULT_N_SYNTHETIC` and at most
    `MAX_DEFAULT_N_SYNTHETIC`."""
    return min(max(schema.max_rows or 0, DEFAULT_N_SYNTHETIC), MAX_DEFAULT_N_SYNTHETIC)


def weights_options(
    method: str, options: dict, encoder: Encoder, generator: Generator | None, rho: float | None
) -> dict:
    """The weight method's options, with the public encoder for methods whose feature map
    is built from the schema's columns (`weight_methods.ENCODER_METHODS`); the calibration
    weights also get the generator's public bins, the cells of the one-way margins they
    hold (unless the options name them), and their zCDP budget `rho` when the release is
    one zCDP entry (module docstring)."""
    if method not in weight_methods.ENCODER_METHODS:
        return dict(options)
    held: dict = {}
    bins = getattr(generator, "bins", None)
    if method == "calibration" and isinstance(bins, int):
        held = {"margin_bins": bins}
    budget = {} if rho is None else {"zcdp_rho": rho}
    return {**held, **options, "encoder": encoder, **budget}
