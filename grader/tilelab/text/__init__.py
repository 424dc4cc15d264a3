"""Words and numbers as the project writes them: points, GFLOP/s, percents,
dates, and text made safe for Markdown. Shared by the grading, the outputs
and the handouts. Imports nothing else of tilelab."""
