"""`make test` starts modules in the order tests/support/tiers.py's `schedule` leaves them."""
from pathlib import Path

import pytest

from tests.support.tiers import LONGEST, schedule


class Item:
    """What `schedule` reads of a collected test: its id and its tier's mark."""

    def __init__(self, nodeid: str, tier: str):
        self.nodeid, self.fixturenames, self._marks = nodeid, [], [getattr(pytest.mark, tier).mark]

    def iter_markers(self):
        return iter(self._marks)


def test_longest_first_then_process_starting_tiers_then_by_number_of_tests():
    items = [Item("a::one", "unit"), Item("a::two", "unit"), Item("a::three", "unit"),
             Item("b::one", "live"), Item("c::one", "slow"), Item("c::two", "slow"),
             Item(f"{LONGEST[0]}::one", "live"), Item("d::one", "chaos"), Item("e::one", "slow")]
    schedule(items)
    assert [i.nodeid for i in items] == [f"{LONGEST[0]}::one", "b::one", "d::one",
                                         "c::one", "c::two", "e::one",
                                         "a::one", "a::two", "a::three"]


def test_the_longest_modules_exist():
    root = Path(__file__).parents[1]
    assert all((root / module).is_file() for module in LONGEST)
