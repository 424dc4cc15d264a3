"""What a graded class leaves for its staff in OUT: similarity.csv and
similarity.html (which hand-ins look alike, classwork/similarity.py), then
class-report.html, which lists the most alike pairs beside what the class
did (classwork/class_report_page.py). Neither needs a GPU."""

from __future__ import annotations

from pathlib import Path

from ...classwork.class_report_handins import ClassReportError
from ...classwork.class_report_page import write_class_report
from ...spec.assignment import Assignment
from ...system.paths import STARTER_DIR
from .students import find_students


def write_similarity(out_dir: Path, assignment: Assignment, class_dir: Path, root: Path) -> str:
    """Ranks the class's hand-ins by how alike their code is, into OUT; ""
    or why it could not (a line for the TA: the grades stand either way)."""
    try:
        from ...classwork import similarity as sim
        from ...classwork.similarity_page import write
    except ModuleNotFoundError as e:  # a machine set up offline, with the system's packages
        return f"no similarity ranking: the Python package {e.name} is not installed (pip install copydetect)"
    try:
        folder = sim.check_dirs(class_dir, out_dir, assignment)
        ranking = sim.compare_class(assignment, folder, find_students(folder), root / STARTER_DIR,
                                    workers=sim.WORKERS)
    except sim.SimilarityError as e:
        return f"no similarity ranking: {e}"
    write(out_dir, ranking)
    return ""


def class_pages(out_dir: Path, assignment: Assignment, class_dir: Path, root: Path) -> tuple:
    """(OUT/class-report.html or None, what is missing): the similarity
    ranking of `class_dir`'s hand-ins, then the class report drawn from
    every grading in OUT, once the class is graded."""
    notes = [write_similarity(out_dir, assignment, class_dir, root)]
    try:
        report = write_class_report(out_dir, assignment)[0]
    except ClassReportError as e:
        report, notes = None, [str(e)] + notes
    return report, "; ".join(n for n in notes if n)
