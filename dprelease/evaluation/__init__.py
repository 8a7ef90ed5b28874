"""Evaluation harness: the paper's utility study on a real table (not for publication)."""
