"""Handing a hand-in to the grading service: `tilelab check --remote`, and
the platforms' entry points on a machine without a GPU.

- remote_check sends a student's part files and answers.yaml in mode check
  and shows what a local check shows: the table (outputs/check_view, from
  the service's grade.json) and report.md/report.html in --out. Its settings:
  the URL from TILELAB_SERVICE_URL or STUDENT_CONFIG at the checkout root
  (`tilelab dist student --service URL` puts it there); the student's own
  token from TILELAB_SERVICE_TOKEN or that file's `token`.
- forward (`python -m tilelab.operations.service.forward gradescope|
  prairielearn`, from docker/run_autograder and run_prairielearn when the
  autograder holds AUTOGRADER_CONFIG) grades here what needs no GPU, as
  `tilelab grade` does, so a compile error comes back at once; a hand-in
  with a part built is then graded by the service in mode grade, and its
  results.json (Gradescope) or prairielearn.json become the results.
- Whatever keeps the service from grading (unreachable, a refusal, too slow
  for the platform's limit), the results say in one line that the grader
  could not grade and that the student is not at fault: Gradescope's score
  is withheld (extra_data.tilelab.withheld), PrairieLearn's result is not
  gradable. Never a zero for the student's code.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from ...errors import TilelabError
from ...grading.answers_file import ANSWERS_FILE
from ...grading.model import GradeResult
from ...outputs.gradescope import write_results
from ...spec.assignment import load_assignment
from ...system.paths import ASSIGNMENT_FILE
from .client import FINISHED, ServiceClient, ServiceUnavailable

STUDENT_CONFIG = "tilelab-service.yaml"  # a checkout's: `url` (tilelab dist student --service), `token` (optional)
AUTOGRADER_CONFIG = "service.json"  # the autograder's source/: url, token (the course's), deadline_s; root's alone
URL_ENV, TOKEN_ENV, DEADLINE_ENV = "TILELAB_SERVICE_URL", "TILELAB_SERVICE_TOKEN", "TILELAB_SERVICE_DEADLINE_S"
CHECK_DEADLINE_S = 30 * 60
# Seconds a forwarder waits, counted from its start: the platform's limit
# less a margin to write the results (Gradescope's default limit is 40 min;
# PrairieLearn's is the question's timeout, at most 600 s, which the course
# sets as high: run_prairielearn).
DEADLINE_S = {"gradescope": 40 * 60 - 3 * 60, "prairielearn": 600 - 45}
RESULT_FILE = {"gradescope": "results.json", "prairielearn": "prairielearn.json"}
REPORTS = ("report.md", "report.html", "roofline.png")
EXIT_PASSED, EXIT_TO_FIX, EXIT_GRADER_ERROR, EXIT_NO_SERVICE = 0, 1, 2, 3
# The one line a student reads when the service did not grade: why, in a
# few words (by ServiceUnavailable.kind, or the submission's final state).
NOT_GRADED = ("Not graded: the GPU grading service {why}. This is not a problem with your work: the course staff "
              "can see why and will grade it again.")
WHY = {"unreachable": "could not be reached", "timeout": "did not answer", "server_error": "failed",
       "bad_answer": "did not answer properly", "refused": "refused the request", "deadline": "did not finish in time",
       "settings": "is not set up in this autograder", "failed": "could not grade it",
       "cancelled": "had the grading cancelled", "replaced": "graded a newer submission of yours instead"}


class ServiceSettingsError(TilelabError):
    """No service, or no token, is configured where it is looked for: the message says where to put it."""


class NotGraded(TilelabError):
    """The service finished without grading: `kind` is the submission's final state."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Settings:
    url: str
    token: str
    deadline_s: Optional[float] = None


# ---------------------------------------------------------------- settings and the hand-in


