"""README.md's two commands for a fresh machine are what CI runs: .ci/run
holds each of them, word for word, as a line of its own, so the two cannot
drift apart."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list:
    """The shell blocks of README.md's "On a fresh machine" section, a command each."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## On a fresh machine", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


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
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## On a fresh machine", 1)[1]
    assert packages and all(p in section for p in packages), packages
