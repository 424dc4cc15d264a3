"""`tilelab batch --slurm`: an sbatch array script that grades the class on a Slurm cluster.

- Nothing is graded here: the script runs one task per student, each running
  the grader's container on one GPU.
- `tilelab batch --gradebook-only` collects what the tasks wrote.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Optional

from ...spec.assignment import Assignment
from .students import SLURM_LOGS, BatchError, _assignment, _check_dirs, find_students

# Where docker/Dockerfile installs the grader; the image sets TILELAB_ROOT beside it.
IMAGE_TILELAB = "/autograder/source/.venv/bin/tilelab"
# Paths written into #SBATCH lines and apptainer --bind specs, where quoting
# does not help: ':' and ',' separate bind specs, whitespace ends a directive.
_SLURM_UNSAFE_PATH = re.compile(r"[\s:,'\"\\$`]")


def slurm_time_limit(assignment: Assignment) -> int:
    """Seconds one task may take: every time limit of assignment.yaml added up
    as if each part used all of its own (builds one after another, two
    correctness runs and two sanitizers, all run again alone once, the
    timing), plus the ceilings' measurement and starting the container."""
    limits = assignment.grading["time_limits"]
    runs = 2 * limits["correctness"] + 2 * limits["sanitizer"]
    per_part = limits["build"] + 2 * runs + limits["speed"]
    return len(assignment.parts) * per_part + 120 + 600


def _hms(seconds: int) -> str:
    minutes = math.ceil(seconds / 300) * 5  # whole five minutes
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def _image_uri(image: str) -> str:
    """--image as the container runtime takes it: a local .sif file as it is,
    anything with a scheme (docker://, oras://, library://) as it is, a bare
    name as a docker:// image."""
    if image.endswith(".sif"):
        return str(Path(image).resolve())
    return image if "://" in image else f"docker://{image}"


