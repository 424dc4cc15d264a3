"""What a grading is shown as: Gradescope's results.json, the student's and
staff's reports, the terminal view. Reads only the result model (and the
spec, for names and points)."""
