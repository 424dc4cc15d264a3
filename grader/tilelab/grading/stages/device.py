"""The GPU side of a grading, beside the build: the probe, the ceilings and the speed targets."""

from __future__ import annotations

import os
from concurrent.futures import Future
from pathlib import Path
from typing import Optional

from ...spec.assignment import Assignment
from ...spec.reference_gpu import ReferenceGpuError, load_reference_gpu
from .. import calibration, gpu_ceilings
from ..model import NO_DEVICE_NOTE, NO_TARGETS_NOTE
from ..options import GradeOptions

PROBE_WAIT_FOR_BUILD_S = 5.0  # the build waits this long for the GPU probe, then builds for every GPU


def _compute_capability(device_known: Future) -> Optional[str]:
    """The probed GPU's compute capability, for the build; None (build for
    every GPU the tree builds for) without a GPU, or if the probe is slow."""
    try:
        gpu = device_known.result(timeout=PROBE_WAIT_FOR_BUILD_S)
    except Exception:  # noqa: BLE001 - a probe that failed or is slow: grade() hears of it where it waits
        return None
    return gpu.get("compute_capability") if isinstance(gpu, dict) else None


def _gpu_and_targets(opt: "GradeOptions", assignment: Assignment, roofline_tool: Path, verify_tool: Path, notes: list,
                     staff_notes: list, timed, device_known: Future) -> tuple:
    """(ceilings, speed basis), each None where it could not be had (the
    notes say why): what the speed stage waits for. The device (None without
    a usable GPU), which every GPU stage waits for, goes to `device_known`
    as soon as it is known, before the ceilings and the calibration."""
    try:
        with timed("gpu probe"):
            gpu = _probe_device(roofline_tool, opt, notes)
    except BaseException as e:
        device_known.set_exception(e)
        raise
    device_known.set_result(gpu)
    if gpu is None:
        return None, None
    with timed("ceilings"):
        ceilings = _ceilings(roofline_tool, gpu, opt, notes)
    basis = None
    if ceilings is not None and opt.timing:
        with timed("calibration"):
            basis = _speed_basis(opt, assignment, gpu, ceilings, verify_tool, notes, staff_notes)
    return ceilings, basis


def _probe_device(tool: Path, opt: GradeOptions, notes: list) -> Optional[dict]:
    """The device facts, or None (with a note) without a usable GPU."""
    try:
        if opt.device_probe is not None and not opt.sandbox.extra_env:
            return opt.device_probe.result()
        return gpu_ceilings.device_info(tool, 60, _probe_env(opt))
    except gpu_ceilings.NoDevice:
        notes.append(NO_DEVICE_NOTE)
    except gpu_ceilings.RooflineError as e:
        notes.append(f"The GPU probe failed ({e}): the GPU stages did not run.")
    return None


def _ceilings(tool: Path, gpu: dict, opt: GradeOptions, notes: list):
    """The GPU's measured ceilings, or None (with a note) when they could not be had."""
    try:
        # Measured (once per GPU, then cached) with the GPU to itself.
        ceilings = None if opt.refresh_roofline else gpu_ceilings.cached_ceilings(gpu)
        if ceilings is None:
            with opt.gpu_lock.exclusive():
                ceilings = gpu_ceilings.get_ceilings(tool, refresh=opt.refresh_roofline, env=_probe_env(opt), device=gpu)
    except gpu_ceilings.RooflineError as e:
        notes.append(f"The GPU's ceilings could not be measured ({e}): speed was not measured.")
        return None
    return ceilings


def _probe_env(opt: GradeOptions) -> dict:
    """The probe asks about the GPU the sandboxed runs will use (Sandbox.extra_env)."""
    return {**os.environ, **opt.sandbox.extra_env}


def _speed_basis(opt: GradeOptions, assignment: Assignment, gpu: dict, ceilings, verify_tool: Path, notes: list,
                 staff_notes: list) -> Optional[calibration.Calibration]:
    """What the speed targets are fractions of: the reference solutions timed
    on this GPU (cached per GPU), or, in `check` on a machine without them (a
    student's), an estimate from the grading GPU's published figures. None,
    with a note, when there is neither: speed is then not scored."""
    if calibration.has_references(opt.build_dir, assignment):
        try:
            # The references are timed with the GPU to themselves, as a part is.
            basis = calibration.cached_calibration(opt.build_dir, assignment, gpu)
            if basis is None:
                with opt.gpu_lock.exclusive():
                    basis, _ = calibration.get_calibration(opt.build_dir, assignment, gpu, verify_tool, opt.sandbox)
        except calibration.CalibrationError as e:
            notes.append(NO_TARGETS_NOTE)
            staff_notes.append(f"Calibration failed: {e}")
            return None
        return basis
    if opt.mode == "check":
        try:
            return calibration.estimate(assignment, ceilings, gpu, load_reference_gpu(opt.root))
        except ReferenceGpuError as e:
            notes.append(f"Speed is not scored here: there are no reference solutions to time and no figures "
                         f"from the grading GPU to estimate from ({e}).")
            return None
    notes.append(NO_TARGETS_NOTE)
    staff_notes.append(f"{opt.build_dir} holds no reference solutions ({calibration.REFERENCE_DIR}/<part>): build "
                       "the checkout, or the autograder bundle with its references/")
    return None
