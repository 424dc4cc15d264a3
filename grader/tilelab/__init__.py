"""tilelab: a CUDA matrix-multiplication lab and the autograder that grades it."""

__version__ = "0.1.0"
