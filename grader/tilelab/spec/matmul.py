"""The arithmetic of a j x k x l matrix product: its FLOPs, the fewest bytes
it must move through DRAM, and their ratio (arithmetic intensity)."""

from __future__ import annotations


def compulsory_bytes(j: int, k: int, l: int) -> int:
    """Each of M (j x k), N (k x l) and P (j x l) moved through DRAM once, as float32."""
    return 4 * (j * k + k * l + j * l)


def matmul_flop(j: int, k: int, l: int) -> float:
    """One multiply and one add per term of every dot product."""
    return 2.0 * j * k * l


def intensity(j: int, k: int, l: int) -> float:
    return matmul_flop(j, k, l) / compulsory_bytes(j, k, l)
