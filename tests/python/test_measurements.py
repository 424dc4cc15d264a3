"""docs/measurements.md's blocks rewritten from what the runs saved
(bench/measurements.py): only the text between a source's markers changes,
and a page without them is a clear error.

The inputs are real runs quoted in docs/measurements-archive.md, laid out as
scripts/gpu-suite prints its last table:
  - H100 80GB HBM3, 2026-11-24, `scripts/gpu-suite --gradings 5` at 1c9a882
    ("Fast feedback: CUDA contexts made cheaper and earlier"): the GFLOP/s of
    the five gradings and the same host's calibration, 151/131 each time
    (every part full marks), spread 0.0 %. The target column, which the page
    does not show, is full_at (0.8) x the reference for the textbook parts and
    0.8 x cuBLAS at 4096^3 for the challenge (41,043 GFLOP/s, "The challenge
    part graded against cuBLAS").
  - H100 80GB HBM3, 2026-11-21 ("Grading the reference solutions end to
    end"): five gradings at 100 / 100, each one's wall time, where the first
    one's time went, the GFLOP/s ranges and that day's targets (4557 and
    7160 GFLOP/s); no references were calibrated then (printed as 0).
  - scripts/bench at 1c9a882 on the same host as the first (2026-11-24).
"""

import io
import json
import tarfile
from pathlib import Path

import pytest

from bench import measurements
from bench.measurements import MeasurementsError, parse_gpu_suite, render_bench, replace_block, update

ROOT = Path(__file__).resolve().parents[2]

SUMMARY_1C9A882 = """\
gpu: NVIDIA H100 80GB HBM3
date: 2026-11-24
part                 points   GFLOP/s   target     ref  speed points over 5 gradings (spread % of max)
naive          15.00/15.00       5263     4226    5283  5 5 5 5 5 (0.0%)  GFLOP/s 5263-5288
tiled          25.00/25.00       9161     7374    9218  10 10 10 10 10 (0.0%)  GFLOP/s 9161-9237
boundary       20.00/20.00       8961     7202    9002  5 5 5 5 5 (0.0%)  GFLOP/s 8961-9022
rectangular    20.00/20.00       8980     7240    9050  5 5 5 5 5 (0.0%)  GFLOP/s 8980-9060
dynamic_smem   20.00/20.00       5231     4207    5259  5 5 5 5 5 (0.0%)  GFLOP/s 5231-5275
challenge      20.00/20.00      46751    41043   47263  15 15 15 15 15 (0.0%)  GFLOP/s 46751-47581
"""

SUMMARY_2026_11_21 = """\
score 100 / 100, wall 25.0 s; where it went: build 13.2 s, correctness 2.7 s, compute-sanitizer 4.1 s, speed 4.4 s
wall of each grading: 25.0, 23.3, 23.4, 23.8, 23.5 s; calibration phase (cached): 0.00, 0.00, 0.00, 0.00, 0.00 s
part                 points   GFLOP/s   target     ref  speed points over 5 gradings (spread % of max)
naive          15.00/15.00       5274     4557       0  5 5 5 5 5 (0.0%)  GFLOP/s 5274-5295
tiled          25.00/25.00       9185     7160       0  10 10 10 10 10 (0.0%)  GFLOP/s 9185-9248
boundary       20.00/20.00       8982     7160       0  5 5 5 5 5 (0.0%)  GFLOP/s 8982-8988
rectangular    20.00/20.00       9013     7160       0  5 5 5 5 5 (0.0%)  GFLOP/s 9013-9015
dynamic_smem   20.00/20.00       5252     4557       0  5 5 5 5 5 (0.0%)  GFLOP/s 5252-5255
"""

BENCH_1C9A882 = {
    "hand_ins": 52, "graded": 52, "wall_seconds": 100.5, "workers": 1, "in_flight": 3, "per_hour": 1862.7,
    "machine": {"gpus": ["NVIDIA H100 80GB HBM3"]},
    "references": {"cold": {"seconds": 8.3, "timings": {"build": 2.42}}, "warm": {"seconds": 6.5}},
    "bare_compile_seconds": 2.14,
    "student_loop": {"edited": 2.9, "unchanged": 1.8, "fast": 0.8},
}

