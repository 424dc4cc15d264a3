"""What the reports and `tilelab check` show of a part's counters, from
GradeResults whose parts carry the counters an H100 read of the reference
solutions (traffic_fixtures.py): the table of what one call moved, its
sentence in the lecture's terms, the hints, and the hierarchical roofline."""

import dataclasses
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from rich.console import Console
from traffic_fixtures import REFERENCE_GFLOPS, measured_traffic, timed_part, traffic_result

from tilelab.outputs import traffic_view as tv
from tilelab.outputs.check_view import print_check
from tilelab.outputs.rendering import render_html, render_markdown
from tilelab.outputs.report import write_reports
from tilelab.outputs.roofline_plot import plot_roofline
from tilelab.outputs.traffic_plot import memory_roofs
from tilelab.outputs.traffic_view import loads_per_fma, traffic_view
from tilelab.text.numbers import fmt_flop_per_byte, fmt_gigabytes

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
GLOBAL_TITLE = "global loads, as the threads ask for them (the lecture's count)"
NOT_READ = "not supported here: the profiler cannot read counters on this GPU"
HINTS = ["Load T x T tiles of M and N into shared memory once per phase.", "Index Mds[ty][k] | not Mds[k][ty]."]


def section(markdown: str, part_id: str) -> str:
    start = markdown.index(f"\n## {part_id}:")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end > 0 else None]


def traffic_section(markdown: str, part_id: str) -> str:
    part = section(markdown, part_id)
    if "### What one call moved" not in part:
        return ""
    return part.split("### What one call moved", 1)[1].split("### Launches", 1)[0]


def png_size(path: Path) -> tuple:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


def printed(result) -> str:
    console = Console(record=True, width=200)
    print_check(result, console)
    return console.export_text()


# --- numbers -----------------------------------------------------------------------


@pytest.mark.parametrize("value, text", [(0.25, "0.25"), (8.0, "8.0"), (0.381, "0.381"), (0.4999, "0.5"),
                                         (7.969, "8.0"), (16.14, "16.1"), (127.8, "128"), (1234.5, "1,234")])
def test_flop_per_byte_keeps_two_or_three_digits_and_the_lectures_8_0(value, text):
    assert fmt_flop_per_byte(value) == text


@pytest.mark.parametrize("value, text", [(5.5e11, "550 GB"), (1.718e10, "17.2 GB"), (1.08e9, "1.08 GB"),
                                         (6.84e8, "684 MB"), (2048, "2.05 kB"), (0, "0 B"), (1.5e12, "1,500 GB"),
                                         (1.7e10, "17.0 GB")])
def test_bytes_read_in_gigabytes(value, text):
    assert fmt_gigabytes(value) == text


@pytest.mark.parametrize("intensity, words", [
    (0.25, "one 4-byte load per FMA per operand"),  # naive: both operands from global memory, every FMA
    (8.0, "one 4-byte load per 32 FMAs per operand"),  # 32 x 32 tiles: T/4
    (2.0, "one 4-byte load per 8 FMAs per operand"),
    (0.125, "2 4-byte loads per FMA per operand"),
])
def test_loads_per_fma_reads_an_intensity_as_the_lecture_does(intensity, words):
    assert loads_per_fma(intensity) == words


# --- the view and the reports ------------------------------------------------------------


