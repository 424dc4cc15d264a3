"""`tilelab batch`: a whole class graded on this machine's GPUs, or on a Slurm cluster.

- DIR holds one directory per student id, each graded as `tilelab grade`
  grades it into OUT/<student>/ (scheduler); a matching OUT/<student>/.done
  is not graded again unless --force (students).
- OUT/gradebook.csv, the class leaderboards and the class report collect
  the results (gradebook).
- With --slurm an sbatch array script is written, and --gradebook-only
  collects what its tasks wrote (slurm).
"""

from .gradebook import GRADED, GRADER_ERROR, collect_row, gradebook_only
from .scheduler import DEFAULT_IN_FLIGHT, find_gpus, in_flight_for, parse_gpus, run_batch
from .slurm import IMAGE_TILELAB, slurm_time_limit, write_slurm
from .students import GRADEBOOK_FILE, BatchError, find_students, regrade_reason, submission_digest

__all__ = [
    "DEFAULT_IN_FLIGHT", "GRADEBOOK_FILE", "GRADED", "GRADER_ERROR", "IMAGE_TILELAB", "BatchError", "collect_row",
    "find_gpus", "find_students", "gradebook_only", "in_flight_for", "parse_gpus", "regrade_reason", "run_batch",
    "slurm_time_limit", "submission_digest", "write_slurm",
]
