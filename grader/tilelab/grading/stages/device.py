"""The GPU side of a grading, found beside the static checks and the build:
the device (every GPU stage waits for it), then the measured ceilings and
the speed targets (only the speed stage waits for those)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Optional

from ...spec.reference_gpu import ReferenceGpuError, load_reference_gpu
from .. import calibration, gpu_ceilings
from ..remembered_capability import recall_capability, remember_capability
from ..context import Grading
from ..model import NO_DEVICE_NOTE, NO_TARGETS_NOTE

PROBE_WAIT_FOR_BUILD_S = 5.0  # the build waits this long for the GPU probe, then builds for every GPU
# The compute capability that the last probe in this process found, by the sandbox's GPU: the build takes
# it while this grading's probe waits for the GPU to be shared (a GPU's capability does not change). A new
# process takes the one a probe found last on this host (remembered_capability.py).
_probed_capability: dict = {}


class GpuSide:
    """Started at once in a thread of its own; each answer is waited for where it is needed."""

    def __init__(self, g: Grading) -> None:
        self._g = g
        self._gpu_key = tuple(sorted(g.sandbox.extra_env.items()))
        self._device: Future = Future()
        self._targets: Future = Future()
        threading.Thread(target=self._find, name="tilelab-gpu-side", daemon=True).start()

    def capability(self) -> Optional[str]:
        """The probed GPU's compute capability, for the build; None (build for
        every GPU the tree builds for) without a GPU, or if the probe is slow.
        Where a probe of this GPU found it before, that is taken at once: the
        build need not wait for this grading's probe (the pipeline builds
        again in the rare case the two differ)."""
        known = self._known()
        try:
            gpu = self._device.result(timeout=0 if known else PROBE_WAIT_FOR_BUILD_S)
        except Exception:  # noqa: BLE001 - a probe that failed or is slow: device() raises it where it is waited for
            return known
        return gpu.get("compute_capability") if isinstance(gpu, dict) else None

    def seen_before(self) -> bool:
        """Whether a probe found this GPU before, on this host: runs may begin
        before this grading's own probe is over (early_runs.py)."""
        return bool(self._known())

    def _known(self) -> Optional[str]:
        """The capability a probe of this GPU found before, in this process or remembered on this host."""
        return _probed_capability.get(self._gpu_key) or recall_capability(self._gpu_key)

    def device(self) -> Optional[dict]:
        """The device's facts, None without a usable GPU (a note says why)."""
        return self._device.result()

    def targets(self) -> tuple:
        """(ceilings, speed basis), each None where it could not be had (the notes say why)."""
        return self._targets.result()

    def _find(self) -> None:
        try:
            gpu = self._probe()
            if isinstance(gpu, dict) and isinstance(gpu.get("compute_capability"), str):
                _probed_capability[self._gpu_key] = gpu["compute_capability"]
                remember_capability(self._gpu_key, gpu["compute_capability"])
            self._device.set_result(gpu)
        except BaseException as e:  # noqa: BLE001 - raised again in the thread that waits for it
            self._device.set_exception(e)
            self._targets.set_exception(e)
            return
        try:
            self._targets.set_result(self._ceilings_and_basis())
        except BaseException as e:  # noqa: BLE001 - as above
            self._targets.set_exception(e)

    def _probe(self) -> Optional[dict]:
        # Even without a context, starting CUDA beside a timed part slows a launcher that calls the driver in
        # its timed calls (system/gpu_lock.py): the probe shares the GPU.
        with self._g.held(self._g.gpu_lock.shared(), "waiting to share the GPU"), self._g.timed("gpu probe"):
            return probe_device(self._g)

    def _ceilings_and_basis(self) -> tuple:
        g, gpu = self._g, self._device.result()
        if gpu is None:
            return None, None
        with g.timed("ceilings"):
            ceilings = measured_ceilings(g, gpu)
        basis = None
        if ceilings is not None and g.options.timing:
            with g.timed("calibration"):
                basis = speed_basis(g, gpu, ceilings)
        return ceilings, basis


def probe_device(g: Grading) -> Optional[dict]:
    """The device facts, or None (with a note) without a usable GPU."""
    try:
        return gpu_ceilings.device_info(g.tools.probe, 60, g.sandbox.gpu_env)  # None: a probe started early may answer
    except gpu_ceilings.NoDevice:
        g.notes.append(NO_DEVICE_NOTE)
    except gpu_ceilings.RooflineError as e:
        g.notes.append(f"The GPU probe failed ({e}): the GPU stages did not run.")
    return None


def measured_ceilings(g: Grading, gpu: dict):
    """The GPU's measured ceilings, or None (with a note) when they could not be had."""
    try:
        # Measured once per GPU, with the GPU to itself, then cached.
        ceilings = gpu_ceilings.get_ceilings(g.tools.probe, env=g.sandbox.gpu_env, device=gpu, gpu_lock=g.gpu_lock)
    except gpu_ceilings.RooflineError as e:
        g.notes.append(f"The GPU's ceilings could not be measured ({e}): speed was not measured.")
        return None
    return ceilings


def speed_basis(g: Grading, gpu: dict, ceilings) -> Optional[calibration.Calibration]:
    """What the speed targets are fractions of: the reference solutions timed
    on this GPU (cached per GPU), or, in `check` on a machine without them (a
    student's), an estimate from the grading GPU's published figures. None,
    with a note, when there is neither: speed is then not scored."""
    opt, assignment = g.options, g.assignment
    if calibration.has_references(opt.build_dir, assignment):
        try:
            # The references are timed with the GPU to themselves, as a part is.
            basis, _ = calibration.get_calibration(opt.build_dir, assignment, gpu, g.tools.verify, g.sandbox,
                                                   gpu_lock=g.gpu_lock)
        except calibration.CalibrationError as e:
            g.notes.append(NO_TARGETS_NOTE)
            g.staff_notes.append(f"Calibration failed: {e}")
            return None
        return basis
    if opt.mode == "check":
        try:
            return calibration.estimate(assignment, ceilings, gpu, load_reference_gpu(opt.root), opt.build_dir)
        except ReferenceGpuError as e:
            g.notes.append(f"Speed is not scored here: there are no reference solutions to time and no figures "
                           f"from the grading GPU to estimate from ({e}).")
            return None
    g.notes.append(NO_TARGETS_NOTE)
    g.staff_notes.append(f"{opt.build_dir} holds no reference solutions ({calibration.REFERENCE_DIR}/<part>): build "
                         "the checkout, or the autograder bundle with its references/")
    return None
