"""One release pipeline per release kind, behind one interface, run in one guarded order.

A kind (`release.synthetic`, `release.truncation`, `release.abcdp`) implements `Pipeline`:

- `plan(schema, config)`: everything public, computed before any data is read: the
  calibration of every mechanism and the spends to reserve (`Plan`);
- `load(plan, source)`: the validated real data (a file path, or a table in memory);
- `run(plan, data, noise, step)`: the mechanisms (they see the real data);
- `actual_spends(plan, outcome)`: what each reserved mechanism actually spent;
- `bundle(plan, outcome, record)`: the `ReleaseBundle` (DP outputs and public metadata);
- `checks`: checks of the bundle that add their results to it (`BundleCheck`; the synthetic
  kind's Great Expectations check, `release.synthetic.expectations`).

`publish_release` runs them in the order the privacy model requires (docs/privacy-model.md
section 7), and nothing else reserves or commits spends:

    plan -> check the cap (exit 3, the data unread) -> load and validate (exit 2, nothing
    spent) -> warn when this configuration was released today (`DuplicateReleaseWarning`:
    the run is about to spend again) -> reserve every planned spend atomically -> run ->
    commit the actual spends -> bundle (the dataset's ledger record up to this release) ->
    the kind's checks of the bundle -> write atomically.

From the reservation on, a failure keeps the spend (`errors.spend_kept`): the run may have
touched the data, and a retry is a new spend. The release id, whose UTC time is the manifest's
`created_at`, is taken before the data is read (a time taken after would reveal how long a
data step took).

`step(name, function, *args, **kwargs)` runs each step: `direct` calls it; the Prefect flows
pass a runner that makes each step a Prefect task (`tasks.prefect_step`). That is the only
thing the flows decide.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import pandas as pd

from dprelease.config import ReleaseSettings
from dprelease.errors import spend_kept
from dprelease.privacy.accounting import Cap, PlannedSpend
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.location import resolve_ledger_url
from dprelease.privacy.noise import NoiseSource
from dprelease.release.writer import (
    RELEASE_TIME_FORMAT,
    LedgerRecord,
    ReleaseBundle,
    new_release_id,
    refuse_inside_release,
    write_release,
)
from dprelease.schema import Schema, load_schema

Step = Callable[..., Any]
Source = str | Path | pd.DataFrame  # a file, or a table in memory (the evaluation harness)


def direct(name: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a step as a plain call (the library's runner)."""
    return function(*args, **kwargs)


class Plan(Protocol):
    """What the guarded order needs from every kind's public plan."""

    @property
    def schema(self) -> Schema: ...

    @property
    def dataset(self) -> str: ...

    @property
    def cap(self) -> Cap: ...

    @property
    def planned_spends(self) -> Sequence[PlannedSpend]: ...

    @property
    def secure_noise(self) -> bool: ...

    @property
    def fingerprint(self) -> str: ...


CONFIGURATION_KEY = "configuration_sha256"
DISPLAY_ONLY = ("progress",)  # options that change what a terminal shows, not the release