def write_slurm(class_dir: Path, out_dir: Path, script: Path, *, root: Path, image: str,
                seed: Optional[int] = None) -> tuple:
    """Writes the sbatch array script and its student list (next to it);
    returns (script, student list, students refused)."""
    class_dir, out_dir = _check_dirs(class_dir, out_dir)
    script = Path(script).resolve()
    if not image:
        raise BatchError("--slurm needs --image: the grader's container image (e.g. ghcr.io/course/tilelab:2026)")
    uri = _image_uri(image)
    for what, path in (("DIR", class_dir), ("--out", out_dir), ("--slurm", script)):
        if _SLURM_UNSAFE_PATH.search(str(path)):
            raise BatchError(f"{what} {path}: a path in an sbatch script may not hold spaces, quotes, $, ':' "
                             "or ','")
    if re.search(r"[\s'\"\\$`]", uri):
        raise BatchError(f"--image {image!r}: an image name holds no spaces, quotes or $")
    assignment = _assignment(root)
    students = find_students(class_dir)
    refused = [s for s in students if s.problem]
    names = [s.name for s in students if not s.problem]
    if not names:
        raise BatchError(f"{class_dir} holds no student directory to grade")
    student_list = script.with_name(script.stem + ".students.txt")
    script.parent.mkdir(parents=True, exist_ok=True)
    student_list.write_text("".join(f"{n}\n" for n in names))
    # Slurm does not create the directory of --output; a task without it fails unseen.
    (out_dir / SLURM_LOGS).mkdir(parents=True, exist_ok=True)
    seed_args = f" --seed {seed}" if seed is not None else ""
    q = shlex.quote
    text = f"""#!/bin/bash
# Grades the class in {class_dir} on a Slurm cluster: one array task per
# student (the list, one per line, in {student_list.name} next to this script;
# task i grades line i+1), each on one GPU, in the grader's container.
# Written by: tilelab batch {class_dir} --out {out_dir} --slurm {script} --image {image}{seed_args}
#
# Submit:        sbatch {script}
# Logs:          {out_dir / SLURM_LOGS}/<job>_<task>.log
# Results:       {out_dir}/<student>/ (results.json, report.md, report.html, staff/, grade.json)
# Then, on any machine that sees {out_dir}, collect the gradebook:
#                tilelab batch {class_dir} --out {out_dir} --gradebook-only
# Regrade one student: sbatch --array=<its line number - 1> {script}
#
# Each task runs `apptainer (or singularity) exec --nv` on {uri},
# binding only that student's submission (read-only) and results directory:
# no task sees another student's files.
#   --fakeroot  the grader must be root in the container: the image keeps the
#               answer key and the hidden cases from everyone but root, and
#               runs student code as its unprivileged user (tilelab-student).
#               This needs subordinate user ids for you on the nodes
#               (/etc/subuid; ask the cluster's admins); without them every
#               task ends in a grader error saying that user cannot be used.
#   --contain   the host's home and /tmp stay outside; the container's /tmp
#               (the builds) is a fresh directory under $TMPDIR, removed after.
# Each task measures its GPU's ceilings once (the measurement is limited to
# two minutes). A docker:// image is converted to a SIF file by every task:
# for a large class, `apptainer pull tilelab.sif {uri}` once, on shared
# storage, and write this script again with --image /path/to/tilelab.sif.
# {"Every task uses seed " + str(seed) + ", so a regrade reproduces the correctness verdicts."
   if seed is not None else "Each task draws a fresh seed, recorded in its grade.json and in the gradebook."}
# The time limit is every time limit of assignment.yaml added up (no grading
# can take longer); cpus and memory are defaults to adjust to the cluster.
# TILELAB is the grader's command inside the image (default: where
# docker/Dockerfile installs it), e.g. TILELAB="tilelab --root /src" sbatch {script}
#SBATCH --job-name=tilelab-{assignment.name}
#SBATCH --array=0-{len(names) - 1}
#SBATCH --gres=gpu:1
#SBATCH --time={_hms(slurm_time_limit(assignment))}
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --output={out_dir / SLURM_LOGS}/%A_%a.log
set -euo pipefail

class_dir={q(str(class_dir))}
out_dir={q(str(out_dir))}
students={q(str(student_list))}
image={q(uri)}
tilelab=${{TILELAB:-{IMAGE_TILELAB}}}

if [ -z "${{SLURM_ARRAY_TASK_ID:-}}" ]; then
  echo "submit this script with sbatch: SLURM_ARRAY_TASK_ID is not set" >&2
  exit 2
fi
student=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$students")
if [ -z "$student" ]; then
  echo "$students has no line $((SLURM_ARRAY_TASK_ID + 1))" >&2
  exit 2
fi
if command -v apptainer >/dev/null 2>&1; then
  runtime=apptainer
elif command -v singularity >/dev/null 2>&1; then
  runtime=singularity
else
  echo "neither apptainer nor singularity is installed on $(hostname)" >&2
  exit 2
fi
mkdir -p "$out_dir/$student"
workdir=$(mktemp -d "${{TMPDIR:-/tmp}}/tilelab-$student-XXXXXX")
trap 'rm -rf "$workdir" 2>/dev/null || true' EXIT
echo "task $SLURM_ARRAY_TASK_ID: grading $student on $(hostname), CUDA_VISIBLE_DEVICES=${{CUDA_VISIBLE_DEVICES:-}}"
# $tilelab is unquoted on purpose: it may be a command with arguments.
"$runtime" exec --nv --fakeroot --contain --workdir "$workdir" \\
  --bind "$class_dir/$student:$class_dir/$student:ro" \\
  --bind "$out_dir/$student:$out_dir/$student" \\
  "$image" $tilelab grade "$class_dir/$student" --out "$out_dir/$student"{seed_args}
"""
    script.write_text(text)
    script.chmod(0o755)
    return script, student_list, refused
