"""Running gradings for people: one hand-in end to end with its outputs, and
a whole class (workers per GPU, resume, gradebook, Slurm)."""
