"""`python -m bench.measurements` (what `scripts/measurements` runs): rewrite docs/measurements.md's figures.

- Each source has a block between its two markers (`markers`): gpu-suite
  (the last table `scripts/gpu-suite` prints), bench (`scripts/bench`'s
  bench.json) and bench-check (`scripts/bench-check --out`'s JSON).
- Only the text between a source's markers changes (replace_block); markers
  missing, doubled or out of order are an error, and the page is left as it was.
- Each block names its machine and date; --machine and --date fill in what a
  source does not say.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tilelab.errors import TilelabError

from .check_bench import said_line

DOC = Path(__file__).resolve().parents[2] / "docs" / "measurements.md"
SUMMARY_NAME = "gpu-suite-summary.txt"  # scripts/gpu-suite's name for it, under $OUT and in logs.tgz


class MeasurementsError(TilelabError):
    """A source cannot be read, or the page has no place for its figures."""


def markers(source: str) -> tuple:
    return f"<!-- {source}:begin -->", f"<!-- {source}:end -->"


def replace_block(page: str, source: str, body: str) -> str:
    """`page` with the text between source's markers replaced by `body`;
    everything before the begin marker and from the end marker on is unchanged
    (the page's prose is edited by hand)."""
    begin, end = markers(source)
    for marker in (begin, end):
        count = page.count(marker)
        if count != 1:
            found = "no" if count == 0 else f"{count} times the"
            raise MeasurementsError(f"{found} marker {marker}: the page must hold the {source} figures between "
                                    f"one {begin} and one {end}")
    start, stop = page.index(begin) + len(begin), page.index(end)
    if stop < start:
        raise MeasurementsError(f"{end} comes before {begin}")
    return page[:start] + "\n" + body.rstrip("\n") + "\n" + page[stop:]


def _thousands(gflops: float) -> str:
    return f"{gflops:,.0f}"


def _range(lo: float, hi: float, fmt=_thousands) -> str:
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


@dataclass
class PartRow:
    """One part's row of gpu-suite's last table."""

    part: str
    score: float
    max_score: float
    gflops_lo: float
    gflops_hi: float
    reference: float  # 0: not calibrated (gpu-suite prints 0 for a reference it has none of)
    spread: float  # of the speed points over the gradings, % of the part's speed points


@dataclass
class GpuSuiteSummary:
    gradings: int
    rows: list
    machine: str = ""
    date: str = ""
    commit: str = ""  # what ran, where the summary or the command says
    score: Optional[tuple] = None  # (score, max) of the first of the gradings
    walls: list = field(default_factory=list)  # seconds of each grading
    where: str = ""  # where the first grading's time went, as printed


# The lines scripts/gpu-suite prints for the references graded end to end,
# the table last (its `part`, `points`, ... header, then one row a part).
_SCORE_RE = re.compile(r"^score (?P<score>[\d.]+) / (?P<max>[\d.]+), wall [\d.]+ s"
                       r"(?:; where it went: (?P<where>.*))?$")
_WALLS_RE = re.compile(r"^wall of each grading: (?P<walls>[\d., ]+) s\b")
_HEADER_RE = re.compile(r"^part\s+points\s+GFLOP/s\s+target\s+ref\s+speed points over (?P<n>\d+) gradings")
_ROW_RE = re.compile(r"^(?P<part>\S+)\s+(?P<score>[\d.]+)/(?P<max>[\d.]+)\s+\d+\s+\d+\s+(?P<ref>\d+)\s+"
                     r".*\((?P<spread>[\d.]+)%\)\s+GFLOP/s (?P<lo>\d+)-(?P<hi>\d+)\s*$")


def parse_gpu_suite(text: str) -> GpuSuiteSummary:
    """The figures of gpu-suite's summary: its `gpu:` and `date:` lines, the
    score and wall lines where present, and the table of the parts."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if _HEADER_RE.match(line)), None)
    if header is None:
        raise MeasurementsError("no table of the parts: expected gpu-suite's line \"part  points  GFLOP/s  target  "
                                "ref  speed points over N gradings ...\" (gpu-suite saves it only when it grades)")
    rows = []
    for line in lines[header + 1:]:
        m = _ROW_RE.match(line)
        if not m:
            break
        rows.append(PartRow(m["part"], float(m["score"]), float(m["max"]), float(m["lo"]), float(m["hi"]),
                            float(m["ref"]), float(m["spread"])))
    if not rows:
        after = lines[header + 1] if header + 1 < len(lines) else "the end of the file"
        raise MeasurementsError(f"the table of the parts has no rows: its header is followed by {after!r}")
    summary = GpuSuiteSummary(gradings=int(_HEADER_RE.match(lines[header])["n"]), rows=rows)
    for line in lines[:header]:
        if line.startswith("gpu: "):
            fields = [f.strip() for f in line[len("gpu: "):].split(",")]
            summary.machine = fields[0] + (f", driver {fields[1]}" if len(fields) > 1 and fields[1] else "")
        elif line.startswith("date: "):
            summary.date = line[len("date: "):].strip()
        elif line.startswith("commit: "):
            summary.commit = line[len("commit: "):].strip()
        elif _SCORE_RE.match(line):
            m = _SCORE_RE.match(line)
            summary.score, summary.where = (float(m["score"]), float(m["max"])), m["where"] or ""
        elif _WALLS_RE.match(line):
            summary.walls = [float(w) for w in _WALLS_RE.match(line)["walls"].split(",") if w.strip()]
    return summary


def _dated(machine: str, date: str, commit: str = "") -> str:
    """The block's first line: what it ran on, when, and (where said) at which commit."""
    return (f"Machine: {machine or 'not recorded'}. Date: {date or 'not recorded'}."
            + (f" Commit: {commit}." if commit else ""))


def render_gpu_suite(s: GpuSuiteSummary) -> str:
    """The gpu-suite block: the machine and date, a line of totals, the table."""
    totals = ["`scripts/gpu-suite`: the reference solutions graded end to end "
              + (f"{s.gradings} times" if s.gradings != 1 else "once") + ", the calibration cached"]
    if s.score:
        totals.append(f"score {s.score[0]:g} / {s.score[1]:g} (the first grading)")
    if s.walls:
        totals.append(f"wall of a grading {_range(min(s.walls), max(s.walls), lambda v: f'{v:.1f}')} s")
    if s.where:
        totals.append(f"where the first went: {s.where}")
    gradings = f"{s.gradings} grading{'s' if s.gradings != 1 else ''}"
    lines = [_dated(s.machine, s.date, s.commit), "", "; ".join(totals) + ".", "",
             f"| part | points | GFLOP/s over the {gradings} | reference GFLOP/s | spread of the speed points |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for r in s.rows:
        lines.append(f"| {r.part} | {r.score:g} / {r.max_score:g} | {_range(r.gflops_lo, r.gflops_hi)} | "
                     f"{_thousands(r.reference) if r.reference else '-'} | {r.spread:.1f} % |")
    return "\n".join(lines) + "\n"


def render_bench(bench: dict, machine: str = "", date: str = "") -> str:
    """The bench block from bench.json (bench/grading_bench.py's BenchResult.to_dict()):
    a row for each figure it holds."""
    gpus = bench.get("machine", {}).get("gpus") or []
    rows = []
    cold, warm = bench.get("references", {}).get("cold"), bench.get("references", {}).get("warm")
    if cold:
        score = f" ({cold['score']:g} / {cold['max_score']:g})" if "score" in cold else ""
        rows.append(("the references graded alone, every part compiled", f"{cold['seconds']:.1f} s{score}"))
    if warm:
        rows.append(("the same, every part built before", f"{warm['seconds']:.1f} s"))
    build, bare = (cold or {}).get("timings", {}).get("build"), bench.get("bare_compile_seconds")
    if build and bare:
        rows.append(("its build stage / a bare parallel `nvcc -c` of the same files",
                     f"{build:.2f} / {bare:.2f} s = {build / bare:.2f} x"))
    startup = bench.get("startup") or {}
    if startup:
        rows.append(("starting a CUDA process: the GPU probe" + (", a harness run of one 1x1 case"
                                                                 if "harness" in startup else ""),
                     ", ".join(f"{startup[k]:.2f} s" for k in ("probe", "harness") if k in startup)))
    loop = bench.get("student_loop") or {}
    if loop:
        rows.append(("`tilelab check naive`: just edited, unchanged, `--fast`",
                     ", ".join(f"{loop[k]:.1f} s" for k in ("edited", "unchanged", "fast") if k in loop)))
    if "wall_seconds" in bench:
        workers, missed = bench.get("workers", 1), bench.get("hand_ins", 0) - bench.get("graded", 0)
        rows.append((f"the class: {bench.get('hand_ins')} hand-ins, {bench.get('in_flight', 1)} at a time on each GPU"
                     + (f", {workers} workers" if workers > 1 else ""),
                     f"{bench['wall_seconds']:.1f} s wall: {bench.get('per_hour', 0):,.0f} an hour"
                     + (f" ({missed} not graded)" if missed > 0 else "")))
    walls = [h["seconds"] for h in (bench.get("per_hand_in") or {}).values()]
    if walls:
        rows.append(("one grading of the class", f"median {statistics.median(walls):.1f} s, slowest "
                                                  f"{max(walls):.1f} s"))
    if gpus and "gpu_busy_seconds" in bench:
        rows.append(("the GPU busy, of which held alone",
                     f"{bench['gpu_busy_seconds']:.1f} s, {bench.get('gpu_exclusive_seconds', 0):.1f} s"))
    # bench.json names the GPU it graded on; none there means the class ran without one.
    lines = [_dated(gpus[0] if gpus else (machine or "no GPU"), date), "",
             "| `scripts/bench` | figure |", "| --- | ---: |"]
    lines += [f"| {what} | {value} |" for what, value in rows]
    return "\n".join(lines) + "\n"


def render_bench_check(found: dict, machine: str = "", date: str = "") -> str:
    """The bench-check block from `scripts/bench-check --out`'s JSON (bench/check_bench.py):
    each figure's median against its goal and the figure before, and nvcc alone."""
    gpu = found.get("gpu")
    where = "a fresh student bundle" if found.get("place") == "bundle" else "the project tree"
    lines = [_dated(gpu or machine or "no GPU", found.get("date") or date), "",
             f"`scripts/bench-check` in {where}, the median of {found.get('runs', 1)} runs"
             + ("" if gpu else "; no GPU, so the GPU stages did not run and the goals are not compared") + ".", "",
             "| the student's check | now | goal | before |", "| --- | ---: | ---: | ---: |"]
    for figure in (found.get("figures") or {}).values():
        met = "" if not gpu else (" (met)" if figure["median"] <= figure["goal"] else " (not met)")
        before = figure.get("before")
        lines.append(f"| {figure.get('what', '')} | {figure['median']:.2f} s{met} | {figure['goal']:g} s | "
                     f"{f'{before:.2f} s' if before is not None else ''} |")
    nvcc = found.get("nvcc_seconds")
    lines.append(f"| nvcc alone, compiling naive.cu (the floor of a check that compiles) | "
                 f"{f'{nvcc:.2f} s' if nvcc is not None else 'not measured'} | | |")
    said = found.get("said") or {}
    if said:
        figures = found.get("figures") or {}
        line = said_line(said, lambda name: figures.get(name, {}).get("what", name))
        lines += ["", line[0].upper() + line[1:] + "."]
    for name, breakdown in (found.get("breakdowns") or {}).items():
        if breakdown and name in ("edited", "uncoalesced"):
            what = (found.get("figures") or {}).get(name, {}).get("what", name)
            lines += ["", f"Where {what} spent its time (its last run, `-v`):", ""]
            lines += [f"    {line}" for line in breakdown]
    return "\n".join(lines) + "\n"


def read_summary(path: Path) -> str:
    """gpu-suite's summary from its own file, or from logs.tgz (logs/gpu-suite-summary.txt)."""
    try:
        if path.name.endswith((".tgz", ".tar.gz")):
            with tarfile.open(path) as tar:
                member = tar.extractfile(f"logs/{SUMMARY_NAME}")
                if member is None:
                    raise KeyError(f"logs/{SUMMARY_NAME} is not a file")
                return member.read().decode("utf-8")
        return path.read_text(encoding="utf-8")
    except (OSError, KeyError, tarfile.TarError) as e:
        raise MeasurementsError(f"{path}: cannot read gpu-suite's summary ({e})") from None


def update(page: str, gpu_suite: Optional[str] = None, bench: Optional[dict] = None,
           machine: str = "", date: str = "", bench_check: Optional[dict] = None, commit: str = "") -> str:
    """`page` with the blocks of the sources given rewritten; `machine` and
    `date` stand where a source does not say; `commit`, where given, over
    the summary's (a GPU machine's copy of .git can lag the tree it ran)."""
    if gpu_suite is not None:
        summary = parse_gpu_suite(gpu_suite)
        summary.machine, summary.date = summary.machine or machine, summary.date or date
        summary.commit = commit or summary.commit
        page = replace_block(page, "gpu-suite", render_gpu_suite(summary))
    if bench is not None:
        page = replace_block(page, "bench", render_bench(bench, machine, date))
    if bench_check is not None:
        page = replace_block(page, "bench-check", render_bench_check(bench_check, machine, date))
    return page


def _read_json(path: Optional[Path]) -> Optional[dict]:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError) as e:
        raise MeasurementsError(f"{path}: cannot read it as JSON ({e})") from None


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.measurements", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-suite", type=Path, help=f"scripts/gpu-suite's {SUMMARY_NAME}, or its logs.tgz")
    parser.add_argument("--bench", type=Path, help="scripts/bench's bench.json")
    parser.add_argument("--bench-check", type=Path, help="scripts/bench-check --out's JSON")
    parser.add_argument("--doc", type=Path, default=DOC, help="the page to rewrite (default: %(default)s)")
    parser.add_argument("--machine", default="", help="the machine, where a source does not name it")
    parser.add_argument("--date", default=None, help="the date, where a source does not say it (default: today)")
    parser.add_argument("--commit", default="", help="the commit gpu-suite ran, over what its summary says (a GPU "
                                                     "machine's copy of the tree may have no .git, or one behind it)")
    args = parser.parse_args(argv)
    if args.gpu_suite is None and args.bench is None and args.bench_check is None:
        parser.error("give --gpu-suite FILE, --bench FILE, --bench-check FILE, or several")
    date = args.date or datetime.date.today().isoformat()
    try:
        page = args.doc.read_bytes().decode("utf-8")
        summary = read_summary(args.gpu_suite) if args.gpu_suite else None
        bench, bench_check = (_read_json(path) for path in (args.bench, args.bench_check))
        new = update(page, summary, bench, args.machine, date, bench_check, args.commit)
    except (OSError, MeasurementsError) as e:
        print(f"measurements: {args.doc}: {e}", file=sys.stderr)
        return 1
    if new == page:
        print(f"{args.doc}: unchanged")
    else:
        args.doc.write_bytes(new.encode("utf-8"))
        print(f"{args.doc}: rewrote " + " and ".join(s for s, given in (("gpu-suite", args.gpu_suite),
                                                                           ("bench", args.bench),
                                                                           ("bench-check", args.bench_check)) if given))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
