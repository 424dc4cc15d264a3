"""The ground floor: processes and the sandbox student code runs in, the GPU
lock, atomic writes and where the project's files are. Imports nothing else
of tilelab."""