PAGE = ("# Measurements\r\n\r\nProse in 4096\u00b3, kept as it is.\r\n\r\n<!-- gpu-suite:begin -->\r\nold figures\r\n"
        "<!-- gpu-suite:end -->\r\n\r\nbetween the blocks\t \r\n<!-- bench:begin --><!-- bench:end -->"
        "\r\ntrailing text with no newline at the end")


def test_the_gpu_suite_table_becomes_the_block():
    summary = parse_gpu_suite(SUMMARY_1C9A882)
    assert (summary.machine, summary.date, summary.gradings) == ("NVIDIA H100 80GB HBM3", "2026-11-24", 5)
    assert [r.part for r in summary.rows] == ["naive", "tiled", "boundary", "rectangular", "dynamic_smem", "challenge"]
    block = measurements.render_gpu_suite(summary)
    assert block.startswith("Machine: NVIDIA H100 80GB HBM3. Date: 2026-11-24.\n")
    assert "graded end to end 5 times, the calibration cached." in block
    assert "| part | points | GFLOP/s over the 5 gradings | reference GFLOP/s | spread of the speed points |" in block
    assert "| tiled | 25 / 25 | 9,161-9,237 | 9,218 | 0.0 % |" in block
    assert "| challenge | 20 / 20 | 46,751-47,581 | 47,263 | 0.0 % |" in block
    assert "41,043" not in block and "7,374" not in block  # the target column stays in the summary


def test_the_block_names_the_commit_the_summary_or_the_command_gives():
    named = parse_gpu_suite(SUMMARY_1C9A882.replace("date: 2026-11-24\n", "date: 2026-11-24\ncommit: 1c9a882\n"))
    assert named.commit == "1c9a882"
    assert measurements.render_gpu_suite(named).startswith(
        "Machine: NVIDIA H100 80GB HBM3. Date: 2026-11-24. Commit: 1c9a882.\n")
    given = update(PAGE, gpu_suite=SUMMARY_1C9A882, commit="1c9a882")
    assert "Date: 2026-11-24. Commit: 1c9a882.\n" in given
    unnamed = update(PAGE, gpu_suite=SUMMARY_1C9A882)
    assert "Date: 2026-11-24.\n" in unnamed and "Commit" not in unnamed
    # A GPU machine's copy of .git may lag the tree it ran: the command's commit stands over the summary's.
    lagging = SUMMARY_1C9A882.replace("date: 2026-11-24\n", "date: 2026-11-24\ncommit: 0ld0ne with changes\n")
    assert "Date: 2026-11-24. Commit: 1c9a882.\n" in update(PAGE, gpu_suite=lagging, commit="1c9a882")


def test_the_score_and_wall_lines_above_the_table_are_kept():
    summary = parse_gpu_suite(SUMMARY_2026_11_21)
    assert summary.score == (100, 100) and summary.walls == [25.0, 23.3, 23.4, 23.8, 23.5]
    block = measurements.render_gpu_suite(summary)
    assert "score 100 / 100 (the first grading); wall of a grading 23.3-25.0 s; where the first went: " \
           "build 13.2 s, correctness 2.7 s, compute-sanitizer 4.1 s, speed 4.4 s." in block
    assert "| boundary | 20 / 20 | 8,982-8,988 | - | 0.0 % |" in block  # no reference calibrated then
    assert block.startswith("Machine: not recorded. Date: not recorded.")
    given = update(PAGE, gpu_suite=SUMMARY_2026_11_21, machine="NVIDIA H100 80GB HBM3", date="2026-11-21")
    assert "Machine: NVIDIA H100 80GB HBM3. Date: 2026-11-21." in given


def test_the_bench_block_shows_the_figures_bench_json_holds():
    block = render_bench(BENCH_1C9A882, date="2026-11-24")
    assert block.startswith("Machine: NVIDIA H100 80GB HBM3. Date: 2026-11-24.\n")
    for row in ("| the references graded alone, every part compiled | 8.3 s |",
                "| the same, every part built before | 6.5 s |",
                "| its build stage / a bare parallel `nvcc -c` of the same files | 2.42 / 2.14 s = 1.13 x |",
                "| `tilelab check naive`: just edited, unchanged, `--fast` | 2.9 s, 1.8 s, 0.8 s |",
                "| the class: 52 hand-ins, 3 at a time on each GPU | 100.5 s wall: 1,863 an hour |"):
        assert row in block
    assert "starting a CUDA process" not in block and "busy" not in block  # not in this bench.json


