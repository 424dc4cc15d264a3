"""Numbers as a person reads them: points, GFLOP/s, FLOP/byte, percents,
milliseconds, bytes and dates.

Each formatter returns text and never raises on a value it cannot format:
infinities and NaN come back as Python writes them, words as they are.
"""

from __future__ import annotations

import math
from datetime import datetime


def fmt_points(x: float) -> str:
    """Points as a person writes them: 10, 7.5, 3.33."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_points_unit(x: float) -> str:
    """Points with their unit, singular exactly when they read as 1: "1 point", "2.5 points"."""
    text = fmt_points(x)
    return f"{text} point" + ("" if text == "1" else "s")


def fmt_gflops(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def fmt_ms(x: float) -> str:
    """Milliseconds: one decimal from 100 up, two from 1, three significant digits below."""
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3g}"


def fmt_intensity(x: float) -> str:
    """Arithmetic intensity (FLOP per byte)."""
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:.3g}"


def fmt_flop_per_byte(x) -> str:
    """FLOP per byte with two or three significant digits: 0.25, 0.381, 8.0, 16.1, 201.
    Below 10 one decimal stays, so a tiled kernel's 8.0 reads as the
    lecture's figure and not as a rounded count."""
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return str(x)
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.1f}"
    return f"{x:.3g}"


def fmt_gigabytes(n) -> str:
    """Bytes in GB (10^9) with three significant digits, smaller amounts in MB or kB."""
    if not isinstance(n, (int, float)) or not math.isfinite(n):
        return str(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            value = n / size
            decimals = 0 if value >= 100 else 1 if value >= 10 else 2  # three digits, trailing zeros kept
            return f"{value:,.{decimals}f} {unit}"
    return f"{n:.0f} B"


def fmt_percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}".rstrip("0").rstrip(".") + " %"


def fmt_bytes(n) -> str:
    try:
        return f"{int(n):,} B"
    except (TypeError, ValueError):
        return str(n)


def fmt_date(iso: str) -> str:
    """An ISO time as 'YYYY-MM-DD HH:MM UTC'; the text as given if it
    does not parse (Python 3.9's fromisoformat does not read a 'Z')."""
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return str(iso)
    if when.tzinfo is None:
        return when.strftime("%Y-%m-%d %H:%M")
    if when.utcoffset().total_seconds() == 0:
        return when.strftime("%Y-%m-%d %H:%M UTC")
    return when.strftime("%Y-%m-%d %H:%M UTC%z")
