"""Prefect orchestration: thin wrappers over the release pipelines, never algorithms.

- `tasks`: each step of a release as a Prefect task without persistence, caching or
  retries, the flows' failure handling, the release's artifacts;
- `flows`: one flow per release kind (and the evaluation and multi-dataset flows), the
  entrypoints of `prefect.yaml`.

Importing this package imports Prefect.
"""
