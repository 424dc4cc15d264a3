"""A deadline's load through `tilelab batch` (scripts/bench --class): N
complete, distinct hand-ins (handins.py) graded on one GPU, then on every
GPU of the host: hand-ins an hour, per GPU, each grading's wall time (p50,
p95), where the time of a grading went (its phases, the waits for the GPU
among them), how long each held its GPU's timing turn against what each
hand-in cost the GPU, how busy the CPUs and GPUs were, and the ratio of all
GPUs to one. With --stage-costs, the class on one GPU four times, with and
without the speed stage and compute-sanitizer: what each costs a hand-in
under a class's load; with --without, the class with the stages named left
out (the hardware counters among them); with --starts-beside, the class on
one GPU alone and with CUDA processes started beside it (starts_beside.py).
A benchmark: it asserts no time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from tilelab.errors import TilelabError
from tilelab.grading.model import STAGES
from tilelab.grading.stages.speed import TIMING_RUNS_STARTING, WAITING_FOR_GPU_ALONE, WAITING_FOR_TURN
from tilelab.operations.batch import find_gpus, run_batch
from tilelab.operations.grading_run import counters_pending

from .handins import distinct_hand_ins
from .machine_load import MachineLoad
from .starts_beside import StartsBeside, cost_per_start


@dataclass
class ClassRun:
    gpus: list
    in_flight: int
    hand_ins: int
    graded: int
    wall_seconds: float
    gradings: list  # each grading's wall time, seconds
    phases: dict  # phase -> mean seconds per grading (phases overlap)
    load: dict = field(default_factory=dict)  # MachineLoad.figures()
    not_graded: list = field(default_factory=list)  # "student: why"
    short: list = field(default_factory=list)  # "student: part points/max, ...": the solutions earn every point
    turn: dict = field(default_factory=dict)  # the GPU's timing turn, mean seconds a grading (turn_figures)
    without: list = field(default_factory=list)  # stages left out (WITHOUT)
    counters: str = "inline"  # GradeOptions.counters of its gradings
    scored_seconds: Optional[float] = None  # with counters "later": when every grading had its score
    beside: dict = field(default_factory=dict)  # CUDA processes started beside it (StartsBeside.figures())
    results_at: list = field(default_factory=list)  # when each result was written, seconds from the start, in order

    @property
    def steady(self) -> Optional[tuple]:
        """(hand-ins an hour, first, last): the rate between the first and
        the last result written while every slot had a grading in flight
        (the in_flight-th result and as many before the end), which a
        deadline's long stream keeps; a class's start and end wait on a
        pipeline that fills and empties. None for a class too small to tell,
        and where its counters were left for later: each result is written
        again when they are read, so its time is not its score's."""
        if self.counters == "later":
            return None
        slots = self.in_flight * max(1, len(self.gpus))
        ends = self.results_at
        first, last = slots, len(ends) - slots
        if last - first < 2 or ends[last - 1] <= ends[first - 1]:
            return None
        return 3600.0 * (last - first) / (ends[last - 1] - ends[first - 1]), first, last

    @property
    def per_hour(self) -> float:
        return 3600.0 * self.graded / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def per_hour_per_gpu(self) -> float:
        return self.per_hour / max(1, len(self.gpus))

    @property
    def cost(self) -> float:
        """What each hand-in cost its GPU: seconds of the class's wall time, per GPU."""
        return 3600.0 / self.per_hour_per_gpu if self.per_hour_per_gpu else 0.0

    def percentile(self, share: float) -> float:
        return percentile(self.gradings, share)

    def to_dict(self) -> dict:
        steady = self.steady
        return {**asdict(self), "steady_per_hour": round(steady[0], 1) if steady else None,
                "per_hour": round(self.per_hour, 1),
                "per_hour_per_gpu": round(self.per_hour_per_gpu, 1),
                "p50_s": round(self.percentile(0.5), 2), "p95_s": round(self.percentile(0.95), 2)}


