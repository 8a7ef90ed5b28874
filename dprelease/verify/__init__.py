"""Verifying a release directory without trusting the publisher's tooling
(`dprelease.verify.release.verify_release`). Importing this package imports nothing."""
