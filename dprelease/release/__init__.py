"""Releases: one pipeline per release kind behind one guarded helper, the writer of a
release directory, its file names, and its report. Importing this package imports nothing
(the verifier imports `dprelease.release.files` and must stay light)."""
