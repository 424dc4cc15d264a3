"""The keys of assignment.yaml: one description that the validator and its reference both read.

- Each mapping is a `Key` whose `keys` list its entries; the validator
  (tilelab.spec.assignment) takes required and known keys, defaults, bounds
  and allowed values from here, and docs/assignment-yaml.md is rendered from
  it (tilelab.spec.reference; a test fails when the two differ).
- Rules that tie keys together are checked in code and stated here in words.
- Imports only the standard library: the build runs it through build_export.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

SIGNATURES = {
    # signature kind -> the launcher's parameters after (M, N, P)
    "square": "int Width",
    "rectangular": "int j, int k, int l",
    "rectangular_props": "int j, int k, int l, const cudaDeviceProp& prop",
}
DISTRIBUTIONS = ("uniform", "small_int")
PROP_KEYS = ("sharedMemPerBlock", "maxThreadsPerBlock", "maxThreadsDim")
CASE_SETS = ("public", "hidden", "timing", "memcheck", "racecheck")
GRADED_SETS = ("public", "hidden")  # their case names share one namespace in reports
SHARED_MEMORY_POLICIES = ("any", "required", "dynamic_only")
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
STAGE_TIME_LIMITS = ("build", "correctness", "sanitizer", "speed")
MAX_DIMENSION = 1 << 20
QUESTION_KINDS = ("number", "choice", "text")
# A part's starter: a TODO stub that fails loudly until written, or a
# correct, slow kernel to improve (the challenge part).
STARTER_KINDS = ("todo", "working")
LEADERBOARD_NAMES = ("name", "alias")

ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FILE_RE = re.compile(r"^[A-Za-z0-9_]+\.cu$")
QUESTION_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
ID_HINT = "lower-case letters, digits and '_'"


@dataclass(frozen=True)
class Key:
    """One key of assignment.yaml. A mapping's (or a list of mappings') entries
    are its `keys`; a key whose mapping takes any names has none."""

    name: str
    type: str  # as the reference shows it; "integer", "number", "string" and "boolean" are checked alike
    meaning: str
    required: bool = False
    needed: str = ""  # when an optional key is needed all the same, in words
    default: Any = None  # None: no default
    allowed: tuple = ()
    bounds: Optional[tuple] = None  # (lowest, highest), both allowed
    pattern: Optional[re.Pattern] = None
    hint: str = ""  # what `pattern` accepts, in words
    keys: tuple = ()

    def key(self, name: str) -> "Key":
        for k in self.keys:
            if k.name == name:
                return k
        raise KeyError(f"{self.name} has no key {name!r}")

    @property
    def required_names(self) -> tuple:
        return tuple(k.name for k in self.keys if k.required)

    @property
    def optional_names(self) -> tuple:
        return tuple(k.name for k in self.keys if not k.required)


def _seconds(stage: str, what: str) -> Key:
    return Key(stage, "number", f"Seconds a part's {what} may take before it is stopped and reported as a "
                                "time-out; the other parts go on.", required=True, bounds=(1, 3600))


def _visibility(name: str, what: str, **kw: Any) -> Key:
    return Key(name, "string", f"Gradescope visibility of {what}.", allowed=VISIBILITIES, **kw)


def _tolerance() -> Key:
    return Key("tolerance", "mapping", "How far a result may be from the exact product.", keys=(
        Key("sqrt_k_factor", "number",
            "An element passes when |got - expected| <= sqrt_k_factor * sqrt(k) * 2^-24 * (|M||N|)_ij. "
            "A part's value replaces the one in defaults.",
            needed="in defaults.tolerance or in every part", bounds=(0.0, 1e6)),
    ))


TIMING = Key("timing", "mapping", "How timing cases are run, for every part alike.", required=True, keys=(
    Key("repetitions", "integer", "Timed calls per timing case, each on fresh inputs: the most.", required=True,
        bounds=(1, 10000)),
    Key("stable_within", "number", "Timing a case stops before `repetitions` calls once at least "
                                   "`min_repetitions` timed calls all lie within this share of their median "
                                   "(0: always `repetitions` calls).", default=0.0, bounds=(0, 0.5)),
    Key("min_repetitions", "integer", "The fewest timed calls at which `stable_within` may stop timing.",
        default=5, bounds=(1, 10000)),
    Key("warmup_calls", "integer", "Untimed calls before the timed ones.", required=True, bounds=(0, 10000)),
    Key("warmup_ms", "number", "The untimed calls go on at least this many milliseconds, so the GPU's "
                               "clocks are up.", required=True, bounds=(0, 60000)),
    Key("input_sets", "integer", "Input buffers rotated between calls.", required=True, bounds=(1, 64)),
    Key("samples", "integer", "Output elements checked after every timed call.", required=True,
        bounds=(4, 1 << 16)),
))

GRADING = Key("grading", "mapping", "Time limits, visibility, the speed rule and the leaderboard.", required=True,
              keys=(
    Key("time_limits", "mapping", "Seconds each stage of one part may take.", required=True, keys=(
        _seconds("build", "build"),
        _seconds("correctness", "correctness run (its public cases, or its hidden ones)"),
        _seconds("sanitizer", "compute-sanitizer runs (memcheck and racecheck cases)"),
        _seconds("speed", "timing runs"),
    )),
    Key("visibility", "mapping", "When students see each test's result on Gradescope.", required=True, keys=(
        _visibility("public", "each part's test of its public cases", required=True),
        _visibility("hidden", "each part's test of its hidden cases (students see from the start that "
                              "they exist)", required=True),
        _visibility("questions", "the exercise questions' tests; shown at once, a choice answer could be "
                                 "found by resubmitting", default="after_due_date"),
    )),
    Key("speed", "mapping", "How speed points are scored: against each part's own reference solution, timed "
                            "by the grader on the grading GPU (`tilelab calibrate`), linear between zero_at "
                            "and full_at. Speed points need a correct part.", required=True, keys=(
        Key("full_at", "number", "Full speed points from this fraction of the reference's GFLOP/s.",
            required=True, bounds=(0.05, 2.0)),
        Key("zero_at", "number", "No speed points at or below this fraction of the reference's GFLOP/s; "
                                 "must be below full_at.", required=True, bounds=(0.0, 2.0)),
        Key("calibration_runs", "integer", "Timed runs of each reference per calibration; the median counts "
                                           "and their spread is reported.", required=True, bounds=(1, 20)),
    )),
    Key("leaderboard", "mapping", "The class leaderboard of a part scored against cuBLAS (`tilelab batch` "
                                  "writes it as CSV and HTML).", keys=(
        Key("names", "string", "name shows each hand-in's name; alias shows a stable alias instead (the "
                               "student's report tells them theirs).", allowed=LEADERBOARD_NAMES, default="alias"),
    )),
))

# A case of a part. Its form depends on the part's signature, so the part's
# cases point here rather than holding these keys themselves.
PROPS = Key("props", "mapping", "Fields of the cudaDeviceProp given to the launcher, overriding the device's; "
                                "only for a rectangular_props launcher. Each field adds to the case's name "
                                "(-smem, -threads, -dim).", keys=(
    Key("sharedMemPerBlock", "integer or `optin`", "Shared memory per block, in bytes; optin: the device's "
                                                   "opt-in maximum.", bounds=(1, 1 << 30)),
    Key("maxThreadsPerBlock", "integer", "Threads per block.", bounds=(1, 1 << 30)),
    Key("maxThreadsDim", "list [x, y, z] of integers", "Largest block size in each dimension.",
        bounds=(1, 1 << 20)),
))
_INPUTS = Key("inputs", "string", "uniform draws values in [-1, 1); small_int draws integers in [-8, 8], for "
                                  "which every summation order is exact, so a wrong index shows as an exact "
                                  "mismatch (the case's name ends in -int).", allowed=DISTRIBUTIONS,
              default="uniform")
SQUARE_CASE = Key("square case", "integer or mapping", "A case of a square part: its Width (named wW), or this "
                                                       "mapping. No matrix may hold more than 2^30 elements.", keys=(
    Key("width", "integer", "Width of M, N and P.", required=True, bounds=(1, MAX_DIMENSION)),
    _INPUTS,
))
RECTANGULAR_CASE = Key("rectangular case", "list [j, k, l] or mapping",
                       "A case of a rectangular or rectangular_props part: [j, k, l] (named jxkxl), or this "
                       "mapping. No matrix may hold more than 2^30 elements.", keys=(
    Key("j", "integer", "Rows of M and P.", required=True, bounds=(1, MAX_DIMENSION)),
    Key("k", "integer", "Columns of M, rows of N.", required=True, bounds=(1, MAX_DIMENSION)),
    Key("l", "integer", "Columns of N and P.", required=True, bounds=(1, MAX_DIMENSION)),
    _INPUTS,
    PROPS,
))


def _case_set(name: str, meaning: str) -> Key:
    return Key(name, "list of cases", meaning + " Entries are square or rectangular cases, after the part's "
                                                "signature.", required=True)


PART = Key("parts", "list of parts", "The parts, in the order students do them; no two share an id, a file or a "
                                     "launcher.", required=True, keys=(
    Key("id", "string", "The part's name in commands and reports; `cublas` names the grader's baseline and is "
                        "taken.", required=True, pattern=ID_RE, hint=ID_HINT),
    Key("title", "string", "The part's title in the handout and reports.", required=True),
    Key("file", "string", "The source file students hand in.", required=True, pattern=FILE_RE,
        hint="a file name ending in .cu"),
    Key("launcher", "string", "The host function the harness calls.", required=True, pattern=IDENTIFIER_RE,
        hint="a C++ identifier"),
    Key("signature", "string", "The launcher's parameters after (M, N, P): square: int Width; rectangular: "
                               "int j, int k, int l; rectangular_props: those and const cudaDeviceProp& prop.",
        required=True, allowed=tuple(SIGNATURES)),
    Key("teaches", "string", "What the part teaches, in a line.", required=True),
    Key("points", "mapping", "The part's points.", required=True, keys=(
        Key("correctness", "number", "Points for passing every public and hidden case.", required=True,
            bounds=(0, 1000)),
        Key("speed", "number", "Points for speed, scored by grading.speed or versus_cublas.", required=True,
            bounds=(0, 1000)),
        Key("extra_credit", "boolean", "Whether the points are earned on top of the total rather than part "
                                       "of it.", default=False),
    )),
    Key("cases", "mapping", "The problem sizes the part is run on. Public and hidden case names share one "
                            "namespace; no set lists a case twice.", required=True, keys=(
        _case_set("public", "Graded cases students see."),
        _case_set("hidden", "Graded cases whose names are not shown; may be empty (a student's copy has none)."),
        _case_set("timing", "Timed on fresh inputs for the speed points."),
        _case_set("memcheck", "Small cases run under compute-sanitizer memcheck."),
        _case_set("racecheck", "Tiny cases run under compute-sanitizer racecheck, which is about 10^4 times "
                               "slower."),
    )),
    Key("launch", "mapping", "What the part's kernels may do when launched.", required=True, keys=(
        Key("shared_memory", "string", "any: no rule; required: the kernels must use shared memory; "
                                       "dynamic_only: no static __shared__, dynamic within the limit given "
                                       "(needs a rectangular_props launcher).", required=True,
            allowed=SHARED_MEMORY_POLICIES),
    )),
    _tolerance(),
    Key("versus_cublas", "mapping", "Score the part's speed against cuBLAS SGEMM (FP32) timed by the grader at "
                                    "the same size on the same GPU, instead of grading.speed; needs a "
                                    "rectangular or rectangular_props launcher.", keys=(
        Key("full_at", "number", "Full speed points from this fraction of cuBLAS's GFLOP/s.", required=True,
            bounds=(0.05, 2.0)),
        Key("zero_at_reference_of", "list of part ids", "No speed points at or below the reference of the first "
                                                        "of these parts timed at the same size; every timing case "
                                                        "needs one.", required=True),
    )),
    Key("starter", "string", "todo: the starter is a stub that fails until written; working: a correct, slow "
                             "kernel to improve.", allowed=STARTER_KINDS, default="todo"),
))

QUESTION = Key("questions", "list of questions", "Exercise questions, answered in answers.yaml (starter/answers.yaml "
                                                 "is generated from this list; no two share an id).", keys=(
    Key("id", "string", "The question's name in answers.yaml.", required=True, pattern=QUESTION_ID_RE,
        hint="lower-case letters, digits and '-'"),
    Key("kind", "string", "number: graded within a relative tolerance (the text states the unit); choice: one "
                          "option id; text: free text collected for a TA.", required=True, allowed=QUESTION_KINDS),
    Key("text", "string", "The question as the handout shows it.", required=True),
    Key("points", "number", "Automatic points.", bounds=(0, 1000),
        needed="for number and choice questions; not allowed in text ones"),
    Key("tolerance", "number", "Relative tolerance of the answer.", bounds=(0.0, 1.0),
        needed="for number questions; not allowed in others"),
    Key("options", "mapping: option id to text", "At least two; ids are short lower-case strings (quote yes "
                                                 "and no).", needed="for choice questions; not allowed in others"),
    Key("manual_points", "number", "Points a TA awards by hand, suggested; text questions only.", default=0,
        bounds=(0, 1000)),
))

ASSIGNMENT = Key("assignment.yaml", "mapping", "The one description of the assignment.", required=True, keys=(
    Key("name", "string", "The assignment's name.", required=True, pattern=ID_RE, hint=ID_HINT),
    Key("title", "string", "The assignment's title.", required=True),
    Key("defaults", "mapping", "Defaults of every part.", required=True, keys=(_tolerance(),)),
    GRADING,
    TIMING,
    PART,
    QUESTION,
    Key("question_code", "mapping: name to code", "Code the questions refer to, shown in the handout and in "
                                                  "starter/answers.yaml just before the first question that names "
                                                  "it or a kernel it defines; the names are free."),
))
