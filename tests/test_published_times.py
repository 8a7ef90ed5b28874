"""No published time of a release times its data steps: every time in the release's files,
its manifest, its `ledger.parquet`, the ledger (`ledger show`) and the modification times of
its files, its directory and the directories it was written into was taken before the real
table was read, or is a date (midnight UTC). The release is staged where only its owner can
look, and `ledger.parquet` says only whether an entry was committed."""

from __future__ import annotations

import dataclasses
import json
import stat
import time
from datetime import UTC, datetime

import pandas as pd
import pyarrow.parquet as pq
from conftest import SeededNoise
from release_fixtures import TINY_SCHEMA

from dprelease.config import SyntheticConfig
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.release.files import LEDGER_FILE
from dprelease.release.pipeline import publish_release
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE, load_real

TABLE = pd.DataFrame({"x": [0.5, 0.2, 0.9], "k": [1, 2, 3], "y": ["a", "b", "a"]})


def _is_date(moment: datetime) -> bool:
    return (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0)


def test_published_times_are_taken_before_the_data_is_read_or_are_dates(tmp_path):
    read_at: list[datetime] = []

    def slow_load(plan, source):  # noqa: ANN001, ANN202
        read_at.append(datetime.now(UTC))
        time.sleep(1.2)  # a data step long enough to show in any time taken after it
        return load_real(plan, source)

    ledger_url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    out = tmp_path / "new" / "releases"
    release = publish_release(
        dataclasses.replace(SYNTHETIC_PIPELINE, load=slow_load),
        TINY_SCHEMA,
        SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100),
        TABLE,
        out_dir=out,
        ledger_url=ledger_url,
        noise=SeededNoise(0),
    )
    (before_read,) = read_at

    def safe(moment: datetime) -> bool:
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return moment <= before_read or _is_date(moment)

    manifest = json.loads((release / "manifest.json").read_text())
    assert safe(datetime.fromisoformat(manifest["created_at"]))
    with Ledger(ledger_url) as ledger:
        shown = ledger.summary(TINY_SCHEMA.dataset)  # `ledger show --json`
    for entry in shown["entries"]:
        for key in ("reserved_at", "committed_at"):
            assert safe(datetime.fromisoformat(entry[key])), (key, entry[key])
    stored = pq.read_table(release / LEDGER_FILE).to_pandas()
    for key in ("reserved_at", "committed_at"):
        assert all(len(value) == 10 for value in stored[key])  # dates
    for path in [out, release.parent, release, *release.rglob("*")]:
        assert safe(datetime.fromtimestamp(path.stat().st_mtime, UTC)), path.name
    assert [p.name for p in release.parent.iterdir()] == [release.name]  # no staging left


def test_a_release_is_staged_where_only_its_owner_can_look(tmp_path):
    modes = []

    def bundle(plan, outcome, record):  # noqa: ANN001, ANN202
        made = SYNTHETIC_PIPELINE.bundle(plan, outcome, record)

        def report(directory, manifest):  # noqa: ANN001, ANN202
            modes.append(stat.S_IMODE(directory.parent.stat().st_mode))
            made.report(directory, manifest)

        return dataclasses.replace(made, report=report)

    release = publish_release(
        dataclasses.replace(SYNTHETIC_PIPELINE, bundle=bundle),
        TINY_SCHEMA,
        SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100),
        TABLE,
        out_dir=tmp_path / "releases",
        ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        noise=SeededNoise(0),
    )
    assert modes == [0o700]
    assert stat.S_IMODE(release.stat().st_mode) & 0o055 == 0o055  # published: readable


def test_the_published_ledger_says_committed_or_not_committed(tmp_path):
    ledger_url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    with Ledger(ledger_url) as ledger:  # a run that stopped after its reservation
        ledger.reserve(
            TINY_SCHEMA.dataset,
            TINY_SCHEMA.budget.cap,
            "20250101T000000Z-deadbeef",
            [PlannedSpend("laplace", 0.5, 0.0)],
        )
    release = publish_release(
        SYNTHETIC_PIPELINE,
        TINY_SCHEMA,
        SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100),
        TABLE,
        out_dir=tmp_path / "releases",
        ledger_url=ledger_url,
        noise=SeededNoise(0),
    )
    stored = pq.read_table(release / LEDGER_FILE).to_pandas()
    assert stored["status"].tolist()[0] == "not committed"
    assert set(stored["status"].tolist()[1:]) == {"committed"}
