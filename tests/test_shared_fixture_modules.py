"""tests/conftest.py's list of modules that go to one worker whole stays true as files move."""

import pathlib

from tests.conftest import SHARED_FIXTURE_MODULES

ROOT = pathlib.Path(__file__).parents[1]


def test_every_listed_module_exists_and_has_a_module_fixture():
    for module in SHARED_FIXTURE_MODULES:
        path = ROOT / module
        assert path.is_file(), module
        assert 'scope="module"' in path.read_text(), module
