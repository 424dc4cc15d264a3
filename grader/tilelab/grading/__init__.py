"""One grading of one hand-in: static checks, build, correctness, launch
checks, sanitizers, the GPU's ceilings and speed, and the result model every
output is made from. Imports tilelab.spec and tilelab.system."""