# The stages a class may be graded without (run_class), by the word `--without` takes; stage costs
# leaves out the first two (run_stage_costs). The counters change no points: a class without them
# must still earn every one.
SPEED, SANITIZERS, COUNTERS = "the speed stage", "compute-sanitizer", "the hardware counters"
WITHOUT = {"speed": SPEED, "sanitizers": SANITIZERS, "counters": COUNTERS}
LEFT_OUT = (SPEED, SANITIZERS)
_FOLDER_WORD = {stage: word for word, stage in WITHOUT.items()}

# What a grading's timing turn holds, in grading/stages/speed.py's phases:
# the turn is taken, its timing runs start and reach their gates, the runs
# beside them end, then the GPU is the grading's alone until the speed stage ends.
TURN_ALONE, TURN_HELD = "the GPU alone", "held"


def turn_figures(grade: dict) -> Optional[dict]:
    """One grading's timing turn from its grade.json: seconds waiting for it,
    its timing runs starting, waiting for the GPU alone, then with the GPU
    alone, and the turn held (the last three); None where it took no turn."""
    timings, spans = grade.get("timings", {}), grade.get("spans", {})
    speed, drain = spans.get("speed"), spans.get(WAITING_FOR_GPU_ALONE)
    if not speed or not drain or TIMING_RUNS_STARTING not in timings:
        return None
    figures = {WAITING_FOR_TURN: float(timings.get(WAITING_FOR_TURN, 0.0)),
               TIMING_RUNS_STARTING: float(timings[TIMING_RUNS_STARTING]),
               WAITING_FOR_GPU_ALONE: float(timings.get(WAITING_FOR_GPU_ALONE, 0.0)),
               TURN_ALONE: max(0.0, speed[1] - drain[1])}
    figures[TURN_HELD] = figures[TIMING_RUNS_STARTING] + figures[WAITING_FOR_GPU_ALONE] + figures[TURN_ALONE]
    return figures


def points_lost(grade: dict) -> str:
    """The parts of a grading (grade.json) short of their points, each with
    what its first stage short of passing, or else its speed stage, said:
    why a copy of the solutions lost points. "" where none did."""
    lost = []
    for part in grade.get("parts", []):
        if not isinstance(part, dict) or not part.get("score", 0) < part.get("max_score", 0):
            continue
        stages = part.get("stages") if isinstance(part.get("stages"), dict) else {}
        # In the pipeline's order: a database's JSON keeps no order of keys.
        ordered = [stages[name] for name in STAGES if isinstance(stages.get(name), dict)]
        said = next((st for st in ordered if st.get("status") != "passed"), stages.get("speed") or {})
        lost.append(f"{part.get('id')} {part['score']:g}/{part['max_score']:g}"
                    + (f" ({said.get('name')}: {said.get('summary')})" if said.get("summary") else ""))
    return "; ".join(lost)


