"""The Prefect flows, the entrypoints of `prefect.yaml`: one per release kind (`release`,
`adaptive_truncation`, `abcdp`), the evaluation (`evaluate`) and several datasets at once
(`multi_release`). Each is a few lines over its pipeline."""
