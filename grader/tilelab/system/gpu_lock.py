"""Sharing one GPU between gradings that run at the same time.

Correctness runs and sanitizers may share the GPU; a timing run may not:
another kernel on the GPU would slow it down and make the speed score
depend on what else was graded. Timing takes the GPU exclusively and waits
until nothing else runs; while it waits, no new shared user starts, so a
stream of short runs cannot keep it waiting for ever.

A timing run prepares while the GPU is shared and waits at its gate for the
GPU alone (grading/gpu_turn.py): its launcher's process, which runs student
code, is alive from before the exclusive lock is taken. So the GPU's timing
turn is a lock of its own, taken before both: while one grading prepares,
waits and times, no other grading's timing run is alive, and nothing else
takes the GPU exclusively (exclusive() takes the turn first).

A grading's cases and sanitizers are the long runs on the shared GPU, and
a timing run waits for those beside it to end before it is alone. Where
the turn is given back while another grading of this process waits for it,
it is handed on: no other grading's cases and sanitizers start until that
grading gives it back in turn, so its timing runs prepare and are timed
without waiting for runs that began meanwhile. At most HANDOFFS_IN_A_ROW
turns pass so in a row; then the cases and sanitizers that wait go first.

What starts CUDA on the GPU, or makes or ends a context there, shares it
too: the GPU probe (grading/stages/device.py) and the trusted harness's
services (grading/trusted_harness.py). Such work beside a timed part
leaves a plain kernel's time as it is but slows a launcher that calls the
driver in its timed calls (one that maps memory in each call; measured:
docs/measurements.md, "Contexts beside a timed part").

A lock named after its GPU holds across processes too: every `tilelab
worker` and `tilelab batch` on a host that grades on that GPU takes it, so
two workers on one GPU never time side by side; a command that grades or
measures without naming its GPU (`tilelab grade`, `check`, `calibrate`)
takes the lock of the GPU its CUDA sees first (visible_gpu_lock), the name
a batch or a worker on that GPU gives it. A GPU named by its UUID (`tilelab
worker --gpu GPU-...`) takes the lock of its index as `nvidia-smi -L` lists
it (lock_name), so that a grading on "GPU 0" and a worker given GPU 0's UUID
take one lock. Across processes it is a
pair of lock files (flock) in paths.LOCK_DIR: the GPU's, shared or
exclusive, and a turnstile that a timing run holds while it waits, so that
no new shared user of another process starts meanwhile either; a third is
the timing turn.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Optional

from .paths import LOCK_DIR, open_lock_file


# How many timing turns in a row may be handed on while other gradings' cases wait (the module's doc).
HANDOFFS_IN_A_ROW = 3


class GpuLock:
    """`gpu`: the GPU as CUDA_VISIBLE_DEVICES names it, to share the lock with
    the other processes on this host that grade on it (lock_name); None: this process only."""

    def __init__(self, gpu: Optional[str] = None, lock_dir: Path = LOCK_DIR) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        self._turn = threading.RLock()  # the thread that takes the turn may then take exclusive()
        self._turns = 0  # how deep the holder of _turn is in turn()
        self._turn_wanted = 0  # threads of this process waiting for the turn
        self._turn_owner: object = None  # whose turn it is (turn(owner)), while it is held
        self._handoffs = 0  # turns handed on in a row; while > 0, other gradings' cases wait
        self._host = _HostLock(lock_name(gpu), lock_dir) if gpu is not None else None

    @contextmanager
    def turn(self, owner: object = None):
        """The GPU's timing turn, one holder at a time on this host. Take it
        before starting runs that will wait for the GPU alone, and hold it
        until they are over; exclusive() takes it too. `owner`: the grading
        whose turn it is, whose own cases may start while it holds a turn
        handed on to it (shared(cases_of))."""
        with self._cond:
            self._turn_wanted += 1
        try:
            self._turn.acquire()
        finally:
            with self._cond:
                self._turn_wanted -= 1
        try:
            self._turns += 1
            try:
                # Inside the try: where the host's turn cannot be taken, the count and the owner are undone too.
                if self._turns == 1:
                    with self._cond:
                        self._turn_owner = owner
                        self._cond.notify_all()
                    if self._host:
                        self._host.take_turn()
                yield
            finally:
                if self._turns == 1:
                    if self._host:
                        self._host.give_turn()
                    self._hand_on()
                self._turns -= 1
        finally:
            self._turn.release()

    def _hand_on(self) -> None:
        """As the turn is given back: handed on where a thread waits for it
        and fewer than HANDOFFS_IN_A_ROW were handed on before this one."""
        with self._cond:
            self._turn_owner = None
            handed_on = self._turn_wanted and self._handoffs < HANDOFFS_IN_A_ROW
            self._handoffs = self._handoffs + 1 if handed_on else 0
            self._cond.notify_all()

    @contextmanager
    def shared(self, cases_of: object = None):
        """The GPU shared with other runs. `cases_of`: the grading whose
        cases and sanitizers these runs are; they do not start while the
        turn is handed on to another grading (the module's doc)."""
        with self._cond:
            while (self._exclusive or self._waiting_exclusive
                   or (cases_of is not None and self._handoffs and self._turn_owner is not cases_of)):
                self._cond.wait()
            self._sharing += 1
        try:
            if self._host:
                self._host.share()
            yield
        finally:
            if self._host:
                self._host.unshare()
            with self._cond:
                self._sharing -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        with self.turn(), self._exclusive_only():
            yield

    @contextmanager
    def _exclusive_only(self):
        with self._cond:
            self._waiting_exclusive += 1
            while self._exclusive or self._sharing:
                self._cond.wait()
            self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            if self._host:
                self._host.take()
            yield
        finally:
            if self._host:
                self._host.give_back()
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def lock_name(gpu: str, listing: Optional[str] = None) -> str:
    """The name of `gpu`'s host-wide lock: a whole GPU's index as `nvidia-smi
    -L` lists it (listed_gpus; asked for only where `gpu` is a UUID or its
    first characters), else `gpu` as it is: an index already, a MIG instance,
    or a name nvidia-smi does not list. CUDA numbers the GPUs as nvidia-smi
    does where CUDA_DEVICE_ORDER is PCI_BUS_ID, and on a host whose GPUs are
    all of one model."""
    name = gpu.strip()
    if not name.upper().startswith("GPU-"):
        return name
    found = [index for index, uuid in listed_gpus(listing) if uuid.lower().startswith(name.lower())]
    return found[0] if len(found) == 1 else name


def listed_gpus(listing: Optional[str] = None) -> list:
    """The whole GPUs `nvidia-smi -L` lists (`listing`: its output, else it is
    asked now), as (index, UUID) in its order; MIG instances, listed indented
    under their GPU, are not among them. [] without a GPU or a driver."""
    if listing is None:
        try:
            done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return []
        if done.returncode != 0:
            return []
        listing = done.stdout
    return [(m.group(1), m.group(2) or "")
            for m in re.finditer(r"^GPU (\d+):[^\n]*?(?:\(UUID: (GPU-[0-9A-Fa-f-]+)\))?$", listing, re.M)]


def visible_gpu() -> str:
    """The GPU this process's CUDA uses first, as CUDA_VISIBLE_DEVICES names it
    (GPU 0 where it names none): what a batch or a worker on it is given."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"


def visible_gpu_lock() -> GpuLock:
    """The host-wide lock of the GPU this process's CUDA uses first."""
    return GpuLock(visible_gpu())


class _HostLock:
    """This process's hold on a GPU's lock files: the first of its threads to
    share takes the shared lock, the last to stop gives it back. Where the
    files cannot be opened (a user without access to LOCK_DIR), the lock is
    this process's alone."""

    def __init__(self, gpu: str, lock_dir: Path) -> None:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", gpu)[:100] or "gpu"
        self._gate = threading.Lock()  # one flock change at a time in this process
        self._holders = 0
        try:
            self._gpu: Optional[IO] = open_lock_file(lock_dir / f"gpu-{name}.lock")
            self._turnstile: Optional[IO] = open_lock_file(lock_dir / f"gpu-{name}.turnstile")
            self._timing: Optional[IO] = open_lock_file(lock_dir / f"gpu-{name}.timing")
        except OSError:
            self._gpu = self._turnstile = self._timing = None

    def share(self) -> None:
        with self._gate:
            if self._holders == 0 and self._gpu is not None:
                fcntl.flock(self._turnstile, fcntl.LOCK_EX)  # behind any timing run that waits
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
                fcntl.flock(self._gpu, fcntl.LOCK_SH)
            self._holders += 1

    def unshare(self) -> None:
        with self._gate:
            self._holders -= 1
            if self._holders == 0 and self._gpu is not None:
                fcntl.flock(self._gpu, fcntl.LOCK_UN)

    def take_turn(self) -> None:
        if self._timing is not None:
            fcntl.flock(self._timing, fcntl.LOCK_EX)

    def give_turn(self) -> None:
        if self._timing is not None:
            fcntl.flock(self._timing, fcntl.LOCK_UN)

    def take(self) -> None:
        if self._gpu is not None:
            fcntl.flock(self._turnstile, fcntl.LOCK_EX)
            fcntl.flock(self._gpu, fcntl.LOCK_EX)

    def give_back(self) -> None:
        if self._gpu is not None:
            fcntl.flock(self._gpu, fcntl.LOCK_UN)
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
