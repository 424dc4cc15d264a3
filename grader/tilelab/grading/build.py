"""Building a submission, each part on its own.

The hand-in's part files are copied into a fresh directory (only the files
the assignment names; links are refused earlier, by the static checks) and
built by the project's own CMake in a fresh tree that links the harness
libraries of an existing build (TILELAB_PREBUILT_HARNESS), so nothing but the
parts is compiled. Each part is compiled alone, its object's symbols are
audited, then it is linked: a compile error, a forbidden symbol and a link
error (most often a launcher with the wrong signature) are three different
messages, and each costs that part only.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

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

    @property
    def ok(self) -> bool:
        return self.failed_step is None


def compiler_messages(log: str, max_lines: int = MAX_KEPT_LINES) -> str:
    """The compiler's diagnostics from a build log, without make's progress lines."""
    lines = [line for line in log.splitlines() if line.strip() and not _CHATTER.match(line)]
    return "\n".join(process.clip_lines(lines, max_lines))


def _cmake() -> str:
    """cmake's absolute path: the sandbox's bare PATH may not hold its directory
    (pip installs it into a venv). CMake then names make and nvcc by absolute
    path itself, from its cache."""
    path = shutil.which("cmake")
    if path is None:
        raise FileNotFoundError("cmake is not on PATH")
    return path


class SubmissionBuild:
    """A build tree for one hand-in."""

    def __init__(self, root: Path, prebuilt: Path, work_dir: Path, sandbox=None, assignment_file: Optional[Path] = None):
        self.root = root
        self.prebuilt = prebuilt
        self.sources = work_dir / "sources"
        self.tree = work_dir / "build"
        self.configure_output = ""
        # Compiling follows the student's #include directives (and could print
        # any file they name), so it runs in the sandbox; the tree is also
        # configured against an assignment file without hidden cases.
        self.sandbox = sandbox
        self.assignment_file = assignment_file

    def copy_sources(self, files: list) -> None:
        """Copies the named part files (already checked to be plain files)."""
        shutil.rmtree(self.sources, ignore_errors=True)
        self.sources.mkdir(parents=True)
        for src in files:
            shutil.copyfile(src, self.sources / src.name)
            (self.sources / src.name).chmod(0o644)
        self.sources.chmod(0o755)

    def configure(self, timeout_s: float) -> bool:
        # Configuring runs no student code (CMake only checks which part files
        # exist), so the grader does it; the tree then becomes the sandbox's.
        shutil.rmtree(self.tree, ignore_errors=True)
        assignment = [f"-DTILELAB_ASSIGNMENT={self.assignment_file}"] if self.assignment_file else []
        done = process.run(
            [
                _cmake(), "-S", self.root, "-B", self.tree,
                f"-DTILELAB_SUBMISSION_DIR={self.sources}",
                f"-DTILELAB_PREBUILT_HARNESS={self.prebuilt}",
                "-DCMAKE_BUILD_TYPE=Release",
                *assignment,
                *self._inherited_cache_settings(),
            ],
            timeout_s,
        )
        self.configure_output = done.output
        if done.exit_code == 0 and self.sandbox is not None:
            self.sandbox.own(self.tree)
        return done.exit_code == 0

    def seal(self) -> None:
        """After the build: the tree becomes the grader's, so code run later
        (another part's harness) cannot replace a binary."""
        if self.sandbox is not None:
            self.sandbox.reclaim(self.tree)

    def _inherited_cache_settings(self) -> list:
        """The prebuilt tree's compiler and architectures, so the parts are built
        exactly like the harness they link with."""
        wanted = ("CMAKE_CUDA_COMPILER", "CMAKE_CUDA_ARCHITECTURES", "Python3_EXECUTABLE")
        settings = []
        cache = self.prebuilt / "CMakeCache.txt"
        if cache.exists():
            for line in cache.read_text(errors="replace").splitlines():
                m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line)
                if m and m.group(1) in wanted and m.group(2):
                    settings.append(f"-D{m.group(1)}={m.group(2)}")
        return settings

    def build_part(self, part: Part, timeout_s: float) -> PartBuild:
        target = f"submission_{part.id}"
        compiled = self._build_target(f"{target}_object", timeout_s)
        seconds = compiled.seconds
        if compiled.timed_out:
            return PartBuild("compile", f"compiling {part.file} took longer than {timeout_s:.0f} s",
                             "", None, seconds)
        if compiled.exit_code != 0:
            return PartBuild("compile", f"{part.file} does not compile",
                             compiler_messages(compiled.output), None, seconds)
        audit = audit_object(self._object_file(part))
        if not audit.ok:
            return PartBuild("audit", audit.summary, audit.details, None, seconds)
        linked = self._build_target(target, timeout_s)
        seconds += linked.seconds
        if linked.exit_code != 0 or linked.timed_out:
            return PartBuild(
                "link",
                f"{part.file} compiles but does not link: is {part.launcher} declared exactly as the contract says?",
                compiler_messages(linked.output), None, seconds,
            )
        binary = self.tree / "submission" / part.id
        return PartBuild(None, f"{part.file} compiled and linked", "", binary, seconds)

    def _build_target(self, target: str, timeout_s: float) -> process.Completed:
        # One make process per target: parallel parts do not share a job
        # server, and a part that takes forever to compile stops only itself.
        env = self.sandbox.env(self.tree) if self.sandbox is not None else dict(os.environ)
        env["MAKEFLAGS"] = ""
        return process.run([_cmake(), "--build", self.tree, "--target", target], timeout_s, env=env,
                           sandbox=self.sandbox)

    def _object_file(self, part: Part) -> Path:
        listing = self.tree / "submission" / f"{part.id}.objects"
        return Path(listing.read_text().split(";")[0].strip())
