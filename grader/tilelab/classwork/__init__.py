"""What the class did, after the deadline: views over a whole class's
gradings, read from the graded folders (`tilelab batch`'s OUT) or the
service's latest grades, never from a GPU. Staff only. Reads the result
model, the spec and the outputs; operations (batch, the dashboard) call it."""
