"""The student handout and its TA edition: Markdown, HTML and PDF.

Everything in it is read from the project (assignment.yaml, starter/ and
solutions/ through handout_code.py, handouts/reference-gpu.yaml, the key),
so it cannot drift. One worded view (`_handout_view`) is laid out by the
Markdown and HTML templates in handouts/, so the formats say the same thing.
The TA edition adds the hidden cases, the key and the reference code: never
hand it to students.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..errors import TilelabError
from ..grading.answer_key import AnswerKeyError, key_working, load_key
from ..grading.answers_file import ANSWERS_FILE
from ..grading.gpu_ceilings import Ceilings
from ..grading.scoring import CUBLAS, case_points, speed_target
from ..outputs.rendering import render_page
from ..spec.assignment import Assignment, Case, Part
from ..spec.matmul import intensity
from ..spec.reference_gpu import ReferenceGpuError, load_reference_gpu, published_gflops
from ..system import setup_errors
from ..system.paths import ANSWER_KEY_FILE
from ..text.numbers import fmt_gflops, fmt_intensity, fmt_percent, fmt_points, fmt_points_unit
from .handout_code import DECLARATION_PT, STARTER_DIR, CodeError, excerpt_views, fitting_pt, starter_constants
from .handout_figures import data_uri, figure_view, handout_figures, png
from .handout_questions import questions_view

VARIANTS = ("student", "ta")
HANDOUT_DIR = "handouts"  # templates and reference-gpu.yaml, under the project root
TEMPLATES = {"markdown": "handout.md.j2", "html": "handout.html.j2"}
# File names without their extension, per variant; the TA edition's name says what it is.
OUTPUT_STEMS = {"student": "handout", "ta": "handout-ta"}

# Case sets that only the TA edition lists: their sizes are the grader's to keep.
SANITIZER_SETS = {"memcheck": "compute-sanitizer memcheck", "racecheck": "compute-sanitizer racecheck"}

# The harness's input distributions (grader/harness/core/generator.h).
DISTRIBUTION_WORDS = {"uniform": "uniform inputs in [-1, 1)", "small_int": "small-integer inputs in [-8, 8]"}


class HandoutError(TilelabError):
    """A file the handout is built from is missing or malformed."""


# --- formatting ------------------------------------------------------------------


def _size(case: Case, square: bool) -> str:
    return str(case.j) if square else f"{case.j} × {case.k} × {case.l}"


def _full_size(case: Case) -> str:
    return f"{case.j} × {case.k} × {case.l}"


def _conditions(case: Case) -> list:
    """What sets a case apart from one on uniform inputs and the real device."""
    words = []
    if case.distribution != "uniform":
        words.append(DISTRIBUTION_WORDS[case.distribution])
    for key, value in case.props.items():
        if value == "optin":
            words.append(f"prop.{key} raised to the device's opt-in maximum")
        elif isinstance(value, list):
            words.append(f"prop.{key} lowered to {' × '.join(map(str, value))}")
        else:
            unit = " bytes" if key == "sharedMemPerBlock" else ""
            words.append(f"prop.{key} lowered to {value}{unit}")
    return words


# --- reading the inputs ------------------------------------------------------------


def _read_yaml(path: Path, what: str):
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise HandoutError(f"{path}: cannot read {what} ({e.strerror})") from e
    except yaml.YAMLError as e:
        raise HandoutError(f"{path}: {what} is not valid YAML: {e}") from e


# The on-chip rungs of the roofline ladder (reference-gpu.yaml), nearest the threads first.
ON_CHIP_LEVELS = {"shared_gbps": "shared memory, all SMs together", "l2_gbps": "L2 cache"}


def reference_gpu(root: Path) -> dict:
    """The grading GPU's published figures (spec.reference_gpu), as a handout error when they are broken."""
    try:
        return load_reference_gpu(root)
    except ReferenceGpuError as e:
        raise HandoutError(str(e)) from None


def _answer_key(root: Path, assignment: Assignment) -> tuple:
    """The key as the grader reads it (so `no` stays "no"), checked against
    the questions: a TA edition with a gap in its key is not made. With it,
    the working written above each answer (grading.answers.key_working)."""
    try:
        path = Path(root) / ANSWER_KEY_FILE
        return load_key(path, assignment.questions), key_working(path)
    except AnswerKeyError as e:
        raise HandoutError(str(e)) from e


# --- the view: what the templates show ----------------------------------------------


