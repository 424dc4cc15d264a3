"""What the report tests share: a grading's result made here, with the values
a real grading produces (H100 ceilings, 4096^3 timing, a boundary bug at
Width 17, a build that does not compile), and helpers that read the rendered
reports."""

import re

from tilelab.grading.model import STAGE_TITLES, STAGES, CaseResult, ElementError, GradeResult, PartResult, Speed, Stage

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
H100_GPU = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "multiprocessors": 132}
H100_CEILINGS = {"fp32_gflops": 56000.0, "dram_gbps": 2830.0, "device_name": "NVIDIA H100 80GB HBM3"}

# The failing part's hidden cases: none of these names or sizes may reach a student.
HIDDEN_FAILING = ("w49", "w129-int")
HIDDEN_PASSING = ("w5", "w96")

COMPILER_OUTPUT = "\n".join(
    ["tiled.cu(41): error: identifier \"__synchthreads\" is undefined <script>alert('x')</script>"]
    + [f"tiled.cu({50 + i}): note: template instantiation step {i} | detail" for i in range(70)]
)


def stages(**overrides) -> dict:
    """Every stage passed unless overridden with (status, summary[, details, hints])."""
    result = {}
    for name in STAGES:
        status, summary, details, hints = "passed", f"{STAGE_TITLES[name]}: nothing wrong found", "", []
        if name in overrides:
            spec = overrides[name]
            status, summary = spec[0], spec[1]
            details = spec[2] if len(spec) > 2 else ""
            hints = spec[3] if len(spec) > 3 else []
        result[name] = Stage(name=name, status=status, summary=summary, details=details, seconds=1.5, hints=hints)
    return result


def square_case(width, set_name="public", passed=True, **kw) -> CaseResult:
    name = kw.pop("name", f"w{width}")
    return CaseResult(name=name, set=set_name, j=width, k=width, l=width, passed=passed, **kw)


def naive_part() -> PartResult:
    speed = Speed(
        case="4096x4096x4096", gflops=5278.0, time_ms=26.04, event_ms=26.04, cupti_ms=26.03, wall_ms=26.10,
        ceiling_value=65094.0, bound_gflops=65094.0, intensity=682.67, reference_gflops=5294.0,
        rule="reference", full_at=0.8, target_gflops=4235.2, zero_gflops=2647.0, fraction=1.0,
        flags=["timed by CUDA events; CUPTI span agrees within 0.1 %"],
    )
    return PartResult(
        id="naive", title="Naive kernel", file="naive.cu",
        stages=stages(racecheck=("not_run", "racecheck skipped: this part uses no shared memory")),
        cases=[square_case(w) for w in (1, 2, 3, 16, 17, 33)] + [square_case(64, name="w64-int", exact=True)]
        + [square_case(w, "hidden") for w in (7, 63, 65)],
        correctness_score=10, correctness_max=10, speed_score=5, speed_max=5, speed=speed, hidden_total=3,
        launches=[{"name": "naiveKernel(const float*, const float*, float*, int)", "grid": [2, 2, 1],
                   "block": [16, 16, 1], "static_shared_bytes": 0, "dynamic_shared_bytes": 0,
                   "registers_per_thread": 38, "duration_ms": 0.004}],
    )


def boundary_part() -> PartResult:
    w17 = square_case(
        17, passed=False, wrong=33, reasons=["33 of 289 elements wrong (max |got - expected| = 3.1)"],
        first_errors=[
            ElementError(row=0, col=16, expected=4.123456789, got="1.0625", allowed=2.5e-6),
            ElementError(row=16, col=0, expected=-2.75, got="unwritten", allowed=2.1e-6),
        ],
    )
    w47 = square_case(
        47, name="w47-int", passed=False, exact=True, wrong=47, reasons=["47 elements wrong"],
        first_errors=[ElementError(row=46, col=3, expected=112.0, got="104", allowed=0.0)],
    )
    hidden = [
        square_case(49, "hidden", passed=False, wrong=97, reasons=["97 elements wrong"],
                    first_errors=[ElementError(row=48, col=1, expected=7.3125, got="0", allowed=3e-6)]),
        square_case(129, "hidden", name="w129-int", passed=False, exact=True, wrong=257, reasons=["257 wrong"],
                    first_errors=[ElementError(row=128, col=2, expected=12.0, got="nan", allowed=0.0)]),
        square_case(5, "hidden"),
        square_case(96, "hidden"),
    ]
    return PartResult(
        id="boundary", title="Boundary checks for any Width", file="boundary.cu",
        stages=stages(
            correctness=(
                "failed", "2 of 4 public cases failed; hidden w49 and w129-int failed too",
                "w17: 33 elements wrong\nw47-int: 47 elements wrong\nhidden case w49 (49x49x49): 97 wrong",
                ["Width 17 is one above a 16-wide tile: the last tile's loads must read 0.0 outside the matrix",
                 "Check that the number of phases is ceil(Width / TILE), computed in integers"],
            ),
            speed=("not_run", "not run: speed is measured only when every correctness case passes"),
        ),
        cases=[square_case(16), w17, square_case(32), w47] + hidden,
        correctness_score=7.5, correctness_max=15, speed_score=0, speed_max=5, hidden_total=4,
    )


def tiled_part() -> PartResult:
    not_run = {n: ("not_run", "skipped because the build failed") for n in STAGES if n not in ("static", "build")}
    return PartResult(
        id="tiled", title="Tiled kernel with shared memory", file="tiled.cu",
        stages=stages(
            build=("failed", "nvcc could not compile tiled.cu (1 error)", COMPILER_OUTPUT,
                   ["A barrier is spelt __syncthreads()"]),
            **not_run,
        ),
        cases=[], correctness_score=0, correctness_max=15, speed_score=0, speed_max=10,
    )


def make_result(**kw) -> GradeResult:
    fields = dict(
        assignment="tilelab_matmul", mode="grade", submission="/autograder/submission", seed=424242,
        gpu=dict(H100_GPU), ceilings=dict(H100_CEILINGS), parts=[naive_part(), boundary_part(), tiled_part()],
        started="2026-11-21T14:03:00+00:00", seconds=212.4,
        timings={"build": 95.0, "correctness": 61.2, "sanitizers": 40.1, "speed": 16.1},
        notes=["graded on the course H100; timings are comparable with the published targets"],
    )
    fields.update(kw)
    return GradeResult(**fields)


def section(markdown: str, part_id: str) -> str:
    """The Markdown of one part, from its heading to the next part's."""
    match = re.search(rf"^## {re.escape(part_id)}:.*?(?=^## |\Z)", markdown, re.S | re.M)
    assert match, f"no section for {part_id}"
    return match.group(0)


def stage_row(part_markdown: str, stage: str) -> str:
    rows = [line for line in part_markdown.splitlines()
            if line.startswith("|") and f"| {STAGE_TITLES[stage]} |" in line.replace("\\", "")]
    assert len(rows) == 1, rows
    return rows[0]


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))