def percentile(values: list, share: float) -> float:
    """The value below which `share` of `values` lie (the nearest rank); 0 when there are none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def run_class(root: Path, build: Path, out: Path, count: int, gpus: list, in_flight: Optional[int],
              log: Callable[[str], None], without: tuple = (), counters: str = "inline",
              starts_beside: Optional[float] = None) -> ClassRun:
    """`count` distinct complete hand-ins graded by `tilelab batch` on
    `gpus`, the stages `without` (WITHOUT) left out, the counters read
    `counters` (GradeOptions.counters) where they are not; with
    `starts_beside`, that many CUDA processes a second started beside it on
    the first of `gpus` (StartsBeside)."""
    counters = "off" if COUNTERS in without else counters
    tag = f"{len(gpus)}gpu-{time.time_ns()}"
    name = (f"{len(gpus)}gpu" + "".join(f"-without-{_FOLDER_WORD[stage]}" for stage in without)
            + ("-counters-later" if counters == "later" else "")
            + (f"-starts-beside-{starts_beside:g}" if starts_beside else ""))
    class_dir, results = out / f"class-{name}", out / f"results-{name}"
    distinct_hand_ins(root, count, class_dir, tag)
    shutil.rmtree(results, ignore_errors=True)
    log(f"bench: {count} distinct complete hand-ins through tilelab batch on GPU {', '.join(gpus) or '(none)'}"
        + (f", without {' and '.join(without)}" if without else "")
        + (", the counters read once every hand-in is graded" if counters == "later" else "")
        + (f", {starts_beside:g} CUDA processes a second started beside it" if starts_beside else ""))
    beside = (StartsBeside(root, build, out / f"starts-beside-{name}", gpus[0], starts_beside) if starts_beside
              else nullcontext())
    with MachineLoad() as load, beside:
        clock, began = time.monotonic(), time.time()
        summary = run_batch(class_dir, root=root, build_dir=build, out_dir=results, gpus=gpus, force=True,
                            live=False, log=log, in_flight=in_flight, sanitizers=SANITIZERS not in without,
                            timing=SPEED not in without, counters=counters)
        wall = time.monotonic() - clock
    walls, phases, missing, short, turns, ends = [], {}, [], [], [], []
    for row in summary.rows:
        try:
            detailed = json.loads((results / row.student / "grade.json").read_text())
            ends.append((results / row.student / "grade.json").stat().st_mtime - began)
        except (OSError, ValueError):
            missing.append(f"{row.student}: {row.status}")
            continue
        if not detailed.get("gpu"):
            missing.append(f"{row.student}: graded without a GPU")
        if counters_pending(results / row.student):
            missing.append(f"{row.student}: its counters are still to be read")
        walls.append(float(detailed.get("seconds", 0.0)))
        lost = points_lost(detailed)
        if lost and not set(without) & set(LEFT_OUT):  # a stage left out earns nothing
            short.append(f"{row.student}: {lost}")
        for phase, seconds in detailed.get("timings", {}).items():
            phases[phase] = phases.get(phase, 0.0) + float(seconds)
        turn = turn_figures(detailed)
        if turn is not None:
            turns.append(turn)
    n = max(1, len(walls))
    return ClassRun(gpus=list(gpus), in_flight=summary.in_flight, hand_ins=count, graded=len(walls),
                    wall_seconds=round(wall, 2), gradings=[round(w, 2) for w in walls],
                    phases={p: round(s / n, 3) for p, s in sorted(phases.items(), key=lambda x: -x[1])},
                    load=load.figures(), not_graded=missing, short=short,
                    turn={k: round(sum(t[k] for t in turns) / len(turns), 3) for k in turns[0]} if turns else {},
                    without=list(without), counters=counters,
                    scored_seconds=round(summary.scored_seconds, 2) if counters == "later" else None,
                    beside=beside.figures() if starts_beside else {},
                    results_at=[round(t, 2) for t in sorted(ends)])


def run_classes(root: Path, build: Path, out: Path, count: int, gpus: Optional[list], in_flight: Optional[int],
                log: Callable[[str], None], without: tuple = (), counters: str = "inline",
                starts_beside: Optional[float] = None) -> list:
    """The class on the first GPU alone, then on all of them (when there are
    several), each GPU calibrated first: a deadline's gradings find their
    GPU's calibration made, and a run that made one would count it.
    `without`: the stages (WITHOUT) every grading leaves out; `counters`: when they are read.
    `starts_beside`: the class on the first GPU alone, then again on it with that many CUDA
    processes a second started beside it (StartsBeside), instead of on all the GPUs."""
    gpus = find_gpus() if gpus is None else list(gpus)
    if starts_beside and not gpus:
        raise TilelabError("--starts-beside starts CUDA processes beside a class on a GPU, and this machine has "
                           "none (nvidia-smi lists no GPU that CUDA_VISIBLE_DEVICES lets through)")
    calibrate_each(root, build, gpus[:1] if starts_beside else gpus, log)
    runs = [run_class(root, build, out, count, gpus[:1], in_flight, log, without, counters)]
    if starts_beside:
        runs.append(run_class(root, build, out, count, gpus[:1], in_flight, log, without, counters, starts_beside))
    elif len(gpus) > 1:
        runs.append(run_class(root, build, out, count * len(gpus), gpus, in_flight, log, without, counters))
    return runs


def run_stage_costs(root: Path, build: Path, out: Path, count: int, gpus: Optional[list],
                    in_flight: Optional[int], log: Callable[[str], None]) -> list:
    """The class on the first GPU with every stage, then without the speed
    stage, without compute-sanitizer and without both (stage_costs)."""
    gpus = (find_gpus() if gpus is None else list(gpus))[:1]
    if not gpus:
        raise TilelabError("--stage-costs measures what the stages cost a GPU, and this machine has none "
                           "(nvidia-smi lists no GPU that CUDA_VISIBLE_DEVICES lets through)")
    calibrate_each(root, build, gpus, log)
    return [run_class(root, build, out, count, gpus, in_flight, log, without)
            for without in ((), (SPEED,), (SANITIZERS,), (SPEED, SANITIZERS))]


def stage_costs(runs: list) -> dict:
    """What each left-out stage costs a hand-in (seconds of its GPU): the
    class's cost with every stage less its cost without that one, and the
    rest (build, cases, launch checks) the cost without both; None for a
    figure whose runs are missing."""
    cost = {frozenset(r.without): round(r.cost, 3) for r in runs if r.graded}
    whole = cost.get(frozenset())
    found = {stage: round(whole - cost[frozenset({stage})], 3) if whole and frozenset({stage}) in cost else None
             for stage in LEFT_OUT}
    found["the rest"] = cost.get(frozenset(LEFT_OUT))
    found["every stage"] = whole
    return found


def format_stage_costs(runs: list) -> str:
    costs = stage_costs(runs)
    said = {name: "-" if s is None else f"{s:.2f} s" for name, s in costs.items()}
    return (format_classes(runs) + "\nwhat each stage costs a hand-in on one GPU under the class's load (its cost "
            "with every stage, less its cost without the stage): "
            + ", ".join(f"{stage} {said[stage]}" for stage in (*LEFT_OUT, "the rest"))
            + f"; with every stage {said['every stage']}")


def calibrate_each(root: Path, build: Path, gpus: list, log: Callable[[str], None]) -> None:
    """`tilelab calibrate` on every GPU at once, each in a process of its own that sees only its GPU."""
    log(f"bench: calibrating GPU {', '.join(gpus)}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root / "grader"),
                                                                     os.environ.get("PYTHONPATH")])))
    started = [subprocess.Popen([sys.executable, "-m", "tilelab.cli", "--root", str(root), "calibrate", "--build",
                                 str(build)], env=dict(env, CUDA_VISIBLE_DEVICES=gpu), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True) for gpu in gpus]
    for gpu, proc in zip(gpus, started):
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise TilelabError(f"calibrating GPU {gpu} failed: {err.strip().splitlines()[-1] if err.strip() else ''}")


def format_classes(runs: list) -> str:
    lines = ["the class: complete, distinct hand-ins through tilelab batch"]
    for run in runs:
        load = run.load
        gpu_busy = ", ".join(f"GPU {i} {100 * b:.0f} %" for i, b in sorted(load.get("gpu_busy", {}).items()))
        lines.append(
            f"- {len(run.gpus)} GPU{'s' if len(run.gpus) != 1 else ''} ({run.in_flight} in flight each"
            + "".join(f", without {stage}" for stage in run.without)
            + (f", {run.beside['rate']:g} CUDA processes a second started beside it: {run.beside['started']} "
               f"started, {run.beside['failed']} failed" if run.beside else "") + "): "
            f"{run.graded} of {run.hand_ins} graded in {run.wall_seconds:.1f} s = {run.per_hour:,.0f} an hour, "
            f"{run.per_hour_per_gpu:,.0f} per GPU; a grading p50 {run.percentile(0.5):.1f} s, p95 "
            f"{run.percentile(0.95):.1f} s; CPUs busy {100 * load.get('cpu_busy', 0):.0f} % (saturated "
            f"{100 * load.get('cpu_saturated', 0):.0f} % of the time)" + (f"; {gpu_busy}" if gpu_busy else "")
            + (f"; the batch's own process {load['own_cores']:.2f} cores (over 90 % of one core "
               f"{100 * load.get('own_saturated', 0):.0f} % of the time)" if "own_cores" in load else ""))
        if run.steady:
            rate, first, last = run.steady
            lines.append(f"  between result {first} and result {last}, every slot busy: {rate:,.0f} an hour, "
                         f"{rate / max(1, len(run.gpus)):,.0f} per GPU")
        if run.scored_seconds:
            lines.append(f"  the counters read once every hand-in was graded: every score in "
                         f"{run.scored_seconds:.1f} s = {3600.0 * run.graded / run.scored_seconds:,.0f} an hour, "
                         f"the counters in the {run.wall_seconds - run.scored_seconds:.1f} s after")
        lines.append("  a grading's phases, mean seconds (they overlap): "
                     + ", ".join(f"{p} {s:.2f}" for p, s in run.phases.items()))
        if run.turn and run.graded:
            # What each hand-in cost its GPU, against how long its grading held that GPU's timing turn.
            t, cost = run.turn, run.cost
            lines.append(f"  the GPU's timing turn, mean a grading: held {t[TURN_HELD]:.2f} s of the {cost:.2f} s "
                         f"each hand-in cost its GPU (its timing runs starting {t[TIMING_RUNS_STARTING]:.2f}, "
                         f"waiting for the GPU alone {t[WAITING_FOR_GPU_ALONE]:.2f}, the GPU alone "
                         f"{t[TURN_ALONE]:.2f}); waiting for it {t[WAITING_FOR_TURN]:.2f} s")
        for problem in run.not_graded[:5]:
            lines.append(f"  not graded on a GPU: {problem}")
        for lost in run.short[:5]:
            lines.append(f"  points lost by a copy of the solutions: {lost}")
    ratio = ratio_to_one_gpu(runs)
    if ratio is not None:
        lines.append(f"{len(runs[1].gpus)} GPUs grade {ratio:.2f} x one GPU "
                     f"({ratio / len(runs[1].gpus):.2f} of one GPU's rate per GPU)")
    each = _cost_of_a_start(runs)
    if each is not None:
        lines.append(f"each CUDA process started beside the class cost it {1e3 * each:.0f} ms of its GPU (a hand-in "
                     f"{runs[0].cost:.2f} s alone, {runs[1].cost:.2f} s with "
                     f"{runs[1].beside['started'] / max(1, runs[1].graded):.1f} processes more each)")
    return "\n".join(lines)


def ratio_to_one_gpu(runs: list) -> Optional[float]:
    """The class on all GPUs (run_classes' second run) against one; None where there was no second GPU."""
    if len(runs) > 1 and len(runs[1].gpus) > 1 and runs[0].per_hour > 0:
        return runs[1].per_hour / runs[0].per_hour
    return None


def _cost_of_a_start(runs: list) -> Optional[float]:
    """cost_per_start of run_classes' two runs with --starts-beside; None for any other runs."""
    return cost_per_start(runs[0], runs[1]) if len(runs) > 1 and runs[1].beside else None


def summarize(runs: list) -> dict:
    found = {"runs": [r.to_dict() for r in runs]}
    ratio = ratio_to_one_gpu(runs)
    if ratio is not None:
        found["ratio_to_one_gpu"] = round(ratio, 3)
    if any(set(r.without) & set(LEFT_OUT) for r in runs):
        found["stage_costs"] = stage_costs(runs)
    each = _cost_of_a_start(runs)
    if each is not None:
        found["cost_per_start_s"] = round(each, 4)
    return found