def _case_groups(cases: tuple, square: bool) -> list:
    """Cases grouped by what sets them apart, in the order the file lists them:
    [{"label": "uniform inputs", "sizes": "1, 2, 3"}, ...]."""
    groups = {}
    for case in cases:
        key = tuple(_conditions(case))
        groups.setdefault(key, []).append(_size(case, square))
    return [{"label": ", ".join(key) if key else DISTRIBUTION_WORDS["uniform"], "sizes": ", ".join(sizes)}
            for key, sizes in groups.items()]


def _case_rows(cases: tuple) -> list:
    rows = []
    for c in cases:
        conditions = ", ".join(_conditions(c))
        rows.append({"name": c.name, "size": _full_size(c), "conditions": conditions,
                     "described": conditions or DISTRIBUTION_WORDS["uniform"]})
    return rows


SHARED_MEMORY_RULES = {
    "any": "Shared memory is up to you; the grader does not ask for it.",
    "required": "Your kernels must use shared memory: the grader checks the launch records of every call, "
                "and a call whose kernels use none fails the launch checks.",
    "dynamic_only": "All shared memory must be dynamic: one extern __shared__ buffer sized by the third launch "
                    "parameter, no static __shared__ arrays, and never more than the prop.sharedMemPerBlock "
                    "the launcher was given.",
}


# What the launch checks hold every launch to, where cases lower the device's
# limits (grading/launch_checks.py, over_limits).
LIMITS_RULE = ("Where a case lowers a limit of the cudaDeviceProp your launcher is given, every launch of that "
               "case is checked against it: prop.maxThreadsPerBlock (threads per block), prop.maxThreadsDim "
               "(the block's size along x, y and z) and prop.sharedMemPerBlock (static and dynamic shared "
               "memory together). A launch over any of them fails the launch checks, which withholds the "
               "part's correctness points.")


def _part_view(number: int, part: Part, assignment: Assignment, gpu: dict, root: Path, ta: bool,
               figures: list) -> dict:
    square = part.signature == "square"
    public, hidden = part.cases["public"], part.cases["hidden"]
    graded = len(public) + len(hidden)
    view = {
        "number": number,
        "id": part.id,
        "title": part.title,
        "file": part.file,
        "starter_path": f"{STARTER_DIR}/{part.file}",
        "declaration": part.declaration,
        "declaration_pt": fitting_pt([part.declaration], DECLARATION_PT),
        "teaches": part.teaches,
        "shared_memory_rule": SHARED_MEMORY_RULES[part.shared_memory] + (
            " " + LIMITS_RULE if any(c.props for name in ("public", "hidden") for c in part.cases[name]) else ""),
        "correctness_points": fmt_points(part.points["correctness"]),
        "speed_points": fmt_points(part.points["speed"]),
        # In points, not a bare number that reads as a fraction of them.
        "case_worth": f"{fmt_points_unit(case_points(part.points['correctness'], graded))} of the part's "
                      + fmt_points_unit(part.points["correctness"]).replace(" point", " correctness point"),
        "size_word": "Width" if square else "j × k × l",
        "public_count": len(public),
        "public_groups": _case_groups(public, square),
        "hidden_count": len(hidden),
        "timing_sizes": ", ".join(_full_size(c) for c in part.cases["timing"]),
        "code_blocks": excerpt_views(root, part, ta),
        "figures": [f for f in figures if f["part"] == part.id],
        "hidden_rows": [],
        "sanitizer_sets": [],
        "timed_sizes": len(part.cases["timing"]),
        "extra_credit": part.extra_credit and not _leaderboard_only(part),
        "leaderboard_only": _leaderboard_only(part),
        "starter_works": part.starter == "working",
        "versus_cublas": None,
    }
    if part.versus_cublas is not None:
        view["versus_cublas"] = {
            "full_at": fmt_percent(part.versus_cublas.full_at),
            "floor_parts": list(part.versus_cublas.zero_at_reference_of),
            "ladder": _ladder_view(part, assignment, gpu, root, ta),
        }
    if ta:
        view["hidden_rows"] = _case_rows(hidden)
        view["sanitizer_sets"] = [{"title": title, "rows": _case_rows(part.cases[name])}
                                  for name, title in SANITIZER_SETS.items()]
    return view


def _leaderboard_only(part: Part) -> bool:
    """A part scored against cuBLAS with no points at all: it is there for the leaderboard."""
    return part.versus_cublas is not None and part.points["correctness"] == 0 and part.points["speed"] == 0


