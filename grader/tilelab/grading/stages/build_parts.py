"""The first two stages: the static checks of each part file, then the
build of each part that passed them, for the probed GPU."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional

from ..build import RecipeError, SubmissionBuild
from ..build_cache import CHECK_CACHE_DIR, CHECK_POLICY, GRADE_POLICY, PART_CACHE_DIR, BuildCache
from ..context import Grading, private_name
from ..sanitizer import sanitizes_together
from ..static_checks import check_source, missing_summary
from .speed import times_together


def check_sources(g: Grading, states: list) -> None:
    """The static stage: each part file read and checked before anything is compiled."""
    for s in states:
        found = check_source(s.source, s.part)
        # A file that is missing here may have been handed in deeper or misnamed: say which file was expected.
        hints = found.hints + (g.misplaced_hints(s.part.file) if found.summary == missing_summary(s.part.file) else [])
        s.set("static", "passed" if found.ok else "failed", found.summary, found.details, hints=hints)
        if found.ok:
            s.kernels = found.kernels
            s.result.not_written = [str(t) for t in found.todos]
        else:
            s.skip_from("build", "not run: the static checks failed")


def build_parts(g: Grading, states: list, probed_capability: Callable[[], Optional[str]]) -> Optional[str]:
    """Builds every part that passed its static checks, for the probed GPU
    alone when its compute capability is known (PartRecipe.for_device). A
    part file built before with the same bytes for the same GPU (by this
    student or another) is not compiled again (build_cache.py). Returns the
    capability built for (None: every GPU the tree builds for)."""
    todo = [s for s in states if s.stage("static").status == "passed"]
    if not todo:
        return None
    opt = g.options
    capability = probed_capability()
    cache = (BuildCache(opt.root, opt.build_dir, opt.build_dir / CHECK_CACHE_DIR, CHECK_POLICY) if opt.mode == "check"
             else BuildCache(opt.root, opt.build_dir, opt.build_dir / PART_CACHE_DIR, GRADE_POLICY))
    keys = {s.part.id: cache.key(s.part, s.source, capability) for s in todo}
    cached_dir = g.work / private_name("cached")
    # Shared objects too, for the parts' runs in one process; no GPU known here: nothing would load them.
    together = (sanitizes_together(g) or times_together(g)) and capability is not None
    for s in list(todo):
        s.binary = cache.find(s.part, keys[s.part.id], cached_dir / s.part.id)
        if s.binary is not None:
            s.library = cache.find_library(s.part, keys[s.part.id], cached_dir / f"lib{s.part.id}.so")
            if together and s.library is None:
                s.binary = None  # kept by a grading that linked no shared object: built again, with one
                continue
            # In a grading the summary is the same as for a fresh build: it
            # must not tell a student that someone handed in the same file.
            s.set("build", "passed", f"{s.part.file} is unchanged since it was last built: not compiled again"
                  if opt.mode == "check" else f"{s.part.file} compiled and linked")
            todo.remove(s)
    if cached_dir.exists():
        cached_dir.chmod(0o711)
    if not todo:
        return capability
    submission_dir = g.work / private_name("submission")
    submission_dir.mkdir(parents=True, exist_ok=True)
    submission_dir.chmod(0o711)
    builder = SubmissionBuild(opt.build_dir, submission_dir, sandbox=g.sandbox,
                              libraries=g.early is not None or together)
    builder.copy_sources([s.source for s in todo])
    limit = g.limits["build"]
    try:
        builder.prepare([s.part for s in todo], capability)
    except RecipeError as e:
        for s in todo:
            s.set("build", "error", "the grader could not prepare the build (not your fault)", str(e))
            s.skip_from("correctness", "not run: the build could not be prepared")
        return capability
    if g.early is not None:
        for s in todo:
            if builder.links_library(s.part):
                g.early.begin(s, builder.library_path(s.part))

    def build(s):
        b = builder.build_part(s.part, limit)
        if g.early is not None:
            g.early.built(s, b.ok and b.library is not None)
        return b

    with ThreadPoolExecutor(max_workers=min(len(todo), opt.jobs)) as pool:
        builds = list(pool.map(build, todo))
    builder.seal()
    for s, b in zip(todo, builds):
        if b.failed_step == "audit":
            s.set("static", "failed", b.summary, b.details)
            s.set("build", "not_run", "not run: the compiled part failed the static checks")
        elif not b.ok:
            hints = [f"The launcher must be declared exactly as: {s.part.declaration}"] if b.failed_step == "link" else []
            s.set("build", "failed", b.summary, b.details, b.seconds, hints)
        else:
            s.set("build", "passed", b.summary, "", b.seconds)
            s.binary, s.library = b.binary, b.library
            cache.keep(s.part, keys[s.part.id], b.binary, b.library)
        if s.binary is None:
            s.skip_from("correctness", "not run: the part did not build")
    return capability
