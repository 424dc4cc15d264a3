"""docs/assignment-yaml.md cannot drift from the validator: the page is
rendered from tilelab.spec.schema, and the validator takes every mapping's
keys from that same schema."""

import copy
from pathlib import Path

import pytest
import yaml

from tilelab.spec import reference, schema
from tilelab.spec.assignment import AssignmentError, parse_assignment


ASSIGNMENT_YAML = Path(__file__).resolve().parents[2] / "assignment.yaml"


@pytest.fixture(scope="module")
def doc():
    return yaml.safe_load(ASSIGNMENT_YAML.read_text(encoding="utf-8"))


def test_the_page_is_what_the_schema_renders(root):
    page = (root / "docs" / "assignment-yaml.md").read_text(encoding="utf-8")
    assert page == reference.render(), f"docs/assignment-yaml.md is out of date; regenerate it: {reference.COMMAND}"


def _mappings(value, node, path):
    """(path, node) for every mapping of the real file that `node` describes,
    with the schema node of each: the parts' case forms after their signature."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _mappings(item, node, path + (i,))
        return
    if not isinstance(value, dict) or not node.keys:
        return
    yield path, node
    for key, sub in value.items():
        if node is schema.PART and key == "cases":
            yield path + (key,), node.key(key)
            form = schema.SQUARE_CASE if value["signature"] == "square" else schema.RECTANGULAR_CASE
            for set_name, entries in sub.items():
                for i, entry in enumerate(entries):
                    yield from _mappings(entry, form, path + (key, set_name, i))
        elif key in {k.name for k in node.keys}:
            yield from _mappings(sub, node.key(key), path + (key,))


MAPPINGS = list(_mappings(yaml.safe_load(ASSIGNMENT_YAML.read_text(encoding="utf-8")), schema.ASSIGNMENT, ()))


def _at(doc, path):
    for step in path:
        doc = doc[step]
    return doc


def test_every_mapping_of_the_real_file_is_described():
    places = {tuple(type(step).__name__ if isinstance(step, int) else step for step in p) for p, _ in MAPPINGS}
    for expected in [(), ("defaults", "tolerance"), ("grading", "leaderboard"), ("parts", "int", "versus_cublas"),
                     ("parts", "int", "cases", "public", "int"), ("parts", "int", "cases", "public", "int", "props"),
                     ("questions", "int")]:
        assert expected in places


def _error(doc) -> str:
    with pytest.raises(AssignmentError) as e:
        parse_assignment(doc, path=None)
    return str(e.value)


@pytest.mark.parametrize("path, node", MAPPINGS, ids=[".".join(map(str, p)) or "top" for p, _ in MAPPINGS])
def test_the_validator_knows_exactly_the_documented_keys(doc, path, node):
    d = copy.deepcopy(doc)
    _at(d, path)["not_a_documented_key"] = 1
    known = ", ".join(sorted(k.name for k in node.keys))
    assert f"unknown key 'not_a_documented_key' (expected one of: {known})" in _error(d)
    for name in node.required_names:
        d = copy.deepcopy(doc)
        del _at(d, path)[name]
        assert f"missing required key {name!r}" in _error(d)


def test_every_documented_key_has_a_row(root):
    page = (root / "docs" / "assignment-yaml.md").read_text(encoding="utf-8")
    for _, node in MAPPINGS:
        for key in node.keys:
            assert f"| `{key.name}` |" in page