def _ladder_view(part: Part, assignment: Assignment, gpu: dict, root: Path, ta: bool) -> dict:
    """The rungs from the textbook's tiled kernel to the part's reference, each
    as a share of cuBLAS at the ladder's size (reference-gpu.yaml: ladder)."""
    ladder = gpu["ladder"].get(part.id)
    if ladder is None:
        return {"rows": [], "size": ""}
    size = ladder["size"]
    cublas = published_gflops(gpu, CUBLAS, size)

    def row(step: str, technique: str, gflops, file: str) -> dict:
        return {"step": step, "technique": technique, "gflops": fmt_gflops(gflops) if gflops else "not measured",
                "of_cublas": fmt_percent(gflops / cublas) if gflops and cublas else "",
                "file": file if ta else ""}

    rows = []
    floor = next((p for p in part.versus_cublas.zero_at_reference_of if published_gflops(gpu, p, size)), None)
    if floor is not None:
        number = [p.id for p in assignment.parts].index(floor) + 1
        rows.append(row("start", f"the textbook's kernel: part {number} ({floor}), one value of P per thread",
                        published_gflops(gpu, floor, size), f"solutions/{assignment.part(floor).file}"))
    rows += [row(str(n), r["technique"], r["gflops"], r["file"]) for n, r in enumerate(ladder["rungs"], start=1)]
    rows.append(row("reference", "the reference solution, which goes on from the last rung" + _tiles(root, part),
                    published_gflops(gpu, part.id, size), f"solutions/{part.file}"))
    return {"rows": rows, "size": " × ".join(str(n) for n in size), "device": gpu["device"],
            "cublas": fmt_gflops(cublas) if cublas else "not measured at this size"}


def _tiles(root: Path, part: Part) -> str:
    """The reference's warp and thread tiles, as the starter's constants (which
    the solution shares) give them: the rungs before it use other shapes."""
    c = starter_constants(root, part)
    if not {"kWM", "kWN", "kTM", "kTN"} <= set(c):
        return ""
    return (f": each warp a {c['kWM']} × {c['kWN']} tile of P (kWM × kWN in {STARTER_DIR}/{part.file}), each "
            f"thread {c['kTM']} × {c['kTN']} of its values")


def _rubric_view(assignment: Assignment) -> dict:
    """The parts that count, the questions and the total; then, outside the
    total, the extra-credit and leaderboard-only parts (Part.counted_max)."""
    counted = [p for p in assignment.parts if not (p.extra_credit or _leaderboard_only(p))]
    rows, extra_rows = [], []
    for number, part in enumerate(assignment.parts, start=1):
        correctness, speed = part.points["correctness"], part.points["speed"]
        row = {"label": f"{part.id}: {part.title}", "correctness": fmt_points(correctness),
               "speed": fmt_points(speed), "total": fmt_points(correctness + speed)}
        if part in counted:
            rows.append(row)
        else:
            extra_rows.append({**row, "id": part.id, "number": number, "leaderboard_only": _leaderboard_only(part)})
    parts_total = sum(p.counted_max for p in assignment.parts)
    automatic = [q for q in assignment.questions if q.kind != "text"]
    by_hand = [q for q in assignment.questions if q.kind == "text"]
    questions_total = sum(q.points for q in automatic)
    return {
        "rows": rows,
        "extra_rows": extra_rows,
        "correctness_total": fmt_points(sum(p.points["correctness"] for p in counted)),
        "speed_total": fmt_points(sum(p.points["speed"] for p in counted)),
        "parts_total": fmt_points(parts_total),
        # Every count the handout gives of the questions, from assignment.yaml's list.
        "question_count": len(assignment.questions),
        "automatic_count": len(automatic),
        "by_hand_count": len(by_hand),
        "questions_total": fmt_points(questions_total),
        "total": fmt_points(parts_total + questions_total),
        "by_hand_ids": [q.id for q in by_hand],
        "by_hand_points": fmt_points(sum(q.manual_points for q in by_hand)),
    }


