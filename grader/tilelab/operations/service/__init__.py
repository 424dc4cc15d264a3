"""The grading service: a gateway, a queue in PostgreSQL, and GPU workers."""
