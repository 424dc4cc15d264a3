"""`scripts/bench-service` (`python -m bench.service_bench`): a deadline
through the grading service's whole path, as a course runs it on one host:
`tilelab serve` with its embedded PostgreSQL, a `tilelab worker` per GPU,
and N complete, distinct hand-ins (handins.py) submitted over HTTP in mode
grade, all at once or at a set rate. It prints hand-ins an hour, per GPU,
submit-to-result p50 and p95, and, with --compare, the same on one GPU
first and the ratio of all GPUs to it. With --for it stops that many seconds
after the first submission, submitted or not, graded or not, and counts what
was still waiting. A benchmark: it asserts no time.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import click

from tilelab.grading.answers_file import ANSWERS_FILE
from tilelab.operations.batch import find_gpus, parse_gpus
from tilelab.operations.service.client import FINISHED
from tilelab.operations.service.forward import hand_in_files
from tilelab.spec.assignment import load_assignment
from tilelab.system.atomic import write_atomically

from .class_bench import percentile
from .handins import distinct_hand_ins
from .local_service import LocalService
from .machine_load import MachineLoad
from .tree import built_tree, tree_options

POLL_S = 1.0


def run_deadline(root: Path, build: Path, out: Path, count: int, gpus: list, in_flight: Optional[int],
                 rate_per_min: Optional[float], log, counters: str = "inline",
                 limit_s: Optional[float] = None) -> dict:
    """One service on `gpus`, `count` hand-ins submitted; what it took.
    `counters`: the workers' (tilelab worker --counters); "later" waits
    for the counters after the last result too. `limit_s`: stop submitting
    and waiting that long after the first submission (and say how many
    counters were still to come instead of waiting for them)."""
    names = [p.file for p in load_assignment(root / "assignment.yaml").parts] + [ANSWERS_FILE]
    folders = distinct_hand_ins(root, count, out / f"class-{len(gpus)}gpu", f"service-{time.time_ns()}")
    logs = out / f"logs-{len(gpus)}gpu"
    logs.mkdir(parents=True, exist_ok=True)
    service = LocalService(root, build, Path(tempfile.mkdtemp(prefix="tilelab-bench-service-")), logs)
    try:
        service.start()
        course = service.token("course")
        for gpu in gpus:
            service.add_worker(f"gpu{gpu}", gpu, in_flight, counters=counters)
        workers = service.wait_ready([f"gpu{g}" for g in gpus])
        log(f"bench-service: {len(workers)} worker(s) ready; submitting {count} hand-ins "
            + (f"at {rate_per_min:g} a minute" if rate_per_min else "all at once"))
        sent, started = {}, time.monotonic()
        ends = started + (limit_s if limit_s else 3 * 3600)
        with MachineLoad() as load:
            for i, folder in enumerate(folders):
                if rate_per_min:
                    time.sleep(max(0.0, min(ends, started + i * 60.0 / rate_per_min) - time.monotonic()))
                if time.monotonic() >= ends:
                    break
                found = service.submit(course, hand_in_files(folder, names), mode="grade", student=folder.name)
                sent[found["id"]] = time.monotonic()
            finished = wait_all(service, course, sent, ends - time.monotonic())
            counters_s = wait_counters(service) - started if counters == "later" and not limit_s else None
            stopped = time.monotonic()
        scores, short = service.scores(), service.short()
        # A bounded run does not wait for the counters left for later: it says how many were still to come.
        counters_left = service.counters_to_come() if counters == "later" and limit_s else None
    finally:
        service.stop()
    turns = sorted(f.turnaround_s for f in finished.values() if f.state == "done")
    waiting = sorted(stopped - at for sid, at in sent.items() if sid not in finished)
    # With hand-ins still waiting, the rate is what was graded in the whole time measured.
    wall = (stopped if waiting else max((f.seen for f in finished.values()), default=started)) - started
    per_hour = 3600.0 * len(turns) / wall if wall > 0 else 0.0
    return {"gpus": gpus, "hand_ins": count, "submitted": len(sent), "graded": len(turns), "wall_s": round(wall, 1),
            "per_hour": round(per_hour, 1), "per_hour_per_gpu": round(per_hour / max(1, len(gpus)), 1),
            "p50_s": round(percentile(turns, 0.5), 1), "p95_s": round(percentile(turns, 0.95), 1),
            # Those still waiting when the time was up count with their wait so far: a lower bound.
            "still_waiting": len(waiting), "longest_wait_s": round(waiting[-1], 1) if waiting else None,
            "p95_all_at_least_s": round(percentile(sorted(turns + waiting), 0.95), 1) if waiting else None,
            "not_done": sorted({f.state for f in finished.values() if f.state != "done"}), "scores": scores,
            "short": short,
            "rate_per_min": rate_per_min, "load": load.figures(), "counters": counters,
            "counters_read_s": round(counters_s, 1) if counters_s is not None else None,
            "counters_still_to_come": counters_left}


def wait_counters(service: LocalService, seconds: float = 3600) -> float:
    """When no recorded grading had counters still to come (time.monotonic())."""
    deadline = time.monotonic() + seconds
    while service.counters_to_come() and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return time.monotonic()


@dataclass(frozen=True)
class Finished:
    state: str
    seen: float  # time.monotonic() when the poll saw it finished
    turnaround_s: float  # submit to result, by the service's own clock (its created_at and finished_at)


def wait_all(service: LocalService, token: str, sent: dict, seconds: float) -> dict:
    """submission -> Finished, polling each in turn. The turnaround is the
    service's, not the poll's: at a set rate the polls start only once the
    last hand-in is sent, long after the first ones finished."""
    finished, deadline = {}, time.monotonic() + seconds
    while len(finished) < len(sent) and time.monotonic() < deadline:
        for sid in sent:
            if sid in finished:
                continue
            found = service.call_json("GET", f"/api/v1/submissions/{sid}", token)[1]
            if found.get("state") in FINISHED:
                finished[sid] = Finished(found["state"], time.monotonic(), _seconds_between(found))
        time.sleep(POLL_S)
    return finished


def _seconds_between(submission: dict) -> float:
    created, done = submission.get("created_at"), submission.get("finished_at")
    if not created or not done:
        return 0.0
    return (dt.datetime.fromisoformat(done) - dt.datetime.fromisoformat(created)).total_seconds()


def describe(run: dict) -> str:
    gpu_busy = ", ".join(f"GPU {i} {100 * b:.0f} %" for i, b in sorted(run["load"].get("gpu_busy", {}).items()))
    waiting = (f"; after {run['wall_s']:.0f} s, {run['still_waiting']} of {run['submitted']} submitted still waited "
               f"(the longest {run['longest_wait_s']:.0f} s): submit to result p95, counting them, at least "
               f"{run['p95_all_at_least_s']:.0f} s" if run.get("still_waiting") else "")
    return (f"{len(run['gpus'])} GPU(s): {run['graded']} of {run['hand_ins']} graded in {run['wall_s']:.0f} s = "
            f"{run['per_hour']:,.0f} an hour, {run['per_hour_per_gpu']:,.0f} per GPU; submit to result p50 "
            f"{run['p50_s']:.0f} s, p95 {run['p95_s']:.0f} s; CPUs busy {100 * run['load'].get('cpu_busy', 0):.0f} %"
            + (f"; {gpu_busy}" if gpu_busy else "") + (f"; not done: {run['not_done']}" if run["not_done"] else "") + waiting
            + (f"; scores: {', '.join(f'{n} x {s}' for s, n in run['scores'].items())}" if run.get("scores") else "")
            + (f"; the counters left for later all read {run['counters_read_s']:.0f} s after the first submission"
               if run.get("counters_read_s") is not None else "")
            + (f"; {run['counters_still_to_come']} gradings' counters left for later were still to be read"
               if run.get("counters_still_to_come") else ""))


@click.command()
@tree_options("bench-service", "the hand-ins, logs and service-bench.json")
@click.option("--hand-ins", "count", type=click.IntRange(min=1), default=12, show_default=True,
              help="Hand-ins per GPU.")
@click.option("--rate", "rate_per_min", type=click.FloatRange(min=0.1), default=None,
              help="Hand-ins a minute per GPU (default: all at once).")
@click.option("--gpus", default=None, help="GPUs, one worker each, as for `tilelab batch` (default: all).")
@click.option("--in-flight", type=click.IntRange(min=1), default=None, help="Per worker [default: 3].")
@click.option("--compare", is_flag=True, help="First the same on one GPU, and the ratio of all GPUs to it.")
@click.option("--counters", type=click.Choice(["inline", "later"]), default="inline", show_default=True,
              help="The workers' --counters: with later, also when the last counters were read.")
@click.option("--for", "limit_s", type=click.FloatRange(min=1), default=None,
              help="Stop this many seconds after the first submission; count what is still waiting then.")
def main(root: Optional[str], build_dir: Optional[str], out_dir: Optional[str], count: int,
         rate_per_min: Optional[float], gpus: Optional[str], in_flight: Optional[int], compare: bool,
         counters: str, limit_s: Optional[float]) -> None:
    root_path, build, out = built_tree(root, build_dir, out_dir, "bench-service")
    chosen = parse_gpus(gpus) if gpus is not None else (find_gpus() or [None])
    log = lambda m: click.echo(m, err=True)  # noqa: E731
    runs = []
    if compare and len(chosen) > 1:
        runs.append(run_deadline(root_path, build, out, count, chosen[:1], in_flight, rate_per_min, log, counters,
                                 limit_s))
    runs.append(run_deadline(root_path, build, out, count * len(chosen), chosen, in_flight,
                             rate_per_min * len(chosen) if rate_per_min else None, log, counters, limit_s))
    found = {"runs": runs}
    if len(runs) > 1 and runs[0]["per_hour"] > 0:
        found["ratio_to_one_gpu"] = round(runs[1]["per_hour"] / runs[0]["per_hour"], 3)
    write_atomically(out / "service-bench.json", json.dumps(found, indent=2) + "\n")
    click.echo(f"wrote {out / 'service-bench.json'}")
    for run in runs:
        click.echo(describe(run))
        for lost in run["short"][:5]:
            click.echo(f"  points lost by a copy of the solutions: {lost}")
    if "ratio_to_one_gpu" in found:
        click.echo(f"{len(runs[1]['gpus'])} GPUs grade {found['ratio_to_one_gpu']:.2f} x one GPU")


if __name__ == "__main__":
    main()
