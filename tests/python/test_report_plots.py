"""The roofline plot a report carries, and the files write_reports leaves:
drawn once, in plain numbers, safely from many threads, and left out where
nothing was timed."""

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from report_fixtures import PNG_MAGIC, boundary_part, make_result, stages

from tilelab.grading.model import STAGES
from tilelab.outputs.rendering import render_html, render_markdown
from tilelab.outputs.report import write_reports
from tilelab.outputs.roofline_plot import plot_roofline


def test_no_gpu_result_says_so_and_plots_nothing(tmp_path):
    part = boundary_part()
    part.cases = []  # nothing ran, though 4 hidden cases were due
    part.stages = stages(**{n: ("not_run", "not run: no CUDA device on this machine")
                            for n in STAGES if n not in ("static", "build")})
    result = make_result(gpu=None, ceilings=None, parts=[part], notes=["no GPU: GPU stages did not run"])
    md = render_markdown(result)
    assert "| GPU | no GPU: GPU stages did not run |" in md
    assert "all passed" not in md
    # One cause for the part, and one line for the hidden cases it has no record of.
    assert "| not run: no CUDA device on this machine |" in md
    assert "⚪ 4 hidden cases: not run: no CUDA device on this machine" in md and "0 passed" not in md
    assert "4 hidden cases: not run: no CUDA device on this machine" in render_markdown(result, "staff")
    assert not plot_roofline(result, tmp_path / "roofline.png")
    assert not (tmp_path / "roofline.png").exists()


def test_plot_is_a_png_without_touching_pyplot(result, tmp_path):
    pyplot_loaded_before = "matplotlib.pyplot" in sys.modules
    path = tmp_path / "roofline.png"
    assert plot_roofline(result, path)
    assert path.read_bytes()[:8] == PNG_MAGIC
    if not pyplot_loaded_before:
        assert "matplotlib.pyplot" not in sys.modules


def test_no_plot_when_no_part_was_timed(result, tmp_path):
    for part in result.parts:
        part.speed = None
    path = tmp_path / "roofline.png"
    assert not plot_roofline(result, path)
    assert not path.exists()


def test_write_reports_writes_all_files(result, tmp_path):
    out = tmp_path / "out"
    written = write_reports(result, out)
    assert set(written) == {"markdown", "html", "plot"}
    assert written["markdown"].read_text(encoding="utf-8").startswith("# tilelab")
    assert 'src="roofline.png"' in written["html"].read_text(encoding="utf-8")
    assert written["plot"].read_bytes()[:8] == PNG_MAGIC


def test_the_staff_reports_take_the_plot_the_students_got(result, tmp_path, monkeypatch):
    student = write_reports(result, tmp_path / "student")
    import tilelab.outputs.report as report
    monkeypatch.setattr(report, "plot_roofline", lambda *args: pytest.fail("drawn twice"))
    staff = write_reports(result, tmp_path / "staff", audience="staff", plot_drawn=student["plot"])
    assert staff["plot"].read_bytes() == student["plot"].read_bytes()
    assert 'src="roofline.png"' in staff["html"].read_text(encoding="utf-8")


def test_the_roofline_axes_are_labelled_in_plain_numbers(result, tmp_path):
    # A log axis labels itself in mathtext (10^4), whose parser is slow to
    # start and not thread-safe; the plot says 10,000.
    from tilelab.outputs.roofline_plot import roofline_axes
    figure, axes = roofline_axes(56000.0, 2900.0, (2.4, 8000.0), (3600.0, 168000.0), "NVIDIA H100 80GB HBM3")
    figure.canvas.draw()
    labels = [t.get_text() for t in axes.get_yticklabels() if t.get_text()]
    assert "10,000" in labels and "100,000" in labels and not any("$" in t for t in labels)
    x_labels = [t.get_text() for t in axes.get_xticklabels()]
    assert "10" in x_labels and "1,000" in x_labels


def test_write_reports_without_ceilings_leaves_the_plot_out(result, tmp_path):
    result.ceilings = None
    written = write_reports(result, tmp_path, audience="staff")
    assert "plot" not in written and not (tmp_path / "roofline.png").exists()
    assert "<img" not in written["html"].read_text(encoding="utf-8")


def test_rooflines_drawn_in_many_threads_at_once_all_come_out(result, tmp_path):
    """`tilelab batch` writes the reports of gradings side by side, in
    threads; matplotlib's text layout is not thread-safe, and two figures
    drawn at once failed with a ParseException (H100, 2026-11-23; without
    the lock this test failed three times out of three here)."""
    paths = [tmp_path / f"roofline-{i}.png" for i in range(24)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        drawn = list(pool.map(lambda p: plot_roofline(result, p), paths))
    assert all(drawn)
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in paths)


def test_a_grading_without_counters_keeps_the_one_panel_plot_and_no_traffic_section(result, tmp_path):
    # Results written before counters were read (and parts timed without them) read as before.
    import struct

    md = render_markdown(result)
    assert "What one call moved" not in md and "traffic-section" not in render_html(result)
    path = tmp_path / "roofline.png"
    assert plot_roofline(result, path)
    assert struct.unpack(">II", path.read_bytes()[16:24]) == (1200, 600)  # one 10 x 5 inch panel at 120 dpi