def student_settings(root: Path) -> Settings:
    config, found = root / STUDENT_CONFIG, {}
    if config.is_file():
        try:
            found = yaml.safe_load(config.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ServiceSettingsError(f"{config} cannot be read ({' '.join(str(e).split())}): fix it, or set "
                                       f"{URL_ENV}") from None
        if not isinstance(found, dict):
            raise ServiceSettingsError(f"{config} must hold `url: ...` (and may hold `token: ...`)")
    url = os.environ.get(URL_ENV) or found.get("url")
    token = os.environ.get(TOKEN_ENV) or found.get("token")
    if not url:
        raise ServiceSettingsError(f"no grading service is configured: put `url: ...` in {config} or set {URL_ENV}, "
                                   "as your course staff say")
    if not token:
        raise ServiceSettingsError(f"no token for the grading service: set {TOKEN_ENV} to the token your course "
                                   f"staff gave you (or put `token: ...` in {config})")
    return Settings(str(url), str(token))


def autograder_settings(path: Path) -> Settings:
    """The autograder's service.json; $TILELAB_SERVICE_DEADLINE_S, where set, replaces its deadline_s."""
    try:
        found = json.loads(path.read_text())
        deadline = os.environ.get(DEADLINE_ENV) or found.get("deadline_s")
        return Settings(str(found["url"]), str(found["token"]), float(deadline) if deadline else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ServiceSettingsError(f"{path} (or {DEADLINE_ENV}) cannot be used ({type(e).__name__}: {e}): build "
                                   "the autograder again with `tilelab dist autograder --service URL`") from None


def hand_in_files(folder: Path, names) -> dict:
    """name -> bytes of the named files that are regular files in `folder` (links are not followed)."""
    found = {}
    for name in names:
        path = folder / name
        if path.is_file() and not path.is_symlink():
            found[name] = path.read_bytes()
    return found


def progress_line(found: dict, doing: str) -> str:
    """"... queued at the grading service: number 2 in line, about 40 s to wait"; "" once it is finished."""
    if found.get("state") == "queued":
        position, eta = found.get("position"), found.get("eta_s")
        line = "... queued at the grading service" + (f": number {position} in line" if position else "")
        if found.get("no_worker"):
            return f"{line}; {found['no_worker']}, so it waits until the course staff start one"
        return line + (f", about {_duration(eta)} to wait" if eta and eta >= 1 else "")
    if found.get("state") == "running":
        return f"... {doing} at the grading service" + (f": {found['stage']}" if found.get("stage") else "")
    return ""


def _progress(say, doing: str):
    """on_update for ServiceClient.wait: each new state's line, through `say`."""
    return lambda found: say(progress_line(found, doing)) if progress_line(found, doing) else None


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


# ---------------------------------------------------------------- tilelab check --remote


def remote_check(root: Path, submission: Path, out: Path, part_ids: tuple, answers_only: bool) -> int:
    """Checks `submission` on the service; prints as `tilelab check` does and returns its exit code
    (EXIT_NO_SERVICE when the service cannot be used, EXIT_GRADER_ERROR when its grader failed)."""
    from ...outputs.check_view import check_passed, print_check

    assignment = load_assignment(root / ASSIGNMENT_FILE)
    names = () if answers_only else tuple(p.file for p in assignment.parts if not part_ids or p.id in part_ids)
    names += (ANSWERS_FILE,) if answers_only or not part_ids else ()
    client, found = None, {}
    try:
        settings = student_settings(root)
        client = ServiceClient(settings.url, settings.token)
        deadline = time.monotonic() + CHECK_DEADLINE_S
        found = client.submit(hand_in_files(submission, names), mode="check", deadline=deadline)
        _say(f"... sent {', '.join(n for n in names if (submission / n).is_file()) or 'nothing'} to {client.url}")
        found = client.wait(found["id"], _progress(_say, "being checked"), deadline)
        if found["state"] != "done":
            _say(f"tilelab check --remote: the grading service did not check it (it ended {found['state']}); this "
                 "is not a problem with your work: run the check again")
            return EXIT_GRADER_ERROR
        files = _fetch(client, found["id"], ("grade.json",) + REPORTS, deadline)
    except KeyboardInterrupt:
        if client is not None and found.get("id"):
            try:
                client.cancel(found["id"], time.monotonic() + 5)
            except ServiceUnavailable:
                pass
        _say("interrupted: the check at the grading service is cancelled, unless it had started")
        return 130
    except (ServiceUnavailable, ServiceSettingsError) as e:
        _say(f"tilelab check --remote: {e}{_fix(e)}")
        return EXIT_NO_SERVICE
    out.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (out / name).write_bytes(content)
    if "grade.json" not in files:
        _say(f"tilelab check --remote: the grading service at {client.url} gives no grade.json, so no table can be "
             f"shown; its report is {out / 'report.md'}")
        return EXIT_NO_SERVICE
    result = GradeResult.from_dict(json.loads(files["grade.json"]))
    # What a local check of these files shows: the parts named, the questions only without a part.
    result.parts = [p for p in result.parts if p.file in names]
    result.answers = result.answers if ANSWERS_FILE in names else None
    print_check(result, where=client.url)
    print(f"full report: {out / 'report.md'}")
    return EXIT_PASSED if check_passed(result) else EXIT_TO_FIX


def _fix(e: TilelabError) -> str:
    """The fix, where the message does not already name it."""
    if isinstance(e, ServiceSettingsError):
        return ""
    if e.kind == "refused" and e.status == 401:
        return f"; set {TOKEN_ENV} to the token your course staff gave you"
    if e.kind == "refused" and e.retry_after:
        return ""  # the service's message says when to try again
    if e.kind == "refused":
        return "; fix what it names and run the check again"
    return (f"; check the URL ({STUDENT_CONFIG} or {URL_ENV}) and your network, try again later, or check on a "
            "machine with a GPU")


def _fetch(client: ServiceClient, submission_id: str, names: tuple, deadline: float) -> dict:
    """name -> bytes of the results the service has (a file it does not have is left out)."""
    found = {}
    for name in names:
        try:
            found[name] = client.result(submission_id, name, deadline)
        except ServiceUnavailable as e:
            if e.status != 404:
                raise
    return found


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the platforms' forwarders


def forward(platform: str, root: Path, build: Path, answer_key: Optional[Path], submission: Path, out: Path,
            service_file: Path, metadata: Optional[Path]) -> int:
    """Grades here (static checks, build; all of it where there is a GPU);
    where a part built and there is no GPU, has the service grade it and
    writes its results. Returns the exit code of `tilelab grade`."""
    from ...grading import gpu_ceilings
    from ...grading.options import GradeOptions
    from ...outputs import causes
    from ...system import warmup
    from ...system.paths import tool_path
    from ..grading_run import EXIT_GRADED, Outputs, run_grading

    started = time.monotonic()
    warmup.leave_objects_to_exit()
    gpu_ceilings.probe_early(tool_path(build, gpu_ceilings.TOOL_NAME))
    options = GradeOptions.for_tree(root, build, out, answer_key=answer_key)
    outcome = run_grading(submission, options, Outputs(results=platform), progress=lambda m: print(f"... {m}"),
                          echo=print)
    # Graded in full here: on a GPU, or with nothing built that a GPU would run (a compile error).
    if outcome.code != EXIT_GRADED or not causes.gpu_withheld(outcome.result):
        return outcome.code
    results = out / "results.json"
    assignment = load_assignment(root / ASSIGNMENT_FILE)
    files = hand_in_files(submission, [p.file for p in assignment.parts] + [ANSWERS_FILE])
    try:
        settings = autograder_settings(service_file)
        deadline = started + (settings.deadline_s or DEADLINE_S[platform])
        student, key = identity(platform, metadata, files)
        client = ServiceClient(settings.url, settings.token)
        print(f"no GPU here: the grading service at {client.url} grades the rest (student {student})")
        found = submit_again_after_failure(client, files, student, key, deadline)
        found = client.wait(found["id"], _progress(lambda line: print(line, flush=True), "being graded"), deadline)
        if found["state"] != "done":
            raise NotGraded(f"submission {found['id']} ended {found['state']}"
                            + (f": {found['message']}" if found.get("message") else ""), found["state"])
        fetched = _fetch(client, found["id"], (RESULT_FILE[platform], "grade.json") + REPORTS, deadline)
        doc = _checked(platform, fetched.get(RESULT_FILE[platform]), found["id"])
    except (ServiceUnavailable, ServiceSettingsError, NotGraded) as e:
        kind = "settings" if isinstance(e, ServiceSettingsError) else e.kind
        withheld = (_withheld_gradescope if platform == "gradescope" else _withheld_prairielearn)(
            json.loads(results.read_text()), NOT_GRADED.format(why=WHY.get(kind, WHY["failed"])), str(e))
        write_results(withheld, results)
        print(f"not graded by the grading service ({e}); {results} says so, and that the student is not at fault")
        return EXIT_GRADER_ERROR
    for name in ("grade.json",) + REPORTS:  # the service's grading replaces this one's, file for file
        if name in fetched:
            (out / name).write_bytes(fetched[name])
    write_results(doc, results)
    print(f"graded by the grading service (submission {found['id']}); wrote {results}")
    return EXIT_GRADED


def submit_again_after_failure(client: ServiceClient, files: dict, student: str, key: str, deadline: float) -> dict:
    """Submits in mode grade under `key`: a retry of the same platform
    submission (a network error, the platform running it again) gets the
    same job. A job of that key that ended without grading (failed,
    cancelled, replaced) is not an answer: the next key (KEY#2, ...) is tried."""
    for attempt in range(1, 6):
        found = client.submit(files, mode="grade", student=student,
                              idempotency_key=key if attempt == 1 else f"{key}#{attempt}", deadline=deadline)
        if found.get("state") not in FINISHED or found.get("state") == "done":
            return found
    return found


def identity(platform: str, metadata: Optional[Path], files: dict) -> tuple:
    """(the student's id, the idempotency key) from the platform's metadata:
    Gradescope's submission_metadata.json (users[0].email, id); PrairieLearn's
    data.json, which names no user unless the course put one there (user_uid,
    params.student), and no submission: the key is its hash and the files'."""
    digest = hashlib.sha256(b"".join(hashlib.sha256(n.encode()).digest() + hashlib.sha256(c).digest()
                                     for n, c in sorted(files.items()))).hexdigest()
    raw = b""
    if metadata is not None:
        try:
            raw = metadata.read_bytes()
        except OSError:
            pass
    try:
        meta = json.loads(raw) if raw else {}
    except ValueError:
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    if platform == "gradescope":
        users = meta.get("users") if isinstance(meta.get("users"), list) else []
        email = users[0].get("email") if users and isinstance(users[0], dict) else None
        submission = meta.get("id")
        key = f"gradescope:{submission}" if submission is not None else f"gradescope:{digest}"
        return str(email or f"gradescope-{submission if submission is not None else digest[:16]}"), key
    params = meta.get("params") if isinstance(meta.get("params"), dict) else {}
    named = meta.get("user_uid") or params.get("student")
    key = "prairielearn:" + hashlib.sha256(raw + digest.encode()).hexdigest()
    return str(named or f"prairielearn-{key[len('prairielearn:'):][:16]}"), key


def _checked(platform: str, content: Optional[bytes], submission_id: str) -> dict:
    """The service's results, if they are valid for the platform (else ServiceUnavailable, "bad_answer")."""
    from ...outputs import gradescope, prairielearn

    try:
        doc = json.loads(content) if content is not None else None
    except ValueError:
        doc = None
    if doc is None:
        raise ServiceUnavailable(f"submission {submission_id} has no readable {RESULT_FILE[platform]}", "bad_answer")
    problems = (gradescope if platform == "gradescope" else prairielearn).spec_problems(doc)
    if problems:
        raise ServiceUnavailable(f"the {RESULT_FILE[platform]} of submission {submission_id} breaks the platform's "
                                 f"format: {'; '.join(problems[:3])}", "bad_answer")
    if platform == "gradescope":
        doc.setdefault("extra_data", {}).setdefault("tilelab", {})["service_submission"] = submission_id
    return doc


def _withheld_gradescope(local: dict, line: str, details: str) -> dict:
    """The local results (the score already withheld: no GPU here), headed
    by `line`, the reason in extra_data.tilelab.withheld and, for the staff, a hidden test."""
    from ...outputs.gradescope import NO_GPU_SUMMARY

    rest = local.get("output", "")
    rest = rest[len(NO_GPU_SUMMARY):].lstrip("\n") if rest.startswith(NO_GPU_SUMMARY) else rest
    tilelab = {**local.get("extra_data", {}).get("tilelab", {}), "withheld": f"not graded by the grading service: "
                                                                            f"{details}"}
    staff = {"name": "Grading service: not graded (staff only)", "score": 0.0, "max_score": 0.0, "status": "failed",
             "output": f"{details}\n\nThe parts were built here (no GPU) and the hand-in was to be graded by the "
                       "grading service, which did not grade it: the score recorded (0) is withheld. Regrade the "
                       "submission once the service grades again.", "output_format": "text", "visibility": "hidden",
             "tags": ["staff"]}
    return {**local, "score": 0.0, "output": f"**{line}**" + (f"\n\n{rest}" if rest else ""),
            "extra_data": {**local.get("extra_data", {}), "tilelab": tilelab},
            "tests": list(local.get("tests", [])) + [staff]}


def _withheld_prairielearn(local: dict, line: str, details: str) -> dict:
    """Not gradable: no points given or taken, the attempt not used up."""
    doc = {k: v for k, v in local.items() if k != "score"}
    return {**doc, "gradable": False, "format_errors": [line], "message": line, "output": details}


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tilelab.operations.service.forward",
                                     description="Grade a platform's hand-in here, and on the grading service "
                                                 "where this machine has no GPU.")
    parser.add_argument("platform", choices=sorted(RESULT_FILE))
    parser.add_argument("--root", type=Path, required=True, help="the autograder's source/ (or a checkout)")
    parser.add_argument("--build", type=Path, required=True)
    parser.add_argument("--answer-key", type=Path, default=None)
    parser.add_argument("--submission", type=Path, required=True, help="the hand-in's folder")
    parser.add_argument("--out", type=Path, required=True, help="where results.json and the reports go")
    parser.add_argument("--service", type=Path, required=True, help=f"the {AUTOGRADER_CONFIG} to forward with")
    parser.add_argument("--metadata", type=Path, default=None,
                        help="submission_metadata.json (Gradescope) or data.json (PrairieLearn)")
    args = parser.parse_args(argv)
    return forward(args.platform, args.root.resolve(), args.build.resolve(),
                   args.answer_key.resolve() if args.answer_key else None, args.submission.resolve(),
                   args.out.resolve(), args.service, args.metadata)


if __name__ == "__main__":
    sys.exit(main())