def _speed_view(assignment: Assignment, gpu: dict) -> dict:
    rule = assignment.speed
    # The grader's own roofline arithmetic, on the figures the grading GPU measured.
    ceilings = Ceilings(device_name=gpu["device"], device_uuid="", fp32_gflops=gpu["fp32_fma_gflops"],
                        dram_gbps=gpu["dram_gbps"], measured_at=gpu["measured"], raw={})
    rows, cublas_rows = [], []
    for part in assignment.parts:
        for case in part.cases["timing"]:
            size = (case.j, case.k, case.l)
            # A figure measured at another size says nothing about this one (published_gflops).
            target = speed_target(ceilings, part, rule, lambda name, j, k, l: published_gflops(gpu, name, (j, k, l)),
                                  *size)
            ai = intensity(*size)
            if part.versus_cublas is not None:
                cublas_rows.append(_cublas_row(part, case, target, ceilings, gpu))
                continue
            row = {
                "part": part.id,
                "size": _full_size(case),
                "intensity": fmt_intensity(ai),
                "bound": fmt_gflops(ceilings.bound(ai)),
                "memory_bound": ceilings.bound(ai) < ceilings.fp32_gflops,
                "reference": "not measured at this size", "of_roof": "", "full_credit": "", "no_credit": "",
            }
            if target is not None:
                row.update(reference=fmt_gflops(target.reference),
                           of_roof=fmt_percent(target.reference / ceilings.fp32_gflops),
                           full_credit=fmt_gflops(target.full), no_credit=fmt_gflops(target.zero))
            rows.append(row)
    return {
        "full_at": fmt_percent(rule.full_at),
        "zero_at": fmt_percent(rule.zero_at),
        "device": gpu["device"],
        "measured": gpu["measured"],
        "levels": _ladder_levels(gpu),
        "rows": rows,
        "cublas_rows": cublas_rows,
        "cublas_parts": [{"number": n, "id": p.id, "full_at": fmt_percent(p.versus_cublas.full_at)}
                         for n, p in enumerate(assignment.parts, start=1) if p.versus_cublas is not None],
        "any_memory_bound": any(r["memory_bound"] for r in rows + cublas_rows),
        "repetitions": assignment.timing["repetitions"],
        "min_repetitions": assignment.timing["min_repetitions"] if assignment.timing["stable_within"] else None,
        "stable_within": fmt_percent(assignment.timing["stable_within"]),
        "combined": any(len(p.cases["timing"]) > 1 for p in assignment.parts),
    }


def _ladder_levels(gpu: dict) -> list:
    """The roofline at each level of the grading GPU, nearest the threads
    first: the FP32 roof, then each memory level's bandwidth and ridge point
    (the FP32 rate over it: the FLOP per byte of that level above which it
    stops being the limit)."""
    fp32 = gpu["fp32_fma_gflops"]
    levels = [{"level": "FP32 arithmetic (FMA)", "rate": f"{fmt_gflops(fp32)} GFLOP/s", "ridge": ""}]
    memories = [(words, gpu[key]) for key, words in ON_CHIP_LEVELS.items()] + [("DRAM", gpu["dram_gbps"])]
    levels += [{"level": words, "rate": f"{fmt_gflops(gbps)} GB/s", "ridge": fmt_intensity(fp32 / gbps)}
               for words, gbps in memories]
    return levels


def _cublas_row(part: Part, case: Case, target, ceilings: Ceilings, gpu: dict) -> dict:
    """A timed size of a part scored against cuBLAS: cuBLAS, the targets it
    sets, the reference of the part that sets the floor, and the part's own
    reference for scale."""
    size = (case.j, case.k, case.l)
    ai = intensity(*size)
    row = {"part": part.id, "size": _full_size(case), "memory_bound": ceilings.bound(ai) < ceilings.fp32_gflops,
           "cublas": "not measured at this size", "cublas_of_roof": "", "full_credit": "", "no_credit": "",
           "floor_part": "", "floor": "", "reference": "", "reference_of_cublas": ""}
    if target is None:
        return row
    floor_part = next(p for p in part.versus_cublas.zero_at_reference_of if published_gflops(gpu, p, size))
    # cublas_target lowers the floor to half of full credit where the textbook kernel comes near cuBLAS.
    if target.zero == published_gflops(gpu, floor_part, size):
        row.update(floor_part=floor_part, floor=f"the reference of {floor_part}")
    else:
        row.update(floor="half of full credit")
    row.update(cublas=fmt_gflops(target.cublas), cublas_of_roof=fmt_percent(target.cublas / ceilings.fp32_gflops),
               full_credit=fmt_gflops(target.full), no_credit=fmt_gflops(target.zero))
    if target.reference:
        row.update(reference=fmt_gflops(target.reference),
                   reference_of_cublas=fmt_percent(target.reference / target.cublas))
    return row


