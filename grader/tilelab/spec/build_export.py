"""What the CMake build needs from assignment.yaml, written at configure time.

    python -m tilelab.spec.build_export ASSIGNMENT_YAML --cmake OUT.cmake --json OUT.json

The CMake file defines TILELAB_PARTS and, per part, its file, launcher and
signature, so the build adds one harness executable per part without a second
list of parts. The JSON file holds every part's cases for the C++ tests.
This module needs only PyYAML, so a student's build needs nothing more.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .assignment import Assignment, AssignmentError, load_assignment


def cmake_text(assignment: Assignment) -> str:
    lines = [
        f"# Generated from {assignment.path.name} by tilelab.build_export; edit assignment.yaml instead.",
        f"set(TILELAB_PARTS {' '.join(p.id for p in assignment.parts)})",
    ]
    for p in assignment.parts:
        lines.append(f'set(TILELAB_PART_{p.id}_FILE "{p.file}")')
        lines.append(f"set(TILELAB_PART_{p.id}_LAUNCHER {p.launcher})")
        lines.append(f"set(TILELAB_PART_{p.id}_SIGNATURE {p.signature})")
        # What the starter's test expects: a TODO stub stops with not_implemented; a working starter passes.
        lines.append(f"set(TILELAB_PART_{p.id}_STARTER_EXPECT {'pass' if p.starter == 'working' else 'not_implemented'})")
    # A part scored against cuBLAS: the grader times cuBLAS SGEMM behind the same harness.
    lines.append(f"set(TILELAB_CUBLAS_BASELINE {'ON' if assignment.uses_cublas else 'OFF'})")
    return "\n".join(lines) + "\n"


def json_doc(assignment: Assignment) -> dict:
    return {
        "name": assignment.name,
        "timing": assignment.timing,
        "parts": [
            {
                "id": p.id,
                "file": p.file,
                "launcher": p.launcher,
                "signature": p.signature,
                "tolerance": p.tolerance,
                "cases": {name: [c.to_json() for c in cases] for name, cases in p.cases.items()},
            }
            for p in assignment.parts
        ],
    }


def _write_if_changed(path: Path, text: str, private: bool = False) -> None:
    # An unchanged file keeps its timestamp, so nothing downstream rebuilds.
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    if private:
        # It lists the hidden cases; the build tree itself stays readable,
        # since sandboxed student builds link its harness libraries.
        os.chmod(path, 0o600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelab.build_export", description=__doc__.splitlines()[0])
    parser.add_argument("assignment", type=Path)
    parser.add_argument("--cmake", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        assignment = load_assignment(args.assignment)
    except AssignmentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    _write_if_changed(args.cmake, cmake_text(assignment))
    _write_if_changed(args.json, json.dumps(json_doc(assignment), indent=2) + "\n", private=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
