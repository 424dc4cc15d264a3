"""A part's cases: the problem sizes of assignment.yaml, parsed and named.

- A square part's case is a Width or {width, inputs}; a rectangular part's is
  [j, k, l] or {j, k, l, inputs, props} (tilelab.spec.schema: SQUARE_CASE,
  RECTANGULAR_CASE).
- A case's name is derived from its sizes, inputs and props ("w64-int",
  "33x17x65-smem2048"); reports and the harness know cases by it.
- No matrix of a case holds more than 2^30 elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .checks import fail, integer, mapping, value
from .matmul import matmul_flop
from .schema import PROP_KEYS, PROPS, RECTANGULAR_CASE, SQUARE_CASE


@dataclass(frozen=True)
class Case:
    """One problem size a part is run on."""

    name: str
    j: int
    k: int
    l: int
    distribution: str = "uniform"
    props: dict = field(default_factory=dict)

    @property
    def flop(self) -> float:
        return matmul_flop(self.j, self.k, self.l)

    def to_json(self) -> dict:
        out = {"name": self.name, "j": self.j, "k": self.k, "l": self.l, "distribution": self.distribution}
        if self.props:
            out["props"] = dict(self.props)
        return out


def case_name(j: int, k: int, l: int, square: bool, distribution: str, props: dict) -> str:
    name = f"w{j}" if square else f"{j}x{k}x{l}"
    if distribution == "small_int":
        name += "-int"
    for key in PROP_KEYS:
        if key in props:
            short = {"sharedMemPerBlock": "smem", "maxThreadsPerBlock": "threads", "maxThreadsDim": "dim"}[key]
            got = props[key]
            name += f"-{short}{'x'.join(map(str, got)) if isinstance(got, list) else got}"
    return name


def _props(raw: Any, where: str) -> dict:
    props = dict(mapping(raw, where, PROPS))
    for key, got in props.items():
        lo, hi = PROPS.key(key).bounds
        if key == "sharedMemPerBlock" and got == "optin":
            continue
        if key == "maxThreadsDim":
            if not isinstance(got, list) or len(got) != 3:
                fail(f"{where}.maxThreadsDim", f"must be [x, y, z], got {got!r}")
            props[key] = [integer(v, f"{where}.maxThreadsDim[{i}]", lo, hi) for i, v in enumerate(got)]
            continue
        integer(got, f"{where}.{key}", lo, hi)
    return props


def parse_case(raw: Any, where: str, signature: str) -> Case:
    square = signature == "square"
    distribution, props = "uniform", {}
    if square:
        lo, hi = SQUARE_CASE.key("width").bounds
        if isinstance(raw, dict):
            raw = mapping(raw, where, SQUARE_CASE)
            width = integer(raw["width"], f"{where}.width", lo, hi)
            distribution = value(raw, SQUARE_CASE, "inputs", where)
        else:
            width = integer(raw, where, lo, hi)
        j = k = l = width
    else:
        bounds = {d: RECTANGULAR_CASE.key(d).bounds for d in "jkl"}
        if isinstance(raw, list):
            if len(raw) != 3:
                fail(where, f"a rectangular case is [j, k, l], got {raw!r}")
            j, k, l = (integer(v, f"{where}[{i}]", *bounds[d]) for i, (d, v) in enumerate(zip("jkl", raw)))
        else:
            raw = mapping(raw, where, RECTANGULAR_CASE)
            j, k, l = (integer(raw[d], f"{where}.{d}", *bounds[d]) for d in "jkl")
            distribution = value(raw, RECTANGULAR_CASE, "inputs", where)
            if "props" in raw:
                if signature != "rectangular_props":
                    fail(f"{where}.props", "only a launcher that takes cudaDeviceProp can be given properties")
                props = _props(raw["props"], f"{where}.props")
    for a, b in ((j, k), (k, l), (j, l)):
        if a * b > 1 << 30:
            fail(where, "a matrix of this case has more than 2^30 elements")
    name = case_name(j, k, l, square, distribution, props)
    return Case(name=name, j=j, k=k, l=l, distribution=distribution, props=props)
