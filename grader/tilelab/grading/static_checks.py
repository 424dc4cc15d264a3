"""Static checks of a part file, before and after it is compiled.

Before (check_source): a plain text file of sensible size that defines the
part's launcher, pulls in no library GEMM, loads no library at run time, and
defines neither `main` nor functions named like the CUDA API; comments and
string literals are removed first. After (audit_object): the object's symbol
table, which a macro cannot fool, is held to the same rules and to the
harness's: only what tilelab/part.h gives a part may be called.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..spec.assignment import Part
from .launch_checks import REFUSED_CALLS, api_name

MAX_PART_BYTES = 512 * 1024

# Libraries that would do the multiplication for the student.
_LIBRARY_WORDS = re.compile(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|cutlass|cusparse\w*|nvmath\w*)\b|\bcute::", re.I)
_LIBRARY_INCLUDE = re.compile(r"#\s*include\s*[<\"]\s*(cublas|cudnn|cutlass|cute/|cusparse|nvmath)[^>\"]*[>\"]", re.I)
_DYNAMIC_LOADING = re.compile(r"\b(dlopen|dlsym|dlmopen)\b")
_MAIN_DEFINITION = re.compile(r"\bmain\s*\([^;{]*\)\s*\{")
# A function definition whose name belongs to the CUDA runtime, driver or
# CUPTI API: name(params) { ... }. Calls are followed by ';' or an operator,
# never directly by '{'.
_CUDA_NAME = r"(cuda[A-Z]\w*|cu[A-Z]\w*|cupti[A-Z]\w*|__cuda\w*)"
_CUDA_DEFINITION = re.compile(_CUDA_NAME + r"\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:noexcept\s*)?\{")
_CUDA_SYMBOL = re.compile("^" + _CUDA_NAME + r"\b")
_FORBIDDEN_CALLS = re.compile(r"^(cublas\w*|cudnn\w*|dlopen|dlsym|dlmopen)\b")
# The harness's recorders run on CUPTI in the part's own process: a part may not touch it.
_CUPTI_CALL = re.compile(r"^(cupti\w*)\b")
# Names of namespace tilelab, mangled (_ZN7tilelab..., _ZNK7tilelab..., vtables
# and guards too): the harness is linked into the same executable, so a part
# that calls one of its functions, or defines one (an inline function's
# definition may be the one the linker keeps), reaches into the grader.
_TILELAB_MANGLED = re.compile(r"^_Z(?:T[VIST]|GV)?N[KVRO]*7tilelab(\d+)")
# What include/tilelab/part.h and exit_codes.h give a part (all inline there).
_CONTRACT_NAMES = {"exit_code_for_cuda_error", "end_process", "fail_cuda_call", "todo_reached", "exit_code_info",
                   "to_int", "kExitCodeTable", "ExitCode", "ExitCodeInfo"}


# The starter's stubs (include/tilelab/part.h): code a student has not written
# yet, which fails loudly when reached. Found in code, not in comments.
_TODO_MACRO = re.compile(r"\bTILELAB_(?:DEVICE_)?TODO\s*\(")
_TODO_WHAT = re.compile(r"\bTILELAB_(?:DEVICE_)?TODO\s*\(\s*\"([A-Za-z_]\w*):")


@dataclass(frozen=True)
class Todo:
    what: str  # the function the stub stands in, as its message names it ("launchNaive"), or ""
    line: int

    def __str__(self) -> str:
        return f"{self.what or 'a TODO'} (line {self.line})"


@dataclass
class StaticResult:
    ok: bool
    summary: str = ""
    details: str = ""
    hints: list = field(default_factory=list)
    kernels: set = field(default_factory=set)  # the __global__ functions a passing source defines
    todos: list = field(default_factory=list)  # of Todo: the starter's stubs still in the code


def strip_comments_and_strings(text: str) -> str:
    """The source with comments, string and character literals blanked out.
    Newlines are kept, so positions still map to lines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        elif c == "R" and nxt == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            # Raw string R"delim( ... )delim"
            open_paren = text.find("(", i + 2)
            delim = text[i + 2 : open_paren] if open_paren >= 0 else ""
            close = text.find(")" + delim + '"', open_paren + 1) if open_paren >= 0 else -1
            end = n if close < 0 else close + len(delim) + 2
            out.append('""' + "\n" * text[i:end].count("\n"))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = min(j + 1, n)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def kernel_names(source_text: str) -> set:
    """Names of the __global__ functions a part file defines."""
    code = strip_comments_and_strings(source_text)
    names = set()
    for m in re.finditer(r"\b__global__\b", code):
        # The name is the identifier right before the parameter list; skip
        # the argument lists of __launch_bounds__ / __cluster_dims__ on the way.
        pos = m.end()
        while True:
            paren = code.find("(", pos)
            if paren < 0:
                break
            ids = re.findall(r"[A-Za-z_]\w*", code[pos:paren])
            if ids and ids[-1] in ("__launch_bounds__", "__cluster_dims__", "__maxnreg__"):
                depth, j = 0, paren
                while j < len(code):
                    depth += {"(": 1, ")": -1}.get(code[j], 0)
                    j += 1
                    if depth == 0:
                        break
                pos = j
                continue
            if ids:
                names.add(ids[-1])
            break
    return names


