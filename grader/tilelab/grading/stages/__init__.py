"""The stages of a grading, one module each; grading/pipeline.py runs them in order."""
