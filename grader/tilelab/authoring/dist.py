"""The two bundles made from this one source tree.

student     a tarball a student unpacks and builds on a GPU machine: starter,
            harness, grader, public cases and handout; no solution, hidden
            case or key.
autograder  the Gradescope zip: its entry points, the grader, every case, the
            key and the references compiled; no solution source.
Each is made from a list of what belongs in it, so a new file leaks into neither.
With --service URL the student bundle holds the grading service's URL
(tilelab-service.yaml: `check --remote`; never a token) and the autograder
zip its URL and the course token (service.json, mode 0600: setup.sh keeps it
root's), which its entry points forward to where they have no GPU.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
import urllib.parse
import zipfile
from pathlib import Path
from typing import Callable, Optional

import yaml

from ..errors import TilelabError
from ..spec.assignment import load_assignment
from ..spec.public import public_assignment_text
from ..spec.reference_gpu import REFERENCE_GPU_PATH
from ..system.paths import (ANSWER_KEY_FILE, ASSIGNMENT_FILE, BUNDLED_ANSWER_KEY_FILE, COMPILED_REFERENCES_DIR,
                            STARTER_DIR)
from .compiled_references import ReferenceBuildError, compile_references
from .starter import StarterError, starter_files

# Project files that make up the build and the grader, shared by both bundles.
BUILD_FILES = ("CMakeLists.txt", "cmake", "include", "grader/harness", "grader/roofline", "grader/tilelab",
               "grader/pyproject.toml", "scripts/python-env", "scripts/build-deps", "starter")
# bootstrap calls secure-checkout: run as root (a container, a notebook), the
# grader needs the unprivileged user that runs student code.
# reference-gpu.yaml: the grading GPU's published figures, from which `tilelab
# check` estimates the speed targets on a student's GPU.
STUDENT_FILES = BUILD_FILES + ("scripts/bootstrap", "scripts/secure-checkout", "docs/harness.md",
                               "docs/colab.ipynb", REFERENCE_GPU_PATH)
AUTOGRADER_ENTRY_POINTS = ("docker/setup.sh", "docker/run_autograder", "docker/run_prairielearn")
# The grading service's settings in each bundle (operations/service/forward.py reads them).
STUDENT_SERVICE_FILE, AUTOGRADER_SERVICE_FILE = "tilelab-service.yaml", "service.json"
TOKEN_ENV, DEADLINE_ENV = "TILELAB_SERVICE_TOKEN", "TILELAB_SERVICE_DEADLINE_S"
_SKIP_NAMES = ("__pycache__", ".pytest_cache")
_SKIP_SUFFIXES = (".pyc", ".egg-info")
# Files are stored with this time, so two builds of the same tree give the same bundle.
_FIXED_MTIME = 1_700_000_000


class DistError(TilelabError):
    """A bundle could not be made, or would break one of its promises."""


def bundle_folder(assignment) -> str:
    """The folder the student bundle unpacks into: the assignment's name alone,
    which says what it is (a tool's prefix would double "tilelab_matmul")."""
    return assignment.name


def bundle_name(assignment, bundle: str) -> str:
    """The file name of the "student" or "autograder" bundle: NAME-student.tar.gz, NAME-autograder.zip."""
    return f"{bundle_folder(assignment)}-" + {"student": "student.tar.gz", "autograder": "autograder.zip"}[bundle]


def _files(root: Path, entries: tuple) -> list:
    """(path in the project, absolute path) of every file under the entries, sorted."""
    out = []
    for entry in entries:
        path = root / entry
        if not path.exists():
            raise DistError(f"{entry} is missing from {root}")
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in candidates:
            rel = p.relative_to(root)
            if any(part in _SKIP_NAMES or part.endswith(_SKIP_SUFFIXES) for part in rel.parts):
                continue
            if p.is_symlink():
                raise DistError(f"{rel} is a symbolic link; bundles hold plain files only")
            out.append((rel.as_posix(), p))
    return out


def refuse_edited_starter(root: Path, assignment) -> None:
    """Raises DistError unless starter/ holds exactly what `tilelab starter`
    generates: a course checkout is also where staff try the lab, and a part
    solved there would otherwise ship to every student."""
    starter_dir = root / STARTER_DIR
    try:
        files = starter_files(assignment, root / "solutions", starter_dir)
    except StarterError as e:
        raise DistError(str(e)) from None
    problems = [f"{STARTER_DIR}/{f.path.name} ({'edited' if f.path.exists() else 'missing'})"
                for f in files if not f.up_to_date]
    generated = {f.path for f in files}
    problems += [f"{rel} (not generated)" for rel, path in _files(root, (STARTER_DIR,)) if path not in generated]
    if problems:
        raise DistError(
            f"{STARTER_DIR}/ differs from what `tilelab starter` generates from solutions/, and the bundle would "
            f"hand it out as it is: {', '.join(problems)}. Copy any work you want to keep elsewhere, run "
            "`tilelab starter` to regenerate starter/, and build the bundle again.")


def _service_url(url: str) -> str:
    url = url.strip().rstrip("/")
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise DistError(f"--service {url!r} is not a URL: give the grading service's, as http(s)://HOST[:PORT]")
    return url


def _service_json(url: str, token_file: Optional[str]) -> bytes:
    """The autograder's service.json: the URL, the course token (--service-token-file, else
    $TILELAB_SERVICE_TOKEN) and, from $TILELAB_SERVICE_DEADLINE_S, how long a forwarder waits."""
    try:
        token = Path(token_file).read_text().strip() if token_file else os.environ.get(TOKEN_ENV, "").strip()
    except OSError as e:
        raise DistError(f"--service-token-file {token_file}: {e.strerror}") from None
    if not token:
        raise DistError(f"--service needs the course token (`tilelab token course`): give --service-token-file "
                        f"FILE or set {TOKEN_ENV}")
    settings = {"url": _service_url(url), "token": token}
    deadline = os.environ.get(DEADLINE_ENV)
    if deadline:
        if not deadline.isdigit() or int(deadline) < 1:
            raise DistError(f"{DEADLINE_ENV}={deadline!r}: give the seconds a forwarder may wait, a whole number")
        settings["deadline_s"] = int(deadline)
    return (json.dumps(settings, indent=2) + "\n").encode()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = _FIXED_MTIME
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def student_bundle(root: Path, out: Path, handout_dir: Path, service_url: Optional[str] = None,
                   service_token_file: Optional[str] = None) -> Path:
    """Writes the student tarball to `out` (a .tar.gz); the handout files come from handout_dir.
    `service_url`: the grading service's, in tilelab-service.yaml (students add their own tokens)."""
    if service_token_file:
        raise DistError("a student bundle never holds a token (each student uses their own, TILELAB_SERVICE_TOKEN): "
                        "drop --service-token-file")
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    refuse_edited_starter(root, assignment)
    prefix = bundle_folder(assignment)
    handouts = sorted(p for p in handout_dir.iterdir() if p.is_file() and p.name.startswith("handout."))
    if not handouts:
        raise DistError(f"no handout in {handout_dir} (run `tilelab handout` first)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        for rel, path in _files(root, STUDENT_FILES):
            _add_bytes(tar, f"{prefix}/{rel}", path.read_bytes(), _mode(path))
        _add_bytes(tar, f"{prefix}/{ASSIGNMENT_FILE}", public_assignment_text(root).encode())
        _add_bytes(tar, f"{prefix}/README.md", (root / "docs" / "student-README.md").read_bytes())
        for h in handouts:
            _add_bytes(tar, f"{prefix}/handout/{h.name}", h.read_bytes())
        if service_url:
            _add_bytes(tar, f"{prefix}/{STUDENT_SERVICE_FILE}",
                       f"# The course's grading service, for `tilelab check --remote`. Your token goes in the\n"
                       f"# environment ({TOKEN_ENV}=...) or here (token: ...); keep it to yourself.\n"
                       f"url: {json.dumps(_service_url(service_url))}\n".encode())
    check_student_bundle(out)
    return out


def autograder_bundle(root: Path, out: Path, objects_tree: Optional[Path] = None,
                      progress: Optional[Callable[[str], None]] = None, service_url: Optional[str] = None,
                      service_token_file: Optional[str] = None) -> Path:
    """Writes the Gradescope autograder zip to `out`. The references are
    compiled in `objects_tree` (default ROOT/build/dist/reference-objects),
    which is kept for the next bundle; `progress` hears how that goes.
    `service_url`: the grading service its entry points forward to (_service_json)."""
    if service_token_file and not service_url:
        raise DistError("--service-token-file without --service: give the grading service's URL too")
    service = _service_json(service_url, service_token_file) if service_url else None
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    refuse_edited_starter(root, assignment)
    if not (root / ANSWER_KEY_FILE).exists():
        raise DistError(f"{ANSWER_KEY_FILE} is missing: the autograder needs the answer key")
    try:
        objects = compile_references(root, assignment, objects_tree or root / "build" / "dist" / "reference-objects",
                                     progress)
    except ReferenceBuildError as e:
        raise DistError(str(e)) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:

        def add(name: str, data: bytes, mode: int) -> None:
            info = zipfile.ZipInfo(name, date_time=time.gmtime(_FIXED_MTIME)[:6])
            info.external_attr = (0o100000 | mode) << 16  # regular file with these permissions
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)

        # Gradescope wants both entry points at the root of the zip.
        for entry in AUTOGRADER_ENTRY_POINTS:
            add(Path(entry).name, (root / entry).read_bytes(), 0o755)
        for rel, path in _files(root, BUILD_FILES):
            add(rel, path.read_bytes(), _mode(path))
        add(ASSIGNMENT_FILE, (root / ASSIGNMENT_FILE).read_bytes(), 0o644)
        add(BUNDLED_ANSWER_KEY_FILE, (root / ANSWER_KEY_FILE).read_bytes(), 0o644)
        for part_id, path in objects.items():
            add(f"{COMPILED_REFERENCES_DIR}/{part_id}.o", path.read_bytes(), 0o644)
        if service is not None:
            add(AUTOGRADER_SERVICE_FILE, service, 0o600)  # the course token: root's alone (setup.sh)
    check_autograder_bundle(out, [p.id for p in assignment.parts])
    return out


def _mode(path: Path) -> int:
    return 0o755 if path.stat().st_mode & 0o111 else 0o644


def _holds_solution_region(name: str, read: Callable[[], bytes]) -> bool:
    # CUDA sources only: the grader's own code names the marker.
    return name.endswith((".cu", ".cuh")) and b"BEGIN SOLUTION" in read()


def check_student_bundle(tarball: Path) -> None:
    """Raises DistError if the student tarball holds a solution, a hidden case or the key."""
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        for name in names:
            if any(f"/{d}/" in f"/{name}" for d in ("solutions", "key", COMPILED_REFERENCES_DIR)):
                raise DistError(f"student bundle holds {name}")
            if name.endswith(".o"):
                raise DistError(f"student bundle holds compiled code: {name}")
            if name.endswith("/" + AUTOGRADER_SERVICE_FILE):
                raise DistError(f"student bundle holds the autograder's service settings: {name}")
        for member in tar.getmembers():
            if member.isfile() and _holds_solution_region(member.name, lambda: tar.extractfile(member).read()):
                raise DistError(f"student bundle: {member.name} holds a solution region")
        shipped = yaml.safe_load(tar.extractfile(next(n for n in names if n.endswith("/" + ASSIGNMENT_FILE))).read())
        service = next((n for n in names if n.endswith("/" + STUDENT_SERVICE_FILE)), None)
        if service and "token" in (yaml.safe_load(tar.extractfile(service).read()) or {}):
            raise DistError(f"student bundle: {service} holds a token")
    for part in shipped["parts"]:
        if part["cases"]["hidden"]:
            raise DistError(f"student bundle: part {part['id']} lists hidden cases")


def check_autograder_bundle(zip_path: Path, part_ids: list) -> None:
    """Raises DistError if the autograder zip lacks its entry points, key or
    compiled references, or holds a solution source."""
    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())
        references = [f"{COMPILED_REFERENCES_DIR}/{p}.o" for p in part_ids]
        for needed in ("setup.sh", "run_autograder", BUNDLED_ANSWER_KEY_FILE, ASSIGNMENT_FILE, *references):
            if needed not in names:
                raise DistError(f"autograder zip lacks {needed}")
        if AUTOGRADER_SERVICE_FILE in names and (z.getinfo(AUTOGRADER_SERVICE_FILE).external_attr >> 16) & 0o077:
            raise DistError(f"autograder zip: {AUTOGRADER_SERVICE_FILE} (the course token) is open to other users")
        for name in names:
            if name.startswith("solutions/"):
                raise DistError(f"autograder zip holds {name}")
            if _holds_solution_region(name, lambda: z.read(name)):
                raise DistError(f"autograder zip: {name} holds a solution region")
