"""The grader's complexity budget (docs/developer.md), read from the source:
no module over 500 lines, layers that import only downwards, one way into
a grading, and one root for the errors a user can fix."""

import ast
import re
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parents[2] / "grader"
PACKAGE = GRADER / "tilelab"
MAX_LINES = 500

# Each layer may import the layers before it, never one after it.
LAYERS = ["errors", "system", "text", "spec", "grading", "outputs", "classwork", "operations", "authoring", "selftest",
          "cli"]


def modules() -> list:
    return sorted(p for p in GRADER.rglob("*.py") if "__pycache__" not in p.parts)


def layer_of(path: Path) -> str:
    name = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    return "cli" if name.startswith("cli_") else name  # cli.py's neighbours: its options, the service's commands


def imported_layers(path: Path) -> set:
    """The package's top-level names a module imports, relative or absolute."""
    tree = ast.parse(path.read_text())
    package_parts = path.relative_to(PACKAGE).parent.parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[:len(package_parts) - (node.level - 1)] if node.level > 1 else package_parts
                names = list(base) + (node.module.split(".") if node.module else [])
                if names:
                    found.add(names[0])
                else:  # `from .. import x` at the top: x is a layer
                    found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("tilelab."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("tilelab."))
    return found & set(LAYERS)


def test_no_module_is_over_the_budget():
    long = {str(p.relative_to(GRADER)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("path", [p for p in modules() if PACKAGE in p.parents and p.parent != PACKAGE
                                  or p.name in ("cli.py", "errors.py") or p.name.startswith("cli_")],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_layer_imports_only_the_layers_below_it(path):
    own = layer_of(path)
    allowed = set(LAYERS[:LAYERS.index(own) + 1])
    assert imported_layers(path) <= allowed, f"{path.relative_to(PACKAGE)} imports {imported_layers(path) - allowed}"


def test_options_are_made_in_one_place():
    """Options are made by GradeOptions.for_tree alone, and a grading is run
    by operations/grading_run alone: every command states its choices and
    its outputs there."""
    made = [f"{p.relative_to(GRADER)}:{i}" for p in modules()
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bGradeOptions\(", line)]
    assert made == [], made
    callers = [p.relative_to(GRADER) for p in modules() if re.search(r"\bpipeline import\b.*\bgrade\b", p.read_text())]
    assert callers == [Path("tilelab/operations/grading_run.py")], callers


def test_every_error_class_a_user_can_meet_has_the_one_root():
    roots = {}
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error") and node.bases:
                roots[node.name] = {ast.unparse(b) for b in node.bases}
    assert roots.pop("TilelabError") == {"Exception"}
    stray = {name: bases for name, bases in roots.items()
             if not bases & {"TilelabError", "SetupError", "RooflineError"}}
    assert not stray, stray
