"""The handout's figures: drawn from the assignment's numbers, beside the
Markdown as files and in the HTML as data, each in the part it illustrates
and referred to by its number just before it, on the same page of the PDF."""

import base64
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require_pdf_stack
from handout_fixtures import edited_project, edition_pdf, edition_pdf_text, folded, part_section, visible_html

from tilelab.authoring.handout import render_html, render_markdown, write_handouts
from tilelab.authoring.handout_figures import (boundary_grid_spec, dynamic_tiles_spec, handout_figures, png,
                                               tile_phases_spec)
from tilelab.spec.assignment import load_assignment


# --- the figures ----------------------------------------------------------------------------------


def _tile_width(root: Path, part) -> int:
    text = (root / "starter" / part.file).read_text(encoding="utf-8")
    return int(re.search(r"^constexpr int TILE_WIDTH = (\d+);", text, re.M).group(1))


def test_the_figures_are_files_beside_the_markdown_and_data_in_the_html(root, assignment, tmp_path):
    require_pdf_stack()
    for variant, stem in (("student", "handout"), ("ta", "handout-ta")):
        written = write_handouts(assignment, root, tmp_path, variant=variant)
        markdown = written["markdown"].read_text(encoding="utf-8")
        page = written["html"].read_text(encoding="utf-8")
        embedded = [base64.b64decode(data) for data in re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)]
        figures = [k for k in written if k.startswith("figure ")]
        assert len(figures) == 3 and len(embedded) == 3, variant
        for number, key in enumerate(figures, start=1):
            path = written[key]
            assert path.parent == written["markdown"].parent and path.name.startswith(f"{stem}.")
            data = path.read_bytes()
            assert data.startswith(b"\x89PNG") and data == embedded[number - 1]
            # The Markdown links the file by its name beside it, then numbers and explains it.
            link = markdown.index(f"]({path.name})")
            assert markdown.index(f"*Figure {number}.*", link) - link < 40
            assert f"<strong>Figure {number}.</strong>" in page


def test_each_figure_sits_in_the_part_it_illustrates(root, assignment):
    markdown = render_markdown(assignment, root)
    for name, part_id in (("tile-phases", "tiled"), ("boundary-grid", "boundary"), ("dynamic-tiles", "dynamic_smem")):
        assert f"](handout.{name}.png)" in part_section(markdown, assignment, part_id), name


def test_the_phase_figure_is_a_public_size_of_the_tiled_part(root, assignment):
    spec = tile_phases_spec(assignment, root)
    tiled = assignment.part("tiled")
    assert spec.part == "tiled" and spec.tile == _tile_width(root, tiled) == 32
    assert spec.width in [c.j for c in tiled.cases["public"]] and spec.width % spec.tile == 0
    # The largest public Width of a few phases: 128 = 4 tiles of 32.
    assert (spec.width, spec.phases) == (128, 4)
    assert 0 <= spec.bx < spec.phases and 0 <= spec.by < spec.phases
    section = folded(part_section(render_markdown(assignment, root), assignment, "tiled"))
    assert "in 128 / 32 = 4 phases: in phase p every thread copies one element of M's tile (1, p) into Mds" in section


def test_the_grid_figure_counts_the_blocks_of_a_public_size_that_is_not_whole_tiles(root, assignment):
    spec = boundary_grid_spec(assignment, root)
    boundary = assignment.part("boundary")
    t, w = spec.tile, spec.width
    assert spec.part == "boundary" and t == _tile_width(root, boundary)
    assert w in [c.j for c in boundary.cases["public"]] and w % t != 0
    n = math.ceil(w / t)
    assert spec.blocks_per_side == n and spec.blocks == n * n
    # The boundary blocks, counted one by one: those that reach past P's last row or column.
    reaching = [(bx, by) for bx in range(n) for by in range(n) if (bx + 1) * t > w or (by + 1) * t > w]
    assert spec.boundary_blocks == len(reaching)
    assert spec.threads == (n * t) ** 2 and spec.guarded == (n * t) ** 2 - w * w
    # assignment.yaml's public 47 with 32-wide tiles: 2 x 2 blocks, 3 of them at the boundary.
    assert (w, n, spec.boundary_blocks, spec.guarded, spec.last_tile_inside) == (47, 2, 3, 1887, 15)
    section = folded(part_section(render_markdown(assignment, root), assignment, "boundary"))
    assert ("(47 + 32 − 1) / 32 = 2 blocks per side, a 2 × 2 grid of 4 blocks, 4,096 threads for 2,209 elements "
            "of P. The 3 boundary blocks") in section


def test_the_grid_figure_follows_an_edit_of_the_public_sizes(root, tmp_path):
    def edit(doc):
        part = next(p for p in doc["parts"] if p["id"] == "boundary")
        part["cases"]["public"] = [1, 16, 32, 64, 80]

    project = edited_project(root, tmp_path, edit)
    edited = load_assignment(project / "assignment.yaml")
    spec = boundary_grid_spec(edited, project)
    assert (spec.width, spec.blocks_per_side, spec.boundary_blocks) == (80, 3, 5)
    assert "a 3 × 3 grid of 9 blocks" in render_markdown(edited, project)


def _dynamic_rows(markdown: str) -> list:
    """The limits column of the dynamic figure's table."""
    return [row.split(" | ")[0][2:] for row in markdown.splitlines()
            if re.match(r"\| (\d[\d,]* bytes|\d+ KiB)(, the device's own)? \|", row)]


