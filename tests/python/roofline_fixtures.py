"""What the roofline tests share: the report tilelab-roofline printed on an
H100, and stand-ins for the tool."""

import json
import stat
import sys
from pathlib import Path

H100_UUID = "5a3c1e2f-0b7d-4c9e-8f21-6d4b3a2c1e0f"

# What tilelab-roofline printed on an H100 80GB HBM3 (132 SMs, 8 blocks of 256
# threads per SM, 4 waves, 1024 x 16 x 8 FMAs per thread; two 1 GiB buffers
# copied four times per run), with the figures rounded. The "l2" and "shared"
# sections have the sizes the tool works out for that GPU (one resident wave
# of 8 x 256 threads per SM; a 12.4 MiB buffer read 993 x 4 float4s per
# thread; 1986 x 8 float4s per thread from shared memory) and bandwidths of
# the size expected there, not yet measured.
H100_REPORT = {
    "version": 2,
    "tool": "tilelab-roofline",
    "device": {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": H100_UUID,
        "compute_capability": "9.0",
        "multiprocessors": 132,
        "l2_bytes": 52428800,
        "memory_bytes": 85017493504,
    },
    "fp32_fma": {"gflops_median": 65100.0, "gflops_max": 65200.0, "runs": 20, "flop_per_run": 283467841536.0},
    "dram": {"gbps_median": 3000.0, "gbps_max": 3020.0, "runs": 20, "bytes_per_run": 8589934592.0,
             "buffer_bytes": 1073741824},
    "l2": {"gbps_median": 6500.0, "gbps_max": 6600.0, "runs": 20, "bytes_per_run": 17180393472.0,
           "buffer_bytes": 12976128},
    "shared": {"gbps_median": 30000.0, "gbps_max": 30200.0, "runs": 20, "bytes_per_run": 68721573888.0},
}


MEASURED_AT = "2026-11-21T09:30:00Z"
DELETE = object()  # as a value in h100_report(): remove the key


def h100_report(**changes) -> dict:
    """A deep copy of H100_REPORT; changes are 'section.key' (or 'key') -> value."""
    report = json.loads(json.dumps(H100_REPORT))
    for dotted, value in changes.items():
        *sections, key = dotted.split(".")
        target = report
        for s in sections:
            target = target[s]
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return report


def stand_in_tool(tmp_path: Path, body: str) -> Path:
    """An executable that stands in for tilelab-roofline; each call's arguments go to calls.log."""
    script = tmp_path / "tilelab-roofline-stand-in"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        f"with open({str(tmp_path / 'calls.log')!r}, 'a') as log:\n"
        "    log.write(' '.join(sys.argv[1:]) + '\\n')\n"
        + body
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def printing_tool(tmp_path: Path, report: dict) -> Path:
    return stand_in_tool(
        tmp_path,
        f"REPORT = json.loads({json.dumps(json.dumps(report))})\n"
        "print(json.dumps(REPORT['device'] if sys.argv[1:] == ['--device'] else REPORT, indent=2))\n",
    )


def calls(tmp_path: Path) -> list:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []
