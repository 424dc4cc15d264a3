"""Whether a worker's environment can grade: what a worker checks before it
takes jobs, again after a grading that the grader itself failed, and every
RETRY_S while it is unhealthy.

A fault found here is the worker's, never a hand-in's: the worker puts the
job it held back in the queue, says it is unhealthy and why (tilelab_workers,
the dashboard, /api/v1/health), takes no job until a later check passes, and
another worker grades the job meanwhile. A grading that failed while this
check passes was the hand-in's doing, and is recorded as its outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ...errors import TilelabError
from ...grading.context import sandbox_problem
from ...grading.options import GradeOptions
from ...spec.assignment import Assignment
from ...system.gpu_lock import GpuLock
from ...system.paths import tool_path, unbuilt_reason
from ...system.sandbox import sandbox_for_this_process

RETRY_S = 60.0  # an unhealthy worker checks again this often


class EnvironmentFault(TilelabError):
    """The worker cannot grade here: the job goes back to the queue (the task's retry)."""


@dataclass
class Health:
    problem: Optional[str] = None  # None: the worker can grade
    facts: dict = field(default_factory=dict)  # gpu_name, gpu_uuid, calibration (with a GPU)


def check(root: Path, build_dir: Path, assignment: Assignment, gpu: Optional[str], scratch: Path) -> Health:
    """The worker's environment, checked as a grading would use it: the built
    tools, the sandbox (its user, and that it can read none of the course's
    secrets), and with a GPU: the GPU itself, its ceilings and its
    calibration (measured now, or read from the cache)."""
    unbuilt = unbuilt_reason(build_dir)
    if unbuilt:
        return Health(f"{unbuilt}: build the worker's tree again")
    try:
        sandbox = sandbox_for_this_process()
        problem = sandbox_problem(GradeOptions.for_tree(root, build_dir, scratch / "health"), sandbox)
    except TilelabError as e:
        problem = str(e)
    if problem:
        return Health(f"the sandbox cannot be used: {problem}")
    return Health() if gpu is None else _gpu_health(build_dir, assignment, GpuLock(gpu))


def _gpu_health(build_dir: Path, assignment: Assignment, gpu_lock: GpuLock) -> Health:
    """The GPU, and its ceilings and calibration: measured, where this GPU has none kept, with the GPU to
    themselves (holding `gpu_lock`), so that workers starting together on one GPU, or one starting
    beside another's gradings, do not time them side by side and keep what they timed."""
    from ...grading import calibration, gpu_ceilings

    tool = tool_path(build_dir, gpu_ceilings.TOOL_NAME)
    try:
        device = gpu_ceilings.device_info(tool)
        ceilings = gpu_ceilings.get_ceilings(tool, device=device, gpu_lock=gpu_lock)
    except gpu_ceilings.RooflineError as e:
        return Health(f"its GPU cannot be used: {e}")
    facts = {"gpu_name": device.get("name"), "gpu_uuid": device.get("uuid")}
    if calibration.has_references(build_dir, assignment):
        try:
            basis, _ = calibration.get_calibration(build_dir, assignment, device,
                                                   tool_path(build_dir, "tilelab-verify"), gpu_lock=gpu_lock)
        except calibration.CalibrationError as e:
            return Health(f"its GPU could not be calibrated: {e}", facts)
        facts["calibration"] = basis.summary(assignment, ceilings).get("fingerprint")
    return Health(None, facts)


def grader_failed(outcome, gpu: Optional[str]) -> bool:
    """Whether a grading shows a fault of the grader rather than of the hand-in,
    so that the environment must be checked before it is recorded: the grader
    failed, a stage says "grader error", or the worker's GPU was not seen."""
    result = outcome.result
    if result is None:
        return True
    if gpu is not None and result.parts and not result.gpu:
        return True
    return any(stage.status == "error" for part in result.parts for stage in part.stages.values())
