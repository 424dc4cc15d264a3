"""What an instructor hands out: the starter generated from the solutions,
the handout, the student and autograder bundles, and the gates that check
they agree."""