@dataclass(frozen=True)
class KindPlan:
    """The part every kind's plan shares: the public schema and the kind's settings."""

    schema: Schema
    config: ReleaseSettings

    @property
    def dataset(self) -> str:
        return self.schema.dataset

    @property
    def cap(self) -> Cap:
        """The schema's cap (what the ledger checks before the data is read)."""
        return self.schema.budget.cap

    @property
    def secure_noise(self) -> bool:
        return self.config.secure_noise

    @property
    def fingerprint(self) -> str:
        """sha256 of the public schema and the kind's resolved settings (display-only options
        left out): two releases with the same fingerprint are the same configuration. Stored
        in every ledger entry's params (`CONFIGURATION_KEY`; the ledger is public metadata)."""
        settings = self.config.model_dump(mode="json")
        for options in settings.values():
            if isinstance(options, dict):
                for key in DISPLAY_ONLY:
                    options.pop(key, None)
        text = json.dumps(
            {"schema": self.schema.public_dict(), "settings": settings},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def release_bundle(
        self, kind: str, record: LedgerRecord, configuration: dict, **contents: Any
    ) -> ReleaseBundle:
        """The `ReleaseBundle` of a release of this plan: its dataset, public schema, invalid-row
        and out-of-bounds policies, noise mode, the kind's configuration and `contents`
        (tables, report, the conditions of its guarantee...)."""
        return ReleaseBundle(
            kind=kind,
            dataset=self.dataset,
            record=record,
            schema=self.schema.public_dict(),
            configuration=configuration,
            invalid_rows=self.config.on_invalid_rows,
            out_of_bounds=self.config.on_out_of_bounds,
            secure_noise=self.config.secure_noise,
            **contents,
        )


@dataclass(frozen=True)
class BundleCheck:
    """A check of a release's bundle that adds its result to it (a file, a manifest entry),
    run as the step `name` after `bundle`, so the result is in the release before its
    checksums are taken. It sees the bundle only: DP outputs and public metadata, never the
    real data. `run(bundle)` returns the bundle with the result."""

    name: str
    run: Callable[[ReleaseBundle], ReleaseBundle]


ConfigT = TypeVar("ConfigT")
PlanT = TypeVar("PlanT", bound=Plan)
DataT = TypeVar("DataT")
OutcomeT = TypeVar("OutcomeT")


@dataclass(frozen=True)
class Pipeline(Generic[ConfigT, PlanT, DataT, OutcomeT]):
    """One release kind (see the module docstring).

    plan(schema, config): the public plan; refuses bad settings (InputError) before anything
        is read.
    load(plan, source): the validated real data (InputError on bad input: nothing is spent).
    run(plan, data, noise, step): the mechanisms; only after the reservation.
    actual_spends(plan, outcome): what each planned spend actually spent, in the order of
        `plan.planned_spends`.
    bundle(plan, outcome, record): the release's files (DP outputs and public metadata only).
    checks: run on the bundle, each as a step of its own, before it is written.
    """

    kind: str
    plan: Callable[[Schema, ConfigT], PlanT]
    load: Callable[[PlanT, Source], DataT]
    run: Callable[[PlanT, DataT, NoiseSource, Step], OutcomeT]
    actual_spends: Callable[[PlanT, OutcomeT], list[PlannedSpend]]
    bundle: Callable[[PlanT, OutcomeT, LedgerRecord], ReleaseBundle]
    checks: tuple[BundleCheck, ...] = ()


def one_step(
    name: str, mechanism: Callable[[PlanT, DataT, NoiseSource], OutcomeT]
) -> Callable[[PlanT, DataT, NoiseSource, Step], OutcomeT]:
    """A `run` that is one step named `name`: `mechanism(plan, data, noise)`."""

    def run(plan: PlanT, data: DataT, noise: NoiseSource, step: Step) -> OutcomeT:
        return step(name, mechanism, plan, data, noise)

    return run


def check_budget(ledger_url: str, plan: Plan) -> None:
    """Refuse (exit 3) a plan the cap cannot hold, before the real data is read."""
    with Ledger(ledger_url) as ledger:
        ledger.check_available(plan.dataset, plan.cap, plan.planned_spends)


def fingerprinted(spends: Sequence[PlannedSpend], fingerprint: str) -> list[PlannedSpend]:
    """The spends with the release's configuration fingerprint in their params."""
    return [replace(s, params={**s.params, CONFIGURATION_KEY: fingerprint}) for s in spends]


def reserve(ledger_url: str, plan: Plan, release_id: str) -> tuple[int, ...]:
    """Atomically check the cap and reserve every planned spend; return the entry ids."""
    spends = fingerprinted(plan.planned_spends, plan.fingerprint)
    with Ledger(ledger_url) as ledger:
        return ledger.reserve(plan.dataset, plan.cap, release_id, spends)


def commit(
    ledger_url: str, entry_ids: Sequence[int], actual: Sequence[PlannedSpend], fingerprint: str
) -> None:
    """Record what each reserved mechanism actually spent (with the configuration's
    fingerprint, as reserved)."""
    with Ledger(ledger_url) as ledger:
        for entry_id, spend in zip(entry_ids, fingerprinted(actual, fingerprint), strict=True):
            ledger.commit(entry_id, spend)


def same_configuration_today(ledger_url: str, plan: Plan) -> str | None:
    """The id of a release of the plan's dataset made today (UTC, by its id) with the same
    configuration fingerprint, if any: running it again spends again (public metadata only:
    the ledger's release ids and params)."""
    today = datetime.now(UTC).strftime(RELEASE_TIME_FORMAT)[:8]
    with Ledger(ledger_url) as ledger:
        if ledger.cap(plan.dataset) is None:
            return None
        entries = ledger.entries(plan.dataset)
    for entry in reversed(entries):
        same = entry.params.get(CONFIGURATION_KEY) == plan.fingerprint
        if same and entry.release_id.startswith(today):
            return entry.release_id
    return None


def duplicate_warning(ledger_url: str, plan: Plan) -> str | None:
    """The warning of `same_configuration_today`, or None."""
    earlier = same_configuration_today(ledger_url, plan)
    if earlier is None:
        return None
    return (
        f"dataset {plan.dataset!r} already has a release with the same configuration today "
        f"({earlier}); this run spends its budget again"
    )


def ledger_record(
    ledger_url: str, dataset: str, release_id: str, entry_ids: tuple[int, ...]
) -> LedgerRecord:
    """The dataset's entries up to this release's last one and its recorded cap, read in one
    connection."""
    with Ledger(ledger_url) as ledger:
        entries = ledger.entries(dataset, up_to_id=max(entry_ids))
        cap = ledger.cap(dataset)
    if cap is None:
        raise RuntimeError(f"dataset {dataset!r} has no cap in the ledger after a reservation")
    return LedgerRecord(release_id, entry_ids, entries, cap)


class DuplicateReleaseWarning(UserWarning):
    """A release with the same configuration as one made today (it spends again)."""


def run_guarded(
    pipeline: Pipeline[Any, PlanT, Any, OutcomeT],
    plan: PlanT,
    source: Source,
    *,
    ledger_url: str,
    noise: NoiseSource | None = None,
    step: Step = direct,
) -> tuple[OutcomeT, LedgerRecord]:
    """Check the cap, load, reserve, run and commit (module docstring); the outcome and the
    ledger record. Right before the reservation, once nothing can refuse the run any more,
    warns (`DuplicateReleaseWarning`, from `duplicate_warning`: ledger metadata only) when
    the dataset has a release with the same configuration today. `noise`: the mechanisms'
    noise source (default: OS entropy, or OpenDP when the plan asks for secure noise); tests
    pass a seeded one."""
    release_id = new_release_id()  # before the data is read
    step("check-budget", check_budget, ledger_url, plan)
    data = step("load-real-table", pipeline.load, plan, source)
    warning = duplicate_warning(ledger_url, plan)
    if warning is not None:  # stacklevel: the caller of `publish`
        warnings.warn(warning, DuplicateReleaseWarning, stacklevel=3)
    entry_ids = step("reserve-budget", reserve, ledger_url, plan, release_id)
    with spend_kept():
        noise = noise or NoiseSource(secure=plan.secure_noise)
        outcome = pipeline.run(plan, data, noise, step)
        del data
        actual = pipeline.actual_spends(plan, outcome)
        step("commit-spends", commit, ledger_url, entry_ids, actual, plan.fingerprint)
        record = step(
            "ledger-record", ledger_record, ledger_url, plan.dataset, release_id, entry_ids
        )
    return outcome, record


def publish_release(
    pipeline: Pipeline[ConfigT, Any, Any, Any],
    schema: Schema | str | Path,
    config: ConfigT,
    source: Source,
    *,
    out_dir: str | Path,
    ledger_url: str | None = None,
    noise: NoiseSource | None = None,
    step: Step = direct,
) -> Path:
    """Plan, run in the guarded order, check and write one release; return its directory.
    Refuses
    an `out_dir` inside an existing release (before anything is read or spent); a run that
    reaches the reservation warns (`DuplicateReleaseWarning`, `run_guarded`) when the
    dataset already has a release with the same configuration today."""
    ledger_url = resolve_ledger_url(ledger_url)
    refuse_inside_release(out_dir)
    if not isinstance(schema, Schema):
        schema = load_schema(schema)
    plan = step("plan", pipeline.plan, schema, config)
    outcome, record = run_guarded(
        pipeline, plan, source, ledger_url=ledger_url, noise=noise, step=step
    )
    with spend_kept():
        bundle = step("bundle", pipeline.bundle, plan, outcome, record)
        for check in pipeline.checks:
            bundle = step(check.name, check.run, bundle)
    return step("write-release", write_release, bundle, out_dir)
