"""How busy the host's CPUs and GPUs were while a benchmark graded: what
tells a grader held up by its CPUs (compilers, compute-sanitizer, report
drawing) from one held up by its GPUs. Read from /proc/stat and from
`nvidia-smi --query-gpu` sampled while the work runs. Also how busy this
process was, in cores: a batch grades in threads of one Python process,
whose interpreter runs one thread at a time, so a process near one core
holds its gradings up while the host's CPUs look idle."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from typing import Optional

SAMPLE_S = 1.0
SATURATED = 0.9  # a second in which the CPUs were this busy counts as saturated


def _own_cpu_s() -> float:
    """CPU seconds this process (all its threads, not its children) has used."""
    times = os.times()
    return times.user + times.system


def _cpu_times() -> tuple:
    """(busy, total) jiffies of all CPUs since boot."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    return sum(fields) - idle, sum(fields)


class MachineLoad:
    """A context manager: samples while the block runs; then `figures()`."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._cpu: list = []  # busy share of each second
        self._own: list = []  # cores this process used, each second
        self._gpu_lines: list = []
        self._smi: Optional[subprocess.Popen] = None
        self._thread: Optional[threading.Thread] = None
        self._first = self._last = None

    def __enter__(self) -> "MachineLoad":
        self._first = _cpu_times()
        self._own_first = (_own_cpu_s(), time.monotonic())
        self._thread = threading.Thread(target=self._sample_cpu, name="bench-cpu-load", daemon=True)
        self._thread.start()
        if shutil.which("nvidia-smi"):
            self._smi = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu",
                                          "--format=csv,noheader,nounits", f"-lms={int(SAMPLE_S * 1000)}"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read_gpu, name="bench-gpu-load", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._last = _cpu_times()
        self._own_last = (_own_cpu_s(), time.monotonic())
        if self._thread:
            self._thread.join()
        if self._smi:
            self._smi.terminate()
            self._smi.wait()

    def _sample_cpu(self) -> None:
        before, own_before = _cpu_times(), (_own_cpu_s(), time.monotonic())
        while not self._stop.wait(SAMPLE_S):
            now, own_now = _cpu_times(), (_own_cpu_s(), time.monotonic())
            if now[1] > before[1]:
                self._cpu.append((now[0] - before[0]) / (now[1] - before[1]))
            if own_now[1] > own_before[1]:
                self._own.append((own_now[0] - own_before[0]) / (own_now[1] - own_before[1]))
            before, own_before = now, own_now

    def _read_gpu(self) -> None:
        for line in self._smi.stdout:
            self._gpu_lines.append(line.strip())

    def figures(self) -> dict:
        """cpu_busy (share over the whole time), cpu_saturated (share of the
        seconds over SATURATED), gpu_busy {index: mean utilization share}."""
        found: dict = {}
        if self._first and self._last and self._last[1] > self._first[1]:
            found["cpu_busy"] = round((self._last[0] - self._first[0]) / (self._last[1] - self._first[1]), 3)
        (own_first, start), (own_last, end) = self._own_first, self._own_last
        if end > start:
            found["own_cores"] = round((own_last - own_first) / (end - start), 3)
        if self._own:
            found["own_saturated"] = round(sum(s >= SATURATED for s in self._own) / len(self._own), 3)
        if self._cpu:
            found["cpu_saturated"] = round(sum(s >= SATURATED for s in self._cpu) / len(self._cpu), 3)
        gpus: dict = {}
        for line in self._gpu_lines:
            try:
                index, util = (x.strip() for x in line.split(","))
                gpus.setdefault(index, []).append(float(util) / 100)
            except ValueError:
                continue
        if gpus:
            found["gpu_busy"] = {i: round(sum(v) / len(v), 3) for i, v in gpus.items()}
        return found