def test_the_untiled_kernel_reads_0_25_against_the_references_8_0():
    part = timed_part("tiled", "naive")
    part.traffic_hints = list(HINTS)
    view = traffic_view(part)
    assert view["shown"] and view["case"] == "4096x4096x4096" and view["has_reference"]
    assert view["sentence"] == ("Global loads: 0.25 FLOP/B, one 4-byte load per FMA per operand; the reference: "
                                "8.0 FLOP/B, one load per 32 FMAs.")
    rows = {row["level"]: row for row in view["levels"]}
    assert list(rows) == ["shared", "global", "L1", "L2", "DRAM"]
    assert (rows["global"]["bytes"], rows["global"]["intensity"], rows["global"]["reference"]) == ("550 GB", "0.25",
                                                                                                  "8.0")
    assert rows["global"]["lecture"] and not rows["DRAM"]["lecture"]
    assert (rows["shared"]["bytes"], rows["shared"]["intensity"], rows["shared"]["reference"]) == ("0 B", "-", "0.381")
    assert (rows["DRAM"]["intensity"], rows["DRAM"]["reference"]) == ("8.1", "16.1")
    facts = {label.split(" (")[0]: (mine, theirs) for label, mine, theirs in view["facts"]}
    assert facts["global-load sectors per request"] == ("2.0", "4.0")
    assert facts["bank conflicts per shared-memory instruction"] == ("no shared memory", "0.0037")
    # The theoretical occupancy comes from the part's launch record; a reference's counters have none.
    assert facts["achieved occupancy"] == ("99.5 % (theoretical 100 %)", "99.6 %")
    boundary = traffic_view(timed_part("boundary", "dynamic_smem"))
    occupancy = next(row for row in boundary["facts"] if row[0].startswith("achieved occupancy"))
    assert occupancy[1:] == ["50 % (theoretical 50 %, limited by registers)", "99.6 %"]
    assert facts["FMA-pipe share of instructions"] == ("45.1 %", "38.3 %")
    assert facts["top stall reasons"][0].startswith("waiting for global or local memory 52.6\u00a0%; ")
    assert "local memory" not in facts  # neither spills
    assert view["hints"] == HINTS and not view["wide_loads"]


def test_the_markdown_table_shows_each_level_and_the_reference(tmp_path):
    result = traffic_result("naive", "tiled", "challenge")
    result.parts[1].traffic_hints = list(HINTS)
    md = render_markdown(result)
    tiled = traffic_section(md, "tiled")
    assert tiled.startswith(" (4096x4096x4096)\n")
    assert ("Global loads: 0.25 FLOP/B, one 4-byte load per FMA per operand; the reference: 8.0 FLOP/B, one load "
            "per 32 FMAs.") in tiled
    assert "| level | bytes per call | FLOP/B | the reference's FLOP/B |" in tiled
    assert f"| **{GLOBAL_TITLE}** | 550 GB | **0.25** | **8.0** |" in tiled
    assert "| DRAM | 17.0 GB | 8.1 | 16.1 |" in tiled
    assert "| global-load sectors per request (4: a warp's 32 floats side by side; up to 32 when scattered) | 2.0 | " \
           "4.0 |" in tiled
    assert "**What the counters suggest**" in tiled and "- Index Mds\\[ty\\]\\[k\\] \\| not Mds\\[k\\]\\[ty\\]." in tiled
    naive = traffic_section(md, "naive")
    assert f"| **{GLOBAL_TITLE}** | 550 GB | **0.25** | **0.25** |" in naive
    assert "the reference: 0.25 FLOP/B, the same." in naive and "What the counters suggest" not in naive
    # The challenge loads float4: the global-load line counts each instruction as 32 floats, and says so.
    challenge = traffic_section(md, "challenge")
    assert f"| **{GLOBAL_TITLE}** | 1.08 GB | **128** | **128** |" in challenge
    assert "loads more than one float per instruction" in challenge
    # Every table row has as many cells as its header.
    for line in tiled.splitlines():
        if line.startswith("| ") and ("GB" in line or "B |" in line):
            assert line.count(" | ") == 3, line


def test_the_html_table_is_the_same_view(tmp_path):
    result = traffic_result("naive", "tiled")
    result.parts[1].traffic_hints = list(HINTS)
    html = render_html(result)
    tiled = html.split('id="traffic-tiled"', 1)[1].split("</section>", 1)[0]
    assert "<td>" + GLOBAL_TITLE.replace("'", "&#39;") + '</td><td class="num">550 GB</td>' in tiled
    assert '<td class="num">0.25</td><td class="num">8.0</td>' in tiled
    assert '<tr class="lecture">' in tiled
    assert "one 4-byte load per FMA per operand; the reference: 8.0 FLOP/B" in html
    assert "<li>Index Mds[ty][k] | not Mds[k][ty].</li>" in tiled
    assert 'id="traffic-naive"' in html