def _tolerance_view(assignment: Assignment) -> dict:
    """The tolerance factor c of |got - expected| <= c * sqrt(k) * 2^-24 * (|M||N|)_ij:
    one number when every part shares it, else one per part."""
    factors = [{"part": p.id, "factor": fmt_points(p.tolerance["sqrt_k_factor"])} for p in assignment.parts]
    shared = {f["factor"] for f in factors}
    return {"shared": shared.pop() if len(shared) == 1 else "", "per_part": factors}


def _handout_view(assignment: Assignment, root: Path, variant: str) -> dict:
    """`variant`: "student" (public case sizes, the number of hidden cases, no
    key) or "ta" (every hidden and sanitizer case, the key and its working
    after each question, each ladder rung's file, the reference code in
    place of each TODO). The figures are PNG files beside the Markdown and
    data URIs in the HTML, which stays one file that prints as it is."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
    root = Path(root)
    ta = variant == "ta"
    key, working = _answer_key(root, assignment) if ta else ({}, {})
    gpu = reference_gpu(root)
    figures = handout_figures(assignment, root, ta)
    # Numbered in the order the parts show them.
    views = [figure_view(f, n, OUTPUT_STEMS[variant]) for n, f in enumerate(figures, start=1)]
    try:
        parts = [_part_view(n, p, assignment, gpu, root, ta, views) for n, p in enumerate(assignment.parts, start=1)]
        questions = questions_view(assignment, key, working, ta)
    except CodeError as e:
        raise HandoutError(str(e)) from None
    return {
        "ta": ta,
        "figures": figures,
        "title": assignment.title,
        "first_part": assignment.parts[0].id,
        "parts": parts,
        # The parts past the textbook, for the introduction.
        "beyond": [p for p in parts if p["versus_cublas"]],
        "leaderboard_alias": assignment.grading["leaderboard_names"] == "alias",
        "rubric": _rubric_view(assignment),
        "speed": _speed_view(assignment, gpu),
        "tolerance": _tolerance_view(assignment),
        "questions": questions,
        "answers_path": f"{STARTER_DIR}/{ANSWERS_FILE}",
        "answer_key_path": ANSWER_KEY_FILE,
    }


# --- rendering ------------------------------------------------------------------------


def render_markdown(assignment: Assignment, root: Path, variant: str = "student") -> str:
    """The handout as Markdown (GitHub flavour)."""
    return _markdown_of(_handout_view(assignment, root, variant), root)


def render_html(assignment: Assignment, root: Path, variant: str = "student") -> str:
    """The handout as one standalone, printable HTML page."""
    return _html_of(_handout_view(assignment, root, variant), root)


def _markdown_of(view: dict, root: Path) -> str:
    return render_page(Path(root) / HANDOUT_DIR, TEMPLATES["markdown"], False, view)


def _html_of(view: dict, root: Path) -> str:
    sources = {f.name: data_uri(f) for f in view["figures"]}
    return render_page(Path(root) / HANDOUT_DIR, TEMPLATES["html"], True, {**view, "figure_src": sources})


def render_pdf(html: str, path: Path) -> None:
    """Prints the HTML handout to a PDF at `path`; MissingPackage (one line
    naming the extra to install) where WeasyPrint or Pango is missing."""
    # Imported here: the PDF stack (WeasyPrint, Pango) is needed for PDFs only.
    weasyprint = setup_errors.weasyprint()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    weasyprint.HTML(string=html).write_pdf(str(path))


def write_handouts(assignment: Assignment, root: Path, out_dir: Path, variant: str = "student") -> dict:
    """Writes handout.md, handout.html, handout.pdf and the figures the
    Markdown links to, handout.<figure>.png (handout-ta.* for the TA
    edition), into `out_dir`; returns {"markdown", "html", "pdf",
    "figure <name>"...} -> path."""
    # Rendered before anything is written: a missing input leaves no half-written handout.
    view = _handout_view(assignment, root, variant)
    markdown = _markdown_of(view, root)
    html = _html_of(view, root)
    stem = OUTPUT_STEMS[variant]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {"markdown": out_dir / f"{stem}.md", "html": out_dir / f"{stem}.html", "pdf": out_dir / f"{stem}.pdf"}
    written["markdown"].write_text(markdown, encoding="utf-8")
    written["html"].write_text(html, encoding="utf-8")
    for figure in view["figures"]:
        path = written[f"figure {figure.name}"] = out_dir / figure.file_name(stem)
        path.write_bytes(png(figure.spec))
    try:
        render_pdf(html, written["pdf"])
    except setup_errors.MissingPackage as e:
        raise setup_errors.MissingPackage(f"wrote {written['markdown']} and {written['html']}, but no PDF: {e}") \
            from None
    return written
