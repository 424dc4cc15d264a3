"""`python -m bench.service_check`: the grading service on this GPU host, as
the GPU suite checks it (scripts/gpu-suite):

0. the workers start together on one GPU with no figures kept (a cache of
   their own): they measure its ceilings and time the references in turn,
   and what they keep is within 10 % of what the GPU suite measured alone;
1. `tilelab check --remote naive` of the naive solution against a worker on
   a GPU: the table a student without a GPU sees, and the grading's
   grade.json (what a client reads back whole);
2. two workers on this host, each grading a fork bomb beside complete,
   correct hand-ins (the solutions): the correct ones keep their full points;
3. the sandbox users' processes left on the host afterwards: none.

Exit status 0 when all of them hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import click

from tilelab.operations.batch import find_gpus
from tilelab.operations.service.forward import hand_in_files
from tilelab.spec.assignment import load_assignment

from .local_service import LocalService, sandbox_processes_left


@click.command()
@click.option("--root", type=click.Path(file_okay=False), required=True)
@click.option("--build", "build_dir", type=click.Path(file_okay=False), required=True)
@click.option("--logs", "log_dir", type=click.Path(file_okay=False), required=True,
              help="Where the processes' logs and the remote check's grade.json go.")
@click.option("--no-gpu", is_flag=True, help="Workers without a GPU: a trial of the steps on a machine without one "
                                             "(the remote check then shows no counters, and fails).")
def main(root: str, build_dir: str, log_dir: str, no_gpu: bool) -> None:
    root_path, build, logs = Path(root).resolve(), Path(build_dir).resolve(), Path(log_dir).resolve()
    logs.mkdir(parents=True, exist_ok=True)
    gpus = [None] if no_gpu else (find_gpus() or ["0"])
    # Two workers on this host whatever its GPUs: a second on the first GPU where there is one GPU.
    placed = ([(f"gpu{g}", g) for g in gpus] if len(gpus) > 1
              else [(f"{'cpu' if gpus[0] is None else 'gpu' + gpus[0]}-{i}", gpus[0]) for i in "ab"])
    service = LocalService(root_path, build, Path(tempfile.mkdtemp(prefix="tilelab-service-")), logs)
    ok = True
    measured_alone = os.environ.get("TILELAB_CACHE_DIR")  # the suite's figures, where it ran before
    os.environ["TILELAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilelab-service-cache-")  # for every process below
    try:
        service.start()
        student, course = service.token("student", "alice"), service.token("course")
        for name, gpu in placed:
            service.add_worker(name, gpu)
        started = time.monotonic()
        workers = service.wait_ready([name for name, _ in placed])
        print(f"workers ready in {time.monotonic() - started:.1f} s: "
              + ", ".join(f"{n} on {w.get('gpu_name')}" for n, w in workers.items()))
        if not no_gpu:
            ok &= kept_as_measured_alone(Path(os.environ["TILELAB_CACHE_DIR"]), measured_alone)
        ok &= remote_check(service, student, root_path, logs)
        ok &= fork_bombs_beside_correct_hand_ins(service, course, root_path, logs)
    finally:
        service.stop()
    left = sandbox_processes_left()
    print(f"sandbox processes left on the host: {len(left)}")
    for line in left[:10]:
        print(f"  {line}")
    sys.exit(0 if ok and not left else 1)


def kept_as_measured_alone(cache: Path, alone: Optional[str]) -> bool:
    """What the workers kept in `cache` of each GPU (its FP32 peak and each
    reference), against the figures in `alone` (a cache the GPU suite measured
    with the GPU to itself), where there are any: within 10 % each. False
    where they kept nothing."""
    from tilelab.grading import calibration, gpu_ceilings

    prefix = f"{calibration.CACHE_KIND}-"
    uuids = {p.name[len(prefix):-len(".json")] for p in cache.glob(f"{prefix}*.json")}
    if not uuids:
        print(f"the workers kept no calibration in {cache}")
        return False

    def kept(cache: str, uuid: str) -> dict:
        os.environ["TILELAB_CACHE_DIR"], before = cache, os.environ["TILELAB_CACHE_DIR"]
        try:
            ceilings, basis = gpu_ceilings.load_cached(uuid), calibration.load_cached(uuid)
        finally:
            os.environ["TILELAB_CACHE_DIR"] = before
        figures = {"FP32 peak": ceilings.fp32_gflops} if ceilings else {}
        figures.update({f"{s.part} {s.case}": s.gflops for s in (basis.speeds if basis else ())})
        return figures

    ok = True
    for uuid in sorted(uuids):
        theirs, suite = kept(str(cache), uuid), kept(alone, uuid) if alone else {}
        far = [f"{name} {value:,.0f} against {suite[name]:,.0f}" for name, value in theirs.items()
               if name in suite and abs(value - suite[name]) > 0.1 * suite[name]]
        print(f"GPU {uuid}: the workers kept {len(theirs)} figures (FP32 peak "
              f"{theirs.get('FP32 peak', 0):,.0f} GFLOP/s)"
              + (f"; {len(suite)} measured alone by the suite, " + (f"{len(far)} of them more than 10 % away: "
                 + "; ".join(far) if far else "all within 10 %") if suite else ""))
        ok &= bool(theirs) and not far
    return ok


def remote_check(service: LocalService, token: str, root: Path, logs: Path) -> bool:
    out = logs / "remote-check"
    env = {**os.environ, "TILELAB_SERVICE_URL": service.url, "TILELAB_SERVICE_TOKEN": token, "COLUMNS": "120"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tilelab.cli", "--root", str(root), "check", "--remote", "naive",
                           "--dir", str(root / "solutions"), "--out", str(out)], capture_output=True, text=True,
                          env=env)
    took = time.monotonic() - started
    print(f"\n== tilelab check --remote naive (the naive solution, on a GPU worker): exit {done.returncode} in "
          f"{took:.1f} s")
    print(done.stdout.rstrip())
    if done.returncode != 0:
        print(done.stderr.rstrip()[-2000:])
    graded = out / "grade.json"
    if graded.exists():
        (logs / "remote-check-grade.json").write_bytes(graded.read_bytes())
    return done.returncode == 0 and "Traceback" not in done.stderr and "What one call moved" in done.stdout


def fork_bombs_beside_correct_hand_ins(service: LocalService, token: str, root: Path, logs: Path) -> bool:
    """Each hand-in's grade.json is kept in `logs` as STUDENT-grade.json: where a correct one loses
    points, its stages say why."""
    assignment = load_assignment(root / "assignment.yaml")
    names = [p.file for p in assignment.parts] + ["answers.yaml"]
    bomb = hand_in_files(root / "tests" / "submissions" / "security-fork-bomb", names)
    solutions = hand_in_files(root / "solutions", names)
    sent = {}
    for i in (1, 2):
        sent[f"bomb-{i}"] = service.submit(token, bomb, mode="grade", student=f"bomb-{i}")["id"]
        # Distinct hand-ins, so that no cache serves one from another.
        distinct = {n: c + (f"\n// hand-in {i}\n".encode() if n.endswith(".cu") else b"") for n, c in solutions.items()}
        sent[f"correct-{i}"] = service.submit(token, distinct, mode="grade", student=f"correct-{i}")["id"]
    print("\n== two workers, each with a fork bomb beside correct hand-ins (the solutions, one comment apart)")
    ok = True
    for student, sid in sent.items():
        state = service.wait(token, sid)
        if state["state"] != "done":
            print(f"{student}: {state['state']} {state.get('message', '')}")
            ok = False
            continue
        body = service.call("GET", f"/api/v1/submissions/{sid}/grade.json", token)[1]
        (logs / f"{student}-grade.json").write_bytes(body)
        graded = json.loads(body)
        parts = ", ".join(f"{p['id']} {p['score']:g}/{p['max_score']:g}" for p in graded["parts"])
        print(f"{student}: {graded['score']:g} / {graded['max_score']:g} in {graded['seconds']:.1f} s: {parts}")
        if student.startswith("correct"):
            lost = [p["id"] for p in graded["parts"] if p["correctness_score"] < p["correctness_max"]
                    or p["speed_score"] < p["speed_max"]]
            if lost:
                print(f"  {student} lost points in {', '.join(lost)}")
                ok = False
    return ok


if __name__ == "__main__":
    main()