def test_a_part_without_a_reference_leaves_that_column_out():
    result = traffic_result("tiled")
    result.parts[0].reference_traffic = None
    tiled = traffic_section(render_markdown(result), "tiled")
    assert "| level | bytes per call | FLOP/B |\n" in tiled and "the reference's FLOP/B" not in tiled
    assert f"| **{GLOBAL_TITLE}** | 550 GB | **0.25** |\n" in tiled
    assert "the reference solution's counters were not read on this GPU" in tiled
    assert "the reference</th>" not in render_html(result)


def test_counters_not_read_are_one_line_saying_why():
    result = traffic_result("naive", "tiled")
    part = result.parts[1]
    part.traffic, part.traffic_note = None, NOT_READ
    md = render_markdown(result)
    tiled = traffic_section(md, "tiled")
    assert tiled.strip().splitlines()[-1] == f"Counters were not read for this part: {NOT_READ}."
    assert "| level |" not in tiled and "Global loads:" not in tiled
    assert "| level |" in traffic_section(md, "naive")
    assert f"Counters were not read for this part: {NOT_READ}." in render_html(result)
    tiled_line = next(line for line in printed(result).splitlines() if line.startswith(" tiled ") and "-" in line)
    assert tiled_line.split() == ["tiled", "-", "-", "counters", "not", "read:", *NOT_READ.split()]


def test_a_part_far_over_its_budget_shows_its_traffic_and_why_the_rest_is_missing():
    result = traffic_result("naive", "tiled")
    part = result.parts[1]
    part.traffic = dataclasses.replace(part.traffic, far_over=True, achieved_occupancy=None, fma_share=None,
                                       stalls=[])
    md = render_markdown(result)
    tiled = traffic_section(md, "tiled")
    assert f"*{tv.FAR_OVER_NOTE}*" in tiled and f"| **{GLOBAL_TITLE}** | 550 GB | **0.25** | **8.0** |" in tiled
    assert tv.FAR_OVER_NOTE not in traffic_section(md, "naive")
    facts = {row[0].split(" (")[0]: row[1] for row in traffic_view(part)["facts"]}
    assert facts["achieved occupancy"].startswith(tv.NONE) and facts["top stall reasons"] == tv.NONE
    assert tv.FAR_OVER_NOTE.replace("'", "&#39;") in render_html(result)


def test_a_part_not_timed_shows_no_counters_anywhere():
    # check --fast times nothing, so it profiles nothing: no section, no line.
    result = traffic_result("naive", "tiled")
    for part in result.parts:
        part.speed, part.speeds, part.traffic, part.reference_traffic = None, [], None, None
    md = render_markdown(result)
    assert "What one call moved" not in md and "traffic-" not in render_html(result)
    assert "What one call moved" not in printed(result) and "FLOP/B" not in printed(result)


def test_check_prints_the_global_loads_and_dram_against_the_reference_and_the_first_hint():
    result = traffic_result("naive", "tiled", "boundary", "challenge")
    text = printed(result)
    assert "What one call moved, in FLOP/B" in text
    lines = {line.split()[0]: line for line in text.splitlines() if "(ref" in line}
    assert "0.25 (ref 8.0)" in lines["tiled"] and "8.1 (ref 16.1)" in lines["tiled"]
    assert "0.25 (ref 0.25)" in lines["naive"] and "128 (ref 128)" in lines["challenge"]
    # The boundary part is the dynamic_smem kernel: half the warps fit, and the first hint says so.
    hints = result.parts[2].traffic_hints
    assert hints and "at most 50 % of an SM's warps" in hints[0]
    assert hints[0][:60] in " ".join(text.split())
    result.parts[1].traffic_hints = list(HINTS)
    assert "(+1 more in the report)" in printed(result)


def test_a_hint_is_printed_as_text_not_markup():
    result = traffic_result("tiled")
    result.parts[0].traffic_hints = ["Index M[row * Width + k] [bold]once[/bold]"]
    assert "Index M[row * Width + k] [bold]once[/bold]" in printed(result)


