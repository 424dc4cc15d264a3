"""A grading's result read back from its grade.json, as `tilelab check
--remote` reads the service's: every record a GPU grading fills (stages,
cases, speeds with their clocks, launches, counters at every level, hints,
answers) comes back as its own class, and the terminal view drawn from it
is the view drawn from the grading itself."""

import dataclasses
import json
from pathlib import Path

from grade_fixtures import graded_answers
from rich.console import Console
from traffic_fixtures import traffic_result

from tilelab.grading.model import GradeResult
from tilelab.outputs.check_view import print_check

DATA = Path(__file__).resolve().parent / "data"


def drawn(result: GradeResult) -> str:
    console = Console(record=True, width=160, color_system=None)
    print_check(result, console)
    return console.export_text()


def read_back(result: GradeResult) -> GradeResult:
    return GradeResult.from_dict(json.loads(json.dumps(result.to_dict())))


def within(part, whole) -> bool:
    """Whether every key and value of `part` is in `whole`, at every depth."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and within(v, whole[k]) for k, v in part.items())
    if isinstance(part, list):
        return isinstance(whole, list) and len(part) == len(whole) and all(map(within, part, whole))
    return part == whole


def every_record(value, path="result"):
    """(path, record) of every dataclass instance in `value`, at any depth."""
    if dataclasses.is_dataclass(value):
        yield path, value
        for f in dataclasses.fields(value):
            yield from every_record(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from every_record(v, f"{path}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from every_record(v, f"{path}[{k!r}]")


def test_a_gpu_grading_with_counters_reads_back_whole():
    result = traffic_result()
    result.answers = graded_answers()
    back = read_back(result)
    assert back.to_dict() == result.to_dict()
    records = dict(every_record(result))
    rebuilt = dict(every_record(back))
    assert records.keys() == rebuilt.keys()
    for path, record in records.items():
        assert type(rebuilt[path]) is type(record), path
    naive = back.parts[0]
    assert naive.traffic.level("global").intensity == result.parts[0].traffic.level("global").intensity


def test_the_check_table_of_a_result_read_back_is_the_table_of_the_grading():
    result = traffic_result()
    shown = drawn(read_back(result))
    assert shown == drawn(result)
    assert "What one call moved" in shown  # the counters' table, which a plain dict could not draw


def test_a_grade_json_written_by_a_gpu_grading_reads_back_whole():
    """grade.json files kept from gradings on a GPU (scripts/gpu-suite's remote check among them)."""
    files = sorted(DATA.glob("*-grade.json"))
    assert files, f"no GPU grading's grade.json under {DATA}"
    for path in files:
        doc = json.loads(path.read_text())
        back = GradeResult.from_dict(doc)
        assert back.gpu, f"{path.name} is not a GPU grading's"
        # Everything it holds comes back (the service leaves out what is staff's, which then takes its default).
        assert within(doc, back.to_dict()), path.name
        assert GradeResult.from_dict(back.to_dict()).to_dict() == back.to_dict()
        assert any(p.traffic is not None for p in back.parts), f"{path.name} has no counters"
        drawn(back)
