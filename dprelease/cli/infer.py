"""`dprelease infer ...`: releases of posterior inference on a real table (adaptive
truncation, Yildirim 2023; ABCDP, Park et al. 2021).

Each inference kind adds its commands to `infer_app`; they share the plumbing of
`dprelease.cli.support` (one-line errors, exit codes, checks before Prefect starts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dprelease.cli import support
from dprelease.config import MEDIAN_PRIOR, ABCDPConfig, InvalidRows, TruncationConfig, parse_config
from dprelease.errors import InputError
from dprelease.privacy.ledger.location import resolve_ledger_url

infer_app = typer.Typer(
    help="DP posterior inference releases: online estimation with adaptive truncation, ABCDP.",
    epilog=support.INFER_EXIT_CODES_HELP,
    no_args_is_help=True,
)


# --- adaptive truncation (Yildirim 2023; dprelease.inference.truncation.online) ----------------


RowEpsilon = Annotated[float, support.epsilon_option("Epsilon of each row's release.")]
ReleaseEpsilon = Annotated[float, support.epsilon_option("Epsilon of the release.")]
TruncationDelta = Annotated[
    float | None,
    support.delta_option(
        "delta_T of the DP row count, without --n-steps (default: T = the schema's min_rows "
        "if declared and the column is not nullable, else a DP count with delta_T = the cap's "
        "delta x epsilon / the cap's epsilon)."
    ),
]


@infer_app.command("adaptive-truncation", epilog=support.INFER_EXIT_CODES_HELP)
def adaptive_truncation(
    input_path: support.InputArgument,
    schema: support.SchemaOption,
    column: Annotated[
        str,
        typer.Option(
            "--column",
            help="A continuous or integer column. If nullable, only its rows with a value are "
            "processed (the posterior of its non-missing values) and T comes from a DP count "
            "of those rows.",
        ),
    ],
    epsilon: RowEpsilon,
    delta: TruncationDelta = None,
    n_steps: Annotated[
        int | None,
        typer.Option(
            "--n-steps",
            help="Rows to process T (needs min_rows >= T in the schema; not for a nullable "
            "column, whose rows with a value min_rows does not bound).",
        ),
    ] = None,
    count_epsilon: Annotated[
        float | None,
        typer.Option("--count-epsilon", help="Epsilon of the DP row count (default 0.05 eps)."),
    ] = None,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Cap on T.")] = 10_000,
    min_steps: Annotated[int, typer.Option("--min-steps", help="Refuse a smaller T.")] = 50,
    family: Annotated[str, typer.Option("--family", help="Model family.")] = "normal",
    prior: Annotated[
        str | None,
        typer.Option(
            "--prior",
            help="mu_mean=..,mu_var=..,sigma2_shape=..,sigma2_scale=.. (default: from the "
            "schema bounds).",
        ),
    ] = None,
    score: Annotated[
        str,
        typer.Option(
            "--score",
            help="Design score: det (default: a mirrored pair of intervals informing mu and "
            "sigma), mu (the paper's; sigma stays at its prior at small epsilon) or trace.",
        ),
    ] = "det",
    engine: Annotated[str, typer.Option("--engine", help="ibis or latent_smc.")] = "ibis",
    particles: Annotated[int, typer.Option("--particles", help="SMC particles.")] = 1000,
    out: support.OutOption = Path("releases"),
    ledger: support.LedgerOption = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the SMC only (never the DP noise).")
    ] = None,
    on_invalid_rows: support.InvalidRowsOption = InvalidRows.refuse,
    drop_extra_columns: support.DropExtraColumnsOption = False,
    secure_noise: Annotated[
        bool,
        typer.Option(
            "--secure-noise/--no-secure-noise",
            help="OpenDP's Laplace sampler applied to each clamped value (the default: the "
            "release publishes each processed row's noisy value, and noise added in floating "
            "point would let an attacker tell values apart); --no-secure-noise is faster and "
            "its statement says it is not resistant to floating-point attacks.",
        ),
    ] = True,
    verbose: support.VerboseOption = False,
) -> None:
    """Release the posterior of a column's N(mu, sigma^2) model, each processed row entering
    one Laplace release of its value clamped to an adaptively chosen interval; print its
    directory. A nullable column's rows with a missing value are never processed: the
    posterior is of its non-missing values."""
    from dprelease.release.truncation import parse_prior, plan_truncation_release
    from dprelease.schema import load_schema

    ledger_url = resolve_ledger_url(ledger)
    with support.expected_errors(verbose):
        config = parse_config(
            TruncationConfig,
            column=column,
            epsilon=epsilon,
            delta=delta,
            n_steps=n_steps,
            count_epsilon=count_epsilon,
            max_steps=max_steps,
            min_steps=min_steps,
            family=family,
            score=score,
            engine=engine,
            particles=particles,
            prior=parse_prior(prior),
            seed=seed,
            secure_noise=secure_noise,
            on_invalid_rows=on_invalid_rows,
            drop_extra_columns=drop_extra_columns,
        )
        public = load_schema(schema)
        plan = plan_truncation_release(public, config)
    support.publish_command(
        "dprelease.orchestration.flows.adaptive_truncation:adaptive_truncation_flow",
        plan=plan,
        input_path=input_path,
        schema=schema,
        config=config,
        out=out,
        ledger_url=ledger_url,
        verbose=verbose,
        what=f"adaptive truncation of {public.dataset}.{column}",
        summary=lambda manifest: (
            f"{manifest['privacy_statement']}\nmechanism: {manifest['truncation_statement']}"
        ),
    )


@infer_app.command("design-truncation")
def design_truncation_command(
    epsilon: RowEpsilon,
    family: Annotated[str, typer.Option("--family", help="Model family.")] = "normal",
    score: Annotated[
        str, typer.Option("--score", help="det (mirrored pair: F[1,1] F[2,2]), mu or trace.")
    ] = "det",
    asymmetric: Annotated[
        bool, typer.Option("--asymmetric", help="Search all (a, b), not only [-A, A].")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print the base interval [a*, b*] maximising the Fisher information of one release
    (public: reads no data)."""
    import json

    from dprelease.inference.truncation.design import design_truncation

    with support.expected_errors():
        try:
            design = design_truncation(family, epsilon, score, symmetric=not asymmetric)
        except ValueError as error:
            raise InputError(str(error)) from None
    if as_json:
        support.stdout.print_json(json.dumps(design.to_dict()))
        return
    fisher = design.fisher
    coupling = round(float(fisher[0, 1]), 4) + 0.0  # no "-0.0000"
    support.stdout.print(
        f"[a*, b*] = [{design.a:g}, {design.b:g}] for epsilon={design.epsilon:g} "
        f"({design.family}, score {design.score}, {design.method}); the interval for a "
        f"posterior draw (m, c) is [m + {design.a:g} c, m + {design.b:g} c]"
        + (
            f" at odd steps, [m + {-design.b:g} c, m + {-design.a:g} c] at even steps"
            if design.mirrored
            else ""
        )
        + ".\n"
        f"Fisher information at (0, 1): F_mu,mu = {fisher[0, 0]:.4f}, "
        f"F_sigma,sigma = {fisher[1, 1]:.4f}, F_mu,sigma = {coupling:.4f}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


# --- ABCDP (Park et al. 2021; dprelease.inference.abcdp) -----------------------------------------


def _bandwidth(text: str) -> float | str:
    if text == MEDIAN_PRIOR:
        return text
    try:
        return float(text)
    except ValueError:
        raise InputError(
            f"--bandwidth must be a number or {MEDIAN_PRIOR!r}, not {text!r}"
        ) from None


@infer_app.command("abcdp", epilog=support.INFER_EXIT_CODES_HELP)
def abcdp(
    input_path: support.InputArgument,
    schema: support.SchemaOption,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="Public model code: path/to/model.py:ClassName. Its simulate(theta, m, rng) "
            "returns a DataFrame of schema columns: per draw (theta one draw of shape (p,), m "
            "rows) or batched (theta of shape (B, p), B*m rows, draw b's rows in block b). "
            "Declare `batched = False` or `batched = True` in the class, or let the dry run "
            "detect it before anything is spent.",
        ),
    ],
    epsilon: ReleaseEpsilon,
    n_samples: Annotated[int, typer.Option("--n-samples", help="Posterior samples c.")],
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            help="ABC threshold on the MMD scale. `dprelease infer abcdp-plan --model ... "
            "--schema ... --n-hat-guess N` suggests one from public simulations only: the "
            "2c/T quantile of the MMD between simulations at independent prior draws, not "
            "below the 95 % quantile of the MMD between two simulations at the same draw.",
        ),
    ],
    resample: Annotated[
        bool, typer.Option("--resample", help="Fresh threshold noise after each acceptance.")
    ] = False,
    n_draws: Annotated[int, typer.Option("--n-draws", help="Prior draws T to test.")] = 10_000,
    n_sim: Annotated[
        int | None,
        typer.Option("--n-sim", help="Simulated rows per draw m (default min(n_hat, 10000))."),
    ] = None,
    kernel: Annotated[
        str,
        typer.Option("--kernel", help="gaussian_rff (needs the torch extra) or gaussian_exact."),
    ] = "gaussian_rff",
    n_features: Annotated[int, typer.Option("--n-features", help="Random features D.")] = 500,
    bandwidth: Annotated[
        str, typer.Option("--bandwidth", help="Kernel bandwidth or median-prior.")
    ] = "median-prior",
    count_fraction: Annotated[
        float, typer.Option("--count-fraction", help="Share of epsilon for the DP row count.")
    ] = 0.05,
    n_min: Annotated[int, typer.Option("--n-min", help="Refuse a DP count below this.")] = 20,
    out: support.OutOption = Path("releases"),
    ledger: support.LedgerOption = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Seed of prior draws, simulations, features (never DP noise)."),
    ] = None,
    on_invalid_rows: support.InvalidRowsOption = InvalidRows.refuse,
    drop_extra_columns: support.DropExtraColumnsOption = False,
    secure_noise: support.SecureNoiseOption = False,
    verbose: support.VerboseOption = False,
) -> None:
    """Release c posterior samples of a simulator's parameters by DP rejection ABC (sparse
    vector technique on the MMD to the real table); print the release directory.

    The model is a class with parameter_names, columns (schema columns it simulates),
    sample_prior(rng, size) returning a (size, p) array, and simulate(theta, m, rng) returning a
    DataFrame. Written one draw at a time (theta of shape (p,), m rows; called once per draw) or
    batched (theta of shape (B, p), B*m rows, faster). Declare `batched = False` /
    `batched = True`, or let the dry run detect it (docs/user-guide/posterior.md). A per-draw
    example:

    \b
        class Model:
            parameter_names = ("mu", "sd")
            columns = ("y",)
            batched = False  # optional
            def sample_prior(self, rng, size):
                return np.column_stack((rng.uniform(0, 5, size), rng.uniform(0.1, 2, size)))
            def simulate(self, theta, m, rng):
                mu, sd = theta
                return pd.DataFrame({"y": np.clip(rng.normal(mu, sd, m), 0, 5)})
    """
    import secrets

    from dprelease.release.abcdp import plan_abcdp_release
    from dprelease.schema import load_schema

    ledger_url = resolve_ledger_url(ledger)
    seed = seed if seed is not None else secrets.randbits(63)  # the flow replans with it
    with support.expected_errors(verbose):
        config = parse_config(
            ABCDPConfig,
            model=model,
            n_samples=n_samples,
            threshold=threshold,
            epsilon=epsilon,
            count_fraction=count_fraction,
            resample=resample,
            n_draws=n_draws,
            n_sim=n_sim,
            kernel=kernel,
            n_features=n_features,
            bandwidth=_bandwidth(bandwidth),
            n_min=n_min,
            seed=seed,
            secure_noise=secure_noise,
            on_invalid_rows=on_invalid_rows,
            drop_extra_columns=drop_extra_columns,
        )
        public = load_schema(schema)
        plan = plan_abcdp_release(public, config)
    mode = plan.plan.simulator.mode
    support.stderr.print(
        f"model {plan.plan.model.name}: simulated {mode.name} ({mode.rule})",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    support.publish_command(
        "dprelease.orchestration.flows.abcdp:abcdp_flow",
        plan=plan,
        input_path=input_path,
        schema=schema,
        config=config,
        out=out,
        ledger_url=ledger_url,
        verbose=verbose,
        what=f"ABCDP of {public.dataset}",
        summary=lambda manifest: (
            f"{manifest['privacy_statement']}\nmechanism: {manifest['n_accepted']} of "
            f"c={manifest['n_samples']} samples accepted after {manifest['t_stop']} draws; "
            f"{manifest['svt_statement']}"
        ),
    )


@infer_app.command("abcdp-plan")
def abcdp_plan(
    epsilon: ReleaseEpsilon,
    n_samples: Annotated[int, typer.Option("--n-samples", help="Posterior samples c.")],
    n_hat_guess: Annotated[
        float, typer.Option("--n-hat-guess", help="A guessed (public) row count.")
    ],
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", help="ABC threshold (MMD scale) to evaluate, with --model."),
    ] = None,
    resample: Annotated[bool, typer.Option("--resample")] = False,
    count_fraction: Annotated[float, typer.Option("--count-fraction")] = 0.05,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="Also dry-run this model and suggest a threshold (needs --schema)."
        ),
    ] = None,
    schema: Annotated[Path | None, typer.Option("--schema", help="Public schema (YAML).")] = None,
    n_draws: Annotated[int, typer.Option("--n-draws", help="Prior draws T to test.")] = 10_000,
    n_sim: Annotated[
        int | None,
        typer.Option("--n-sim", help="Simulated rows per draw m (default min(guess, 10000))."),
    ] = None,
    kernel: Annotated[str, typer.Option("--kernel")] = "gaussian_rff",
    n_features: Annotated[int, typer.Option("--n-features")] = 500,
    bandwidth: Annotated[str, typer.Option("--bandwidth")] = "median-prior",
    seed: Annotated[int | None, typer.Option("--seed")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Print the SVT noise scale and the flip-probability curve at a guessed row count; with
    --model and --schema, a suggested --threshold from simulations of the model (public:
    reads no data, spends nothing).

    The threshold plan (dprelease/inference/abcdp/threshold.py) lets simulations stand in for
    the table: for K prior draws, one set of n = the guess rows and one of m rows each. The
    MMD between the two sets of the same draw is the Monte Carlo floor (a smaller threshold
    rejects even the right parameter); between sets of independent draws it is the
    separation (its q-quantile lets a fraction q of the prior draws pass). Suggested: the
    separation's 2c/T quantile, not below the floor's 95 % quantile. Pass the release's
    --seed, --n-draws, --n-sim, --kernel, --n-features and --bandwidth so that the plan uses
    its kernel."""
    import json

    from dprelease.inference.abcdp.mechanism import noise_plan

    with support.expected_errors():
        if not n_hat_guess > 0:
            raise InputError("--n-hat-guess must be positive")
        config = parse_config(
            ABCDPConfig,
            model=model or "",
            n_samples=n_samples,
            threshold=1.0 if threshold is None else threshold,  # the noise plan ignores it
            epsilon=epsilon,
            count_fraction=count_fraction,
            resample=resample,
            n_draws=n_draws,
            n_sim=n_sim,
            kernel=kernel,
            n_features=n_features,
            bandwidth=_bandwidth(bandwidth),
            seed=seed,
        )
        summary = noise_plan(config, n_hat_guess)
        if model is not None:
            from dprelease.inference.abcdp.threshold import suggest_threshold
            from dprelease.release.abcdp import plan_abcdp_release
            from dprelease.schema import load_schema

            if schema is None:
                raise InputError("--model needs --schema")
            release = plan_abcdp_release(load_schema(schema), config)
            summary["model"] = {
                "sha256": release.plan.model.sha256,
                "dry_run": "passed",
                "simulator": release.plan.simulator.mode.to_dict(),
            }
            summary["bandwidth"] = release.plan.bandwidth
            summary["threshold"] = suggest_threshold(release.plan, n_hat_guess, threshold)
    if as_json:
        support.stdout.print_json(json.dumps(summary))
        return
    lines = [
        f"epsilon {epsilon:g} = {summary['epsilon_count']:.4g} (DP row count, Laplace scale "
        f"{summary['count_noise_scale']:.4g}) + {summary['epsilon_svt']:.4g} (SVT, "
        f"{summary['variant']}, c={n_samples})",
        f"at n_hat = {n_hat_guess:g}: sensitivity 1/n_hat = {summary['sensitivity']:.4g}, "
        f"threshold noise b = {summary['threshold_noise_scale']:.4g}, distance noise 2b = "
        f"{summary['query_noise_scale']:.4g}",
        "flip probability G_b(|rho - threshold|):",
        *(
            f"  |rho - threshold| = {row['offset']:<9.3g} -> {row['probability']:.3g}"
            for row in summary["flip_probability"]
        ),
    ]
    if "model" in summary:
        lines.append(
            f"model dry run passed (sha256 {summary['model']['sha256'][:12]}...), "
            f"bandwidth {summary['bandwidth']:.4g}, simulated "
            f"{summary['model']['simulator']['mode']} ({summary['model']['simulator']['rule']})"
        )
        lines += threshold_lines(summary["threshold"], n_samples, n_draws)
    else:
        lines.append("pass --model and --schema for a suggested --threshold")
    support.stdout.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)


def threshold_lines(plan: dict, c: int, n_draws: int) -> list[str]:
    """The threshold plan in words (`inference.abcdp.threshold.suggest_threshold`'s dict)."""
    floor = plan["floor"]
    quantiles = ", ".join(
        f"{100 * row['level']:.3g} % {row['value']:.3g}" for row in plan["separation"]
    )
    lines = [
        f"threshold plan from {plan['plan_draws']} prior draws, each simulated as data "
        f"({plan['n_data_rows']} rows) and as a simulation (m = {plan['n_sim']} rows); no "
        "real data:",
        f"  MMD of two simulations at the same draw (Monte Carlo floor): median "
        f"{floor['median']:.3g}, 95 % {floor['q95']:.3g}",
        f"  MMD of simulations at independent draws (separation), quantiles: {quantiles}",
        f"  suggested --threshold {plan['suggested']:.3g} ("
        + (
            f"the separation's {100 * plan['level']:.3g} % = 2c/T quantile: about {2 * c} of "
            f"T = {n_draws} draws pass for data like a simulation"
            if plan["rule"] == "separation"
            else "the floor's 95 % quantile, above the separation's 2c/T quantile: the "
            "simulations' own noise limits the threshold; it falls with more rows n and m"
        )
        + ")",
    ]
    for key in ("at_suggested", "at_threshold"):
        if key in plan:
            row = plan[key]
            lines.append(
                f"  at {row['threshold']:.3g}: expected passes among T "
                f"{row['expected_exact_passes']:.3g} without privacy, "
                f"{row['expected_dp_passes']:.3g} with the SVT noise at the guess, "
                f"{100 * row['dp_share_exact']:.0f} % of these within the threshold (as many "
                f"as exact ABC passes at {row['effective_threshold']:.3g})"
            )
    if not plan["separable"]:
        lines.append(
            "  warning: the suggestion is not below the separation's median: the threshold "
            "cannot tell prior draws apart and the posterior will be close to the prior (more "
            "rows m, or another bandwidth)"
        )
    if plan["at_suggested"]["dp_share_exact"] < 0.5:
        lines.append(
            f"  warning: most draws accepted at the suggestion would lie beyond it, let "
            f"through by the SVT noise (2b = {2 * plan['noise_scale']:.3g} at the guess): more "
            "epsilon or fewer samples c"
        )
    return lines
