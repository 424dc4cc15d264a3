"""The grader graded: known-good and known-bad hand-ins against their
expected verdicts, and the scan of what students see for leaked secrets."""