def test_the_dynamic_figure_fits_a_tile_to_each_limit_of_the_cases(root, assignment):
    part = assignment.part("dynamic_smem")
    limits = {"public": set(), "all": set()}
    for name in ("public", "hidden", "memcheck", "racecheck"):
        for case in part.cases[name]:
            if isinstance(case.props.get("sharedMemPerBlock"), int):
                limits["all"].add(case.props["sharedMemPerBlock"])
                if name == "public":
                    limits["public"].add(case.props["sharedMemPerBlock"])
    default = 48 * 1024  # DEFAULT_DYNAMIC_SMEM_LIMIT of starter/dynamic_smem.cu
    student, ta = dynamic_tiles_spec(assignment, root, ta=False), dynamic_tiles_spec(assignment, root, ta=True)
    assert {s.limit for s in student.shapes} == limits["public"] | {default}
    assert {s.limit for s in ta.shapes} == limits["all"] | {default}
    for shape in ta.shapes:
        t, depth, limit = shape.width, shape.depth, shape.limit
        slice_bytes = 2 * t * t * 4
        assert shape.bytes == 2 * t * depth * 4 <= limit and depth % t == 0
        # The largest tile: one more row and column would break the shared memory or the thread limit.
        assert t == 32 or 2 * (t + 1) ** 2 * 4 > limit or (t + 1) ** 2 > shape.max_threads
        # As deep as fits, or as deep as k needs.
        assert depth // t == math.ceil(shape.k / t) or shape.bytes + slice_bytes > limit
    assert {s.limit: s.width for s in ta.shapes} == {49152: 32, 2048: 16, 512: 8, 128: 4}
    # A hidden limit is the grader's to keep: the student edition draws the public ones only.
    own = "48 KiB, the device's own"
    assert _dynamic_rows(render_markdown(assignment, root)) == [own, own, "2,048 bytes", "512 bytes"]
    assert _dynamic_rows(render_markdown(assignment, root, "ta")) == [own, own, "2,048 bytes", "512 bytes", "128 bytes"]


def test_a_figure_is_the_same_png_each_time_and_another_for_other_numbers(root, assignment):
    figures = handout_figures(assignment, root, ta=False)
    first = [png(f.spec) for f in figures]
    png.cache_clear()
    assert [png(f.spec) for f in figures] == first
    spec = boundary_grid_spec(assignment, root)
    assert png(type(spec)(spec.part, spec.tile, spec.width + 2)) != png(spec)


def test_the_pdf_embeds_each_figure(root, pdf_dir):
    if shutil.which("pdfimages") is None:
        pytest.skip("skipped: pdfimages (poppler-utils) is not installed")
    pdf = edition_pdf(root, "student", pdf_dir)
    listing = subprocess.run(["pdfimages", "-list", str(pdf)], check=True, capture_output=True, text=True).stdout
    images = [line for line in listing.splitlines()[2:] if line.split()[2] == "image"]
    assert len(images) == 3


# --- what the text says about its figures ---------------------------------------------------------


def _figure_numbers(markdown: str) -> list:
    return [int(n) for n in re.findall(r"^\*Figure (\d+)\.\*", markdown, re.M)]


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_every_figure_is_referred_to_by_its_number_in_the_text_just_before_it(root, assignment, variant):
    """A figure is read where the text sends the reader to it: each is
    numbered in order, and the part that holds it says "Figure N shows ..."
    (a sentence of the text, not its caption) right before it."""
    markdown = render_markdown(assignment, root, variant)
    numbers = _figure_numbers(markdown)
    assert numbers == list(range(1, len(handout_figures(assignment, root, variant == "ta")) + 1)) and numbers
    for n in numbers:
        caption = markdown.index(f"*Figure {n}.*")
        image = markdown.rindex("![", 0, caption)
        # A mention is "Figure n" followed by anything but the caption's period.
        mentions = [m.start() for m in re.finditer(rf"(?<!\*)Figure {n}(?![.\d])", markdown)]
        assert mentions, f"the text never refers to Figure {n}"
        before = [m for m in mentions if m < image]
        assert before and image - max(before) < 600, f"Figure {n} is not referred to just before it"
        # In the same part as the figure: no heading between the mention and the figure.
        assert "\n### " not in markdown[max(before):image]
    page = folded(visible_html(render_html(assignment, root, variant)))
    for n in numbers:
        assert page.index(f"Figure {n} shows") < page.index(f"Figure {n}. ")


@pytest.mark.parametrize("variant", ["student", "ta"])
def test_each_figure_and_the_sentence_that_refers_to_it_share_a_page_of_the_pdf(root, assignment, pdf_dir,
                                                                                  variant):
    pages = [folded(page) for page in edition_pdf_text(root, variant, pdf_dir).split("\f")]
    numbers = _figure_numbers(render_markdown(assignment, root, variant))
    for n in numbers:
        holding = [i for i, page in enumerate(pages) if f"Figure {n}. " in page]
        assert len(holding) == 1, f"Figure {n}'s caption is on pages {holding}"
        page = pages[holding[0]]
        assert f"Figure {n} shows" in page and page.index(f"Figure {n} shows") < page.index(f"Figure {n}. ")
