"""The DP synthetic-data release kind: its public plan (`plan`) and its pipeline
(`pipeline`, `SYNTHETIC_PIPELINE`)."""

from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE
from dprelease.release.synthetic.plan import SyntheticPlan, plan_release

__all__ = ["SYNTHETIC_PIPELINE", "SyntheticPlan", "plan_release"]