def _outside(page: str) -> list:
    """The page's text outside the two blocks, markers included: before the
    first, between them, after the second."""
    (begin_1, end_1), (begin_2, end_2) = sorted((measurements.markers(s) for s in ("gpu-suite", "bench")),
                                                key=lambda m: page.index(m[0]))
    return [page[:page.index(begin_1) + len(begin_1)],
            page[page.index(end_1):page.index(begin_2) + len(begin_2)],
            page[page.index(end_2):]]


@pytest.mark.parametrize("page", [PAGE, (ROOT / "docs" / "measurements.md").read_bytes().decode("utf-8")],
                         ids=["crlf-and-unicode", "the-real-page"])
def test_text_outside_the_markers_is_kept_byte_for_byte(page):
    new = update(page, gpu_suite=SUMMARY_1C9A882, bench=BENCH_1C9A882, date="2026-11-24")
    assert _outside(new) == _outside(page)
    assert "| tiled | 25 / 25 | 9,161-9,237 | 9,218 | 0.0 % |" in new and "old figures" not in new
    assert "| the class: 52 hand-ins, 3 at a time on each GPU | 100.5 s wall: 1,863 an hour |" in new
    assert update(new, gpu_suite=SUMMARY_1C9A882, bench=BENCH_1C9A882, date="2026-11-24") == new
    # One source alone leaves the other's block as it was.
    begin_bench, end_bench = measurements.markers("bench")
    only_bench = update(page, bench=BENCH_1C9A882, date="2026-11-24")
    assert only_bench[:only_bench.index(begin_bench)] == page[:page.index(begin_bench)]
    assert only_bench[only_bench.index(end_bench):] == page[page.index(end_bench):]


@pytest.mark.parametrize("page, message", [
    ("no markers at all\n", "no marker <!-- gpu-suite:begin -->"),
    ("<!-- gpu-suite:begin -->\nfigures\n", "no marker <!-- gpu-suite:end -->"),
    ("<!-- gpu-suite:end -->\n<!-- gpu-suite:begin -->\n",
     "<!-- gpu-suite:end --> comes before <!-- gpu-suite:begin -->"),
    ("<!-- gpu-suite:begin -->\n<!-- gpu-suite:end -->\n<!-- gpu-suite:begin -->\n",
     "2 times the marker <!-- gpu-suite:begin -->"),
])
def test_a_page_without_its_markers_is_a_clear_error(page, message):
    with pytest.raises(MeasurementsError) as e:
        replace_block(page, "gpu-suite", "figures\n")
    assert message in str(e.value)
    assert "between one <!-- gpu-suite:begin --> and one <!-- gpu-suite:end -->" in str(e.value) \
        or "comes before" in str(e.value)


