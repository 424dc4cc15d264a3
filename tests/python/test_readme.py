"""README.md's two commands for a fresh machine are what CI runs: .ci/run
holds each of them, word for word, as a line of its own, so the two cannot
drift apart. README stays one screen that points each reader to a page of
docs/, and the links between those pages resolve: in the checkout, and in
the student bundle, whose README is docs/student.md."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 50  # one screen
READERS_PAGES = ("docs/student.md", "docs/instructor.md", "docs/ta.md", "docs/developer.md")
# What the student bundle holds besides dist.STUDENT_FILES: its README
# (docs/student-README.md), the public assignment.yaml and the handout.
BUNDLE_EXTRAS = ("README.md", "assignment.yaml", "handout/handout.md", "handout/handout.html", "handout/handout.pdf")


def fresh_machine_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]


def readme_commands() -> list:
    """The shell blocks of README.md's "On a fresh machine" section, a command each."""
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", fresh_machine_section(), re.S)]


def test_readme_gives_two_commands_one_setting_up_and_grading_one_testing():
    first, second = readme_commands()
    assert first == "./scripts/bootstrap && .venv/bin/tilelab grade solutions --out results"
    assert second == "./scripts/test"


def test_ci_runs_readmes_commands_as_written_after_installing_only_what_readme_names():
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in readme_commands():
        assert command in ci_lines, f".ci/run does not run README's command: {command}"
    before = " ".join(line for line in ci_lines[:ci_lines.index(readme_commands()[0])] if not line.startswith("#"))
    for word in ("cmake", "nlohmann", "gtest", "googletest", "pip install"):
        assert word not in before, f".ci/run sets up {word} before README's commands"
    installed = before.split("apt-get install", 1)[1].split(">", 1)[0].replace("\\", " ").split()
    packages = [w for w in installed if not w.startswith("-")]
    section = fresh_machine_section()
    assert packages and all(p in section for p in packages), packages


def test_readme_fits_one_screen_and_points_each_reader_to_a_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, "README.md is one screen: move the details to docs/"
    linked = {target for target, _ in links(text)}
    for page in READERS_PAGES:
        assert page in linked, f"README.md does not link {page}"


# --- links ---------------------------------------------------------------------


def links(markdown: str) -> list:
    """(path, anchor) of each relative link outside code blocks; path is '' for a link within the page."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        out.append((path, anchor))
    return out


def anchors(markdown: str) -> set:
    """GitHub's anchors for the headings of a page."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", prose, re.M)}


def broken_links(page: Path, exists) -> list:
    """The links of `page` that do not resolve; `exists(path)` says whether a path relative to the page's folder is there."""
    text = page.read_text(encoding="utf-8")
    broken = []
    for path, anchor in links(text):
        target = page if not path else page.parent / path
        if path and not exists(path):
            broken.append(f"{path} (no such file)")
        elif anchor and target.suffix == ".md" and target.is_file() \
                and anchor not in anchors(target.read_text(encoding="utf-8")):
            broken.append(f"{path}#{anchor} (no such heading)")
    return broken


def test_links_of_readme_and_docs_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = {p.relative_to(ROOT).as_posix(): broken_links(p, lambda path, p=p: (p.parent / path).exists())
              for p in pages}
    assert not {p: b for p, b in broken.items() if b}


def test_the_student_bundles_readme_is_docs_student_md_and_its_links_resolve_in_the_bundle():
    from tilelab.authoring.dist import STUDENT_FILES

    page = ROOT / "docs" / "student.md"
    assert (ROOT / "docs" / "student-README.md").read_bytes() == page.read_bytes()
    shipped = set(STUDENT_FILES) | set(BUNDLE_EXTRAS)

    def in_bundle(path: str) -> bool:  # relative to the bundle's root, where this page is README.md
        path = path.rstrip("/")
        return any(path == f or path.startswith(f + "/") or f.startswith(path + "/") for f in shipped)

    # The same text sits in docs/ of the checkout and at the root of the
    # bundle: a link must resolve in both (paths written as code need not).
    broken = broken_links(page, in_bundle)
    assert not broken, f"links of docs/student.md that the student bundle's README.md cannot follow: {broken}"
