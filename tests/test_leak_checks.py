"""The row-count leak check of the release tests matches a count, not digits by chance."""

import pytest
from leak_checks import mentions_count, shown_values


@pytest.mark.parametrize("text", ["n=4321", "4321 rows", "4,321 rows", '"n": 4321.0', "(4321)"])
def test_a_count_is_found(text):
    assert mentions_count(text, 4321)


@pytest.mark.parametrize(
    "text", ["0.43219", "14321", "43210", "e4321f", "20261122T154321Z-0a4321bc", "4321.5"]
)
def test_digits_inside_other_tokens_are_not_a_count(text):
    assert not mentions_count(text, 4321)


@pytest.mark.parametrize(
    ("text", "shown"), [("columns: 61, 19", ["61", "19"]), ("a61f 0.615 619 2019", [])]
)
def test_a_value_is_found_as_a_token_of_its_own(text, shown):
    assert shown_values(text, ("61", "19")) == shown