def test_the_command_rewrites_the_page_and_leaves_it_alone_on_an_error(tmp_path, capsys):
    doc = tmp_path / "measurements.md"
    doc.write_bytes(PAGE.encode("utf-8"))
    # gpu-suite's logs.tgz holds the summary as logs/gpu-suite-summary.txt.
    with tarfile.open(tmp_path / "logs.tgz", "w:gz") as tar:
        data = SUMMARY_1C9A882.encode("utf-8")
        info = tarfile.TarInfo("logs/gpu-suite-summary.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(BENCH_1C9A882))
    args = ["--gpu-suite", str(tmp_path / "logs.tgz"), "--bench", str(bench), "--doc", str(doc), "--date", "2026-11-24"]
    assert measurements.main(args) == 0
    written = doc.read_bytes().decode("utf-8")
    assert written == update(PAGE, SUMMARY_1C9A882, BENCH_1C9A882, date="2026-11-24")
    assert measurements.main(args) == 0 and "unchanged" in capsys.readouterr().out

    bare = tmp_path / "bare.md"
    bare.write_text("# Measurements\n\nno markers here\n")
    assert measurements.main(["--bench", str(bench), "--doc", str(bare)]) == 1
    assert "no marker <!-- bench:begin -->" in capsys.readouterr().err
    assert bare.read_text() == "# Measurements\n\nno markers here\n"


def test_a_summary_without_the_table_is_an_error():
    with pytest.raises(MeasurementsError, match="no table of the parts"):
        parse_gpu_suite("gpu: NVIDIA H100 80GB HBM3\ndate: 2026-11-24\n")


def test_the_page_has_both_blocks_and_links_the_archive():
    page = (ROOT / "docs" / "measurements.md").read_text(encoding="utf-8")
    for source in ("gpu-suite", "bench"):
        begin, end = measurements.markers(source)
        assert page.count(begin) == 1 and page.count(end) == 1 and page.index(begin) < page.index(end)
    assert "(measurements-archive.md)" in page and (ROOT / "docs" / "measurements-archive.md").is_file()


BENCH_CHECK = {  # laid out as scripts/bench-check --out writes it (bench/check_bench.py)
    "place": "bundle", "note": "", "gpu": "NVIDIA H100 80GB HBM3", "runs": 3, "date": "2026-11-28",
    "figures": {
        "edited": {"what": "`tilelab check naive` after an edit", "median": 2.31, "runs": [2.3, 2.31, 2.4],
                   "goal": 2.5, "before": 4.39},
        "unchanged": {"what": "the same, nothing changed since", "median": 0.42, "runs": [0.4, 0.42, 0.45],
                      "goal": 1.0, "before": 2.93},
        "uncoalesced": {"what": "an uncoalesced naive kernel, after an edit", "median": 3.9, "runs": [3.9],
                        "goal": 3.5, "before": 6.38},
        "watch": {"what": "under `tilelab check naive --watch`, a save to its result on screen", "median": 2.2,
                  "runs": [2.2], "goal": 2.5, "before": None},
    },
    "nvcc_seconds": 1.12,
    "breakdowns": {"edited": ["where the time went (seconds from the grading's start; phases overlap):",
                              "  build      0.05 -> 1.20   1.15  naive 1.13 s (nvcc compile, then link)"],
                   "unchanged": ["nothing ran: this command took 0.40 s. The check at 10:00:01 took:"]},
    "said": {"edited": "15 / 15", "uncoalesced": "14.55 / 15, 1 hint"},
}


def test_the_bench_check_block_shows_each_figure_against_its_goal(tmp_path, capsys):
    block = measurements.render_bench_check(BENCH_CHECK)
    assert block.startswith("Machine: NVIDIA H100 80GB HBM3. Date: 2026-11-28.")
    assert "| `tilelab check naive` after an edit | 2.31 s (met) | 2.5 s | 4.39 s |" in block
    assert "| an uncoalesced naive kernel, after an edit | 3.90 s (not met) | 3.5 s | 6.38 s |" in block
    # A figure with nothing before it (the watch came later) leaves that cell empty.
    assert "| under `tilelab check naive --watch`, a save to its result on screen | 2.20 s (met) | 2.5 s |  |" in block
    assert "| nvcc alone, compiling naive.cu (the floor of a check that compiles) | 1.12 s | | |" in block
    # The breakdown of a check that compiled, as --verbose printed it; not the unchanged one's.
    assert "Where `tilelab check naive` after an edit spent its time (its last run, `-v`):" in block
    assert "\n      build      0.05 -> 1.20   1.15  naive 1.13 s (nvcc compile, then link)\n" in block
    assert "nothing ran" not in block
    assert ("What each check said of naive (its last run): `tilelab check naive` after an edit: 15 / 15; an "
            "uncoalesced naive kernel, after an edit: 14.55 / 15, 1 hint.") in block
    without_gpu = measurements.render_bench_check(dict(BENCH_CHECK, gpu=None))
    assert "no GPU, so the GPU stages did not run and the goals are not compared" in without_gpu
    assert "(met)" not in without_gpu and "(not met)" not in without_gpu
    page = ROOT / "docs" / "measurements.md"
    doc = tmp_path / "measurements.md"
    doc.write_bytes(page.read_bytes())
    found = tmp_path / "bench-check.json"
    found.write_text(json.dumps(BENCH_CHECK))
    assert measurements.main(["--bench-check", str(found), "--doc", str(doc)]) == 0
    rewritten = doc.read_text(encoding="utf-8")
    assert block in rewritten
    begin, end = measurements.markers("bench-check")
    outside = page.read_text(encoding="utf-8")
    assert rewritten.split(begin)[0] == outside.split(begin)[0] and rewritten.split(end)[1] == outside.split(end)[1]