def _line_of(code: str, pos: int) -> int:
    return code.count("\n", 0, pos) + 1


def missing_summary(file: str) -> str:
    """The static stage's summary when a part's file was not handed in (the reports name it as the cause)."""
    return f"{file} is missing"


def check_source(path: Path, part: Part) -> StaticResult:
    """The checks that need only the file. A function named like the CUDA
    runtime or driver API could stand in for the harness's own calls (its
    timers); a comment that mentions cuBLAS is fine."""
    name = part.file
    if path.is_symlink():
        return StaticResult(False, f"{name} is a symbolic link", hints=[f"Hand in {name} itself, not a link to it."])
    if not path.exists():
        return StaticResult(
            False,
            missing_summary(name),
            hints=[f"Hand in {name} (the file name must match exactly) with {part.launcher} in it."],
        )
    if not path.is_file():
        return StaticResult(False, f"{name} is not a regular file", hints=[f"Hand in {name} as a plain file."])
    size = path.stat().st_size
    if size > MAX_PART_BYTES:
        return StaticResult(
            False,
            f"{name} is {size / 2**20:.1f} MB; a part file must be under {MAX_PART_BYTES // 1024} KB",
            hints=["Hand in only your source code for this part."],
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return StaticResult(
            False,
            f"{name} is not a text file (it holds binary data)",
            hints=[f"Hand in the CUDA source {name}, not a compiled or archived file."],
        )
    code = strip_comments_and_strings(text)

    problems = []
    for m in _LIBRARY_INCLUDE.finditer(code):
        problems.append((m.start(), f"includes {m.group(1)}: library GEMM routines are not allowed"))
    for m in _LIBRARY_WORDS.finditer(code):
        problems.append((m.start(), f"uses {m.group(0)}: library GEMM routines are not allowed"))
    for m in _DYNAMIC_LOADING.finditer(code):
        problems.append((m.start(), f"calls {m.group(1)}: loading libraries at run time is not allowed"))
    for m in _MAIN_DEFINITION.finditer(code):
        problems.append((m.start(), "defines main(): the harness provides main, a part file must not"))
    for m in _CUDA_DEFINITION.finditer(code):
        problems.append(
            (m.start(), f"defines {m.group(1)}(): a part file may not define CUDA runtime or driver functions")
        )
    if problems:
        problems.sort()
        first = problems[0][1]
        listed = "\n".join(f"{name}:{_line_of(code, pos)}: {what}" for pos, what in problems[:10])
        return StaticResult(
            False,
            f"{name} {first}",
            details=listed,
            hints=["Write the kernel yourself with plain CUDA: the point of the part is the technique, not a library."]
            if "library" in first
            else [],
        )
    if not re.search(r"\b" + re.escape(part.launcher) + r"\b", code):
        return StaticResult(
            False,
            f"{name} does not define {part.launcher}",
            hints=[f"The launcher must be declared exactly as: {part.declaration}"],
        )
    kernels = kernel_names(text)
    if not kernels:
        return StaticResult(
            False,
            f"{name} defines no __global__ kernel",
            hints=["The work must run in a kernel of your own, launched by the launcher."],
        )
    summary = f"{name}: {size} bytes, kernels: {', '.join(sorted(kernels))}"
    todos = todo_stubs(text, code)
    if todos:
        summary += "; not written yet: " + ", ".join(map(str, todos))
    return StaticResult(True, summary, kernels=kernels, todos=todos)


def todo_stubs(text: str, code: str) -> list:
    """The TODO stubs left in a part file (`code`: its text without comments
    and strings, line for line). Reaching one fails the run, so they tell a
    student without a GPU what is still to write."""
    lines = text.splitlines()
    found = []
    for m in _TODO_MACRO.finditer(code):
        line = _line_of(code, m.start())
        what = _TODO_WHAT.search(lines[line - 1]) if line <= len(lines) else None
        found.append(Todo(what.group(1) if what else "", line))
    return found


def audit_object(object_file: Path) -> StaticResult:
    """Checks the compiled part's symbol table (nm): what it defines and what
    it calls. It must not define `main` or CUDA-named functions, nor call
    cuBLAS/cuDNN, dlopen, CUPTI or the CUDA functions that give kernels host
    memory (launch_checks.REFUSED_CALLS, refused at run time too), nor call
    or define anything of namespace tilelab beyond tilelab/part.h."""
    try:
        defined = _nm(object_file, "--defined-only")
        undefined = _nm(object_file, "--undefined-only")
    except (OSError, subprocess.SubprocessError) as e:
        return StaticResult(False, f"cannot read the symbols of the compiled part: {e}")
    problems = []
    for symbol in _harness_names(object_file):
        problems.append(f"uses tilelab::{symbol}, which belongs to the harness: a part may call only what "
                        "tilelab/part.h gives it")
    for symbol in defined:
        if symbol == "main" or symbol.startswith("main("):
            problems.append("defines main(): the harness provides main")
        elif _CUDA_SYMBOL.match(symbol):
            problems.append(f"defines {symbol}: a part file may not define CUDA runtime or driver functions")
    for symbol in undefined:
        m = _FORBIDDEN_CALLS.match(symbol)
        if m:
            problems.append(f"calls {m.group(1)}: library GEMM routines and run-time loading are not allowed")
        elif _CUPTI_CALL.match(symbol):
            problems.append(f"calls {_CUPTI_CALL.match(symbol).group(1)}: CUPTI is the grader's, for recording "
                            "what the launcher does")
        elif api_name(symbol) in REFUSED_CALLS:
            name = api_name(symbol)
            problems.append(f"calls {name} ({REFUSED_CALLS[name]}): the work must be done by kernels, in "
                            "device memory")
    if problems:
        return StaticResult(False, f"the compiled part {problems[0]}", details="\n".join(sorted(set(problems))))
    return StaticResult(True, "the compiled part defines and calls nothing it should not")


def _harness_names(object_file: Path) -> list:
    """The names of namespace tilelab that the object defines or calls,
    other than the contract's own (_CONTRACT_NAMES)."""
    found = set()
    for mangled in _nm(object_file, "--extern-only", demangle=False):
        m = _TILELAB_MANGLED.match(mangled)
        if m:
            name = mangled[m.end():m.end() + int(m.group(1))]
            if name not in _CONTRACT_NAMES:
                found.add(name)
    return sorted(found)


def _nm(object_file: Path, which: str, demangle: bool = True) -> list:
    # Global symbols only (-g): nvcc's own registration code is local.
    proc = subprocess.run(
        ["nm", "-g", *(["-C"] if demangle else []), which, str(object_file)], capture_output=True, text=True,
        timeout=60, check=True
    )
    names = []
    for line in proc.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            names.append(parts[2])
        elif len(parts) == 2:  # undefined symbols have no address
            names.append(parts[1])
    return names