def test_the_profiled_size_is_the_one_a_part_is_placed_at():
    part = timed_part("challenge")
    other = type(part.speed)(**{**part.speed.__dict__, "case": "2048x4096x8192", "gflops": 40000.0})
    part.speeds = [part.speed, other]
    part.traffic.case = "2048x4096x8192"
    assert tv.profiled_speed(part) is other
    part.traffic.case = "4096x4096x4096"
    assert tv.profiled_speed(part) is part.speed


# --- the plot ------------------------------------------------------------------------


def test_the_hierarchical_roofline_is_a_panel_per_part(tmp_path):
    flat, panels = tmp_path / "flat.png", tmp_path / "panels.png"
    without = traffic_result()
    for part in without.parts:
        part.traffic = part.reference_traffic = None
    assert plot_roofline(without, flat) and plot_roofline(traffic_result(), panels)
    # Six panels in two rows of three: wider and taller than the one-panel plot.
    (flat_w, flat_h), (w, h) = png_size(flat), png_size(panels)
    assert w > flat_w and h > flat_h


def test_the_plot_draws_with_some_parts_unmeasured_and_without_on_chip_ceilings(tmp_path):
    result = traffic_result("naive", "tiled", "challenge")
    result.parts[0].traffic, result.parts[0].traffic_note = None, NOT_READ
    del result.ceilings["l2_gbps"]
    result.ceilings["shared_gbps"] = None
    assert memory_roofs(result) == [("DRAM", 3038.0)]
    assert plot_roofline(result, tmp_path / "roofline.png")
    assert png_size(tmp_path / "roofline.png")[0] > 0
    one = traffic_result("challenge")
    assert plot_roofline(one, tmp_path / "one.png")
    assert png_size(tmp_path / "one.png")[0] >= 8.5 * 120  # the legend's width, however few the panels


def test_memory_roofs_are_those_measured():
    result = traffic_result("naive")
    assert memory_roofs(result) == [("DRAM", 3038.0), ("L2", 7307.0), ("shared", 32911.0)]


def test_write_reports_shows_the_table_and_the_plot(tmp_path):
    written = write_reports(traffic_result(), tmp_path)
    assert png_size(written["plot"])[0] > 1000
    html = written["html"].read_text(encoding="utf-8")
    assert 'src="roofline.png"' in html and html.count('class="traffic-section"') == 6


def test_the_fixture_is_the_measured_file():
    # The tiled part's counters are the naive reference's; its reference, the tiled one's.
    part = timed_part("tiled", "naive")
    assert part.traffic.level("global").intensity == pytest.approx(0.25)
    assert part.reference_traffic.level("global").intensity == pytest.approx(8.0)
    assert part.speed.gflops == REFERENCE_GFLOPS["naive"] and part.speed.reference_gflops == REFERENCE_GFLOPS["tiled"]
    assert measured_traffic("challenge").level("global").intensity == pytest.approx(127.8, abs=0.1)


# --- the screenshots' script --------------------------------------------------------


def test_the_screenshot_script_reads_a_grade_json_back(tmp_path):
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip("skipped: no Chromium (apt install chromium)")
    pytest.importorskip("playwright.sync_api", reason="skipped: Playwright is not installed")
    grade_json = tmp_path / "grade.json"
    grade_json.write_text(json.dumps(traffic_result("naive", "tiled", "boundary").to_dict()))
    out, keep = tmp_path / "shots", tmp_path / "report"
    run = subprocess.run([str(ROOT / "scripts" / "traffic-screenshots"), str(grade_json), "--out", str(out),
                          "--keep", str(keep), "--chromium", str(chromium)],
                         capture_output=True, text=True, timeout=180, env={**os.environ})
    assert run.returncode == 0, run.stderr
    for name in ("report-roofline.png", "report-table.png"):
        assert png_size(out / name)[0] > 500
    # Read back from JSON, the report is the one made from the objects.
    report = (keep / "report.html").read_text(encoding="utf-8")
    assert report == render_html(traffic_result("naive", "tiled", "boundary"))
    shutil.rmtree(keep)
