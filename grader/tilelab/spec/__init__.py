"""The assignment as data: assignment.yaml, its questions and answer key, the
arithmetic of a matrix product, and the public view students get. Imports
only tilelab.system."""
