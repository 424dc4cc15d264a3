"""Benchmarks of the grader: where a grading's time goes. Not shipped with
the package and never a test; `scripts/bench` runs them and
docs/measurements.md keeps their figures."""
