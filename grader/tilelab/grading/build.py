"""Building a submission, each part on its own.

The hand-in's part files (only those the assignment names) are copied into a
fresh directory and built like a compiler builds, not a project: with the
exact commands the prebuilt tree compiles and links that part's starter with
(PartRecipe), no CMake per hand-in, all parts at once. A compile error, a
forbidden symbol (the object's audit) and a link error (most often a launcher
with the wrong signature) are three messages, each costing that part only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import TilelabError
from ..spec.assignment import Part
from ..system import process
from .static_checks import audit_object

# Lines of build-tool chatter around the compiler's own messages.
_CHATTER = re.compile(r"^(\[\s*\d+%\]|g?make(\[\d+\])?:|-- |Scanning dependencies|Consolidate compiler generated)")
# A bound on what is kept, not what is shown: the reports decide how much to show.
MAX_KEPT_LINES = 400


@dataclass
class PartBuild:
    failed_step: Optional[str]  # "compile", "audit" or "link"; None when it built
    summary: str
    details: str
    binary: Optional[Path]
    seconds: float
    library: Optional[Path] = None  # the part linked as a shared object too, where the build was asked for it

    @property
    def ok(self) -> bool:
        return self.failed_step is None


def compiler_messages(log: str, max_lines: int = MAX_KEPT_LINES) -> str:
    """The compiler's diagnostics from a build log, without make's progress lines."""
    lines = [line for line in log.splitlines() if line.strip() and not _CHATTER.match(line)]
    return "\n".join(process.clip_lines(lines, max_lines))


class RecipeError(TilelabError):
    """The prebuilt tree does not say how it builds a part (not the student's fault)."""


@dataclass(frozen=True)
class PartRecipe:
    """How the prebuilt tree builds one part: the exact compile command of its
    starter's part file and the link command of its starter's executable
    (CMake's compile_commands.json and link.txt). A hand-in's part is built
    with the same two commands, its own file and object swapped in: the same
    compiler, flags and architectures, and the part's `part_main` object and
    harness libraries reused as they are. No CMake runs per hand-in."""

    compile_argv: tuple  # with {source} and {object} placeholders
    link_argv: tuple  # with {object} and {binary} placeholders
    # The link of the part's shared object (tilelab_add_part LIBRARY), with {object} and {binary}
    # placeholders; empty where the tree builds none.
    library_argv: tuple = ()

    def compile_command(self, source: Path, obj: Path) -> list:
        return [str(source) if a == "{source}" else str(obj) if a == "{object}" else a for a in self.compile_argv]

    def link_command(self, obj: Path, binary: Path) -> list:
        return _filled(self.link_argv, obj, binary)

    def library_command(self, obj: Path, library: Path) -> list:
        return _filled(self.library_argv, obj, library)

    def for_device(self, compute_capability: Optional[str]) -> "PartRecipe":
        """The recipe narrowed to the one GPU the part will run on: of the
        tree's --generate-code targets (75, 80, 90 and PTX by default), only
        the machine code the driver would pick for a GPU of that compute
        capability ("9.0"): the newest of the same major version and no newer
        minor one (an 8.6 GPU runs sm_80 code). nvcc then makes one image
        instead of four, in much less time per part file (measured:
        docs/measurements-archive.md, "Fast feedback, continued: fewer waits
        on the critical path"). Unchanged when the capability is unknown or
        no image fits it (the driver then compiles the PTX)."""
        found = re.fullmatch(r"(\d+)\.(\d+)", compute_capability or "")
        if found is None:
            return self
        major, minor = int(found.group(1)), int(found.group(2))
        targets = {}  # argument -> (major, minor, arch) of the machine code it makes that this GPU runs
        for a in self.compile_argv:
            spec = re.fullmatch(rf"{_TARGET}arch=(compute_\d+),code=\[?([\w,]+?)\]?", a)
            for code in spec.group(2).split(",") if spec else []:
                sm = re.fullmatch(r"sm_(\d+)(\d)", code)
                if sm and int(sm.group(1)) == major and int(sm.group(2)) <= minor:
                    targets[a] = max(targets.get(a, (0, 0, "")), (major, int(sm.group(2)), spec.group(1)))
        if not targets:
            return self
        own = max(targets, key=targets.get)
        _, own_minor, arch = targets[own]
        narrowed = [a for a in self.compile_argv if not a.startswith(_TARGET) or a == own]
        narrowed[narrowed.index(own)] = f"{_TARGET}arch={arch},code=[sm_{major}{own_minor}]"
        return PartRecipe(tuple(narrowed), self.link_argv, self.library_argv)


def _filled(argv: tuple, obj: Path, output: Path) -> list:
    return [str(obj) if a == "{object}" else str(output) if a == "{binary}" else a for a in argv]


# How CMake writes each of CMAKE_CUDA_ARCHITECTURES in a compile command.
_TARGET = "--generate-code="


def _absolute(args: list, directory: Path) -> list:
    """The command with each path relative to the build directory made absolute, so it runs from anywhere."""
    out = []
    for a in args:
        if not a.startswith("-") and not os.path.isabs(a) and (directory / a).exists():
            a = str(directory / a)
        out.append(a)
    return out


def _generator_advice(prebuilt: Path) -> str:
    """Why a tree may lack link.txt: it was configured for another generator than Make."""
    try:
        cache = (prebuilt / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return ""
    found = re.search(r"^CMAKE_GENERATOR:INTERNAL=(.*)$", cache, re.M)
    if found and "Makefiles" not in found.group(1):
        return (f" (it was configured with the {found.group(1)} generator; the grader reads the link commands "
                f"of a Makefile tree: configure it with -G \"Unix Makefiles\")")
    return ""


def load_recipes(prebuilt: Path, parts: list, starter_set: str = "starter",
                 compute_capability: Optional[str] = None) -> dict:
    """Each part's PartRecipe, read from the prebuilt tree (RecipeError when it
    lacks one), for the GPU of that compute capability alone when it is
    given (PartRecipe.for_device)."""
    prebuilt = Path(prebuilt).resolve()  # the commands run from the hand-in's own folder
    try:
        commands = json.loads((prebuilt / "compile_commands.json").read_text())
    except (OSError, ValueError) as e:
        raise RecipeError(f"{prebuilt} has no readable compile_commands.json ({e}): build it again") from None
    recipes = {}
    for part in parts:
        target = f"{starter_set}_{part.id}"
        entry = next((c for c in commands if f"/{target}_object.dir/" in c.get("command", "")), None)
        link_file = prebuilt / "CMakeFiles" / f"{target}.dir" / "link.txt"
        if entry is None or not link_file.is_file():
            raise RecipeError(f"{prebuilt} does not say how it builds {target}: build it again"
                              f"{_generator_advice(prebuilt)}")
        directory = Path(entry["directory"])
        compile_args = _absolute(shlex.split(entry["command"]), directory)
        try:
            compile_args[compile_args.index("-c") + 1] = "{source}"
            compile_args[compile_args.index("-o") + 1] = "{object}"
            link_args = _link_recipe(link_file, prebuilt, target)
            library_file = prebuilt / "CMakeFiles" / f"{target}_library.dir" / "link.txt"
            library_args = _link_recipe(library_file, prebuilt, target) if library_file.is_file() else []
        except (ValueError, IndexError, StopIteration):
            raise RecipeError(f"{prebuilt}: the commands that build {target} are not in a form the grader "
                              "knows") from None
        recipes[part.id] = PartRecipe(tuple(compile_args), tuple(link_args),
                                      tuple(library_args)).for_device(compute_capability)
    return recipes


def _link_recipe(link_file: Path, prebuilt: Path, target: str) -> list:
    """A link command of the prebuilt tree with the starter's object and the
    output as placeholders ({object}, {binary})."""
    args = []
    for a in shlex.split(link_file.read_text().strip()):
        # CMake may list the objects and libraries of a shared object in response files.
        args += shlex.split((prebuilt / a[1:]).read_text()) if a.startswith("@") else [a]
    # The linker's dependency file (CMake 3.27+ with GNU ld) is Make's business, not a hand-in's.
    args = _absolute([a for a in args if not a.startswith("-Wl,--dependency-file")], prebuilt)
    starter_object = next(a for a in args if a.endswith(".o") and f"/{target}_object.dir/" in a)
    args[args.index(starter_object)] = "{object}"
    args[args.index("-o") + 1] = "{binary}"
    return args


class SubmissionBuild:
    """The build of one hand-in: each part compiled and linked like the
    prebuilt tree's own parts (PartRecipe), in a folder of its own."""

    def __init__(self, prebuilt: Path, work_dir: Path, sandbox=None, libraries: bool = False):
        """`libraries`: each part is linked as a shared object too, where the
        tree says how (PartRecipe.library_argv), and put in place at
        library_path() once it has passed the audit: a run begun while the
        part compiles waits there for it (tilelab-part-host --wait)."""
        self.prebuilt = prebuilt
        self.sources = work_dir / "sources"
        self.tree = work_dir / "build"
        self.recipes: dict = {}
        # Compiling follows the student's #include directives (and could print
        # any file they name), so it runs in the sandbox.
        self.sandbox = sandbox
        self.libraries = libraries
        self.temp: Optional[Path] = None  # the compiler's temporary files, where the tree's path cannot hold them

    def library_path(self, part: Part) -> Path:
        return self.tree / f"lib{part.id}.so"

    def links_library(self, part: Part) -> bool:
        """Whether build_part will put the part's shared object in place if it builds."""
        return self.libraries and bool(self.recipes[part.id].library_argv)

    def copy_sources(self, files: list) -> None:
        """Copies the named part files (already checked to be plain files)."""
        shutil.rmtree(self.sources, ignore_errors=True)
        self.sources.mkdir(parents=True)
        for src in files:
            shutil.copyfile(src, self.sources / src.name)
            (self.sources / src.name).chmod(0o644)
        self.sources.chmod(0o755)

    def prepare(self, parts: list, compute_capability: Optional[str] = None) -> None:
        """Reads how the prebuilt tree builds these parts (RecipeError when it
        cannot say), for the GPU of that compute capability when it is known
        (PartRecipe.for_device), and gives the build folder to the sandbox."""
        self.recipes = load_recipes(self.prebuilt, parts, compute_capability=compute_capability)
        shutil.rmtree(self.tree, ignore_errors=True)
        self.tree.mkdir(parents=True)
        if self.sandbox is not None:
            self.sandbox.own(self.tree)
        # nvcc cannot open its own temporary files in a folder whose path has a space (a student's
        # output folder under "My Drive"): the compiler's temporary files go to a folder of their own then.
        if any(c.isspace() for c in str(self.tree)) and self.temp is None:
            self.temp = Path(tempfile.mkdtemp(prefix="tilelab-nvcc-"))
            if self.sandbox is not None:
                self.sandbox.own(self.temp)

    def seal(self) -> None:
        """After the build: the tree becomes the grader's, so code run later
        (another part's harness) cannot replace a binary."""
        if self.sandbox is not None:
            self.sandbox.reclaim(self.tree)
        if self.temp is not None:
            shutil.rmtree(self.temp, ignore_errors=True)
            self.temp = None

    def build_part(self, part: Part, timeout_s: float) -> PartBuild:
        recipe = self.recipes[part.id]
        obj, binary = self.tree / f"{part.id}.o", self.tree / part.id
        compiled = self._run(recipe.compile_command(self.sources / part.file, obj), timeout_s)
        seconds = compiled.seconds
        if compiled.timed_out:
            return PartBuild("compile", f"compiling {part.file} took longer than {timeout_s:.0f} s",
                             "", None, seconds)
        if compiled.exit_code != 0 or not obj.is_file():
            return PartBuild("compile", f"{part.file} does not compile",
                             compiler_messages(compiled.output), None, seconds)
        # The symbol audit (two nm runs) runs beside the links, which run
        # nothing of the part: a part that fails the audit loses its
        # executable, and its message is the audit's.
        library = self.library_path(part) if self.links_library(part) else None
        partial = library.with_name(library.name + ".partial") if library else None
        with ThreadPoolExecutor(max_workers=2) as beside:
            linking = beside.submit(self._run, recipe.link_command(obj, binary), timeout_s)
            shared = beside.submit(self._run, recipe.library_command(obj, partial), timeout_s) if partial else None
            audit = audit_object(obj)
            linked = linking.result()
            shared_ok = shared is not None and shared.result().exit_code == 0 and partial.is_file()
        if not audit.ok:
            binary.unlink(missing_ok=True)
            return PartBuild("audit", audit.summary, audit.details, None, seconds)
        seconds += linked.seconds
        if linked.exit_code != 0 or linked.timed_out:
            return PartBuild(
                "link",
                f"{part.file} compiles but does not link: is {part.launcher} declared exactly as the contract says?",
                compiler_messages(linked.output), None, seconds,
            )
        if shared_ok:
            partial.rename(library)  # in place only now: a run waiting for it loads it at once
        return PartBuild(None, f"{part.file} compiled and linked", "", binary, seconds,
                         library if shared_ok else None)

    def _run(self, argv: list, timeout_s: float) -> process.Completed:
        # Each part is its own compiler process: a part that takes forever to
        # compile stops only itself.
        env = self.sandbox.env(self.tree) if self.sandbox is not None else dict(os.environ)
        if self.temp is not None:
            env["TMPDIR"] = str(self.temp)
        return process.run(argv, timeout_s, cwd=self.tree, env=env, sandbox=self.sandbox, background=True)
