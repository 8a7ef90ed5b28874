"""Privacy: noise sources, calibration, composition and the persistent budget ledger."""
