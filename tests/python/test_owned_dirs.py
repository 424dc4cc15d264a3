"""The grader's temporary folders name their maker (system/owned_dirs.py): a
sweep removes those of a process that is gone and leaves every other."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilelab.system import owned_dirs


@pytest.fixture
def tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(owned_dirs.tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp_path


def _made_by_a_process_now_gone(tmp: Path, prefix: str) -> Path:
    """A folder made by another grader's process that then ended, as a killed one would."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from tilelab.system import owned_dirs; "
            f"print(owned_dirs.make({prefix!r}))")
    grader = str(Path(owned_dirs.__file__).resolve().parents[2])
    made = subprocess.run([sys.executable, "-c", code, grader], capture_output=True, text=True, check=True,
                          env={**os.environ, "TMPDIR": str(tmp)})
    return Path(made.stdout.strip())


def test_a_folder_names_its_maker(tmp):
    made = owned_dirs.make(owned_dirs.WORK)
    assert made.parent == tmp and made.name.startswith(owned_dirs.WORK)
    assert made.stat().st_mode & 0o777 == 0o700
    owner = json.loads((made / owned_dirs.OWNER_FILE).read_text())
    assert owner["pid"] == os.getpid()
    assert owner["started"] == owned_dirs._start_time(os.getpid()) is not None
    with pytest.raises(ValueError):
        owned_dirs.make("elsewhere-")


def test_a_sweep_removes_the_folders_of_a_process_that_is_gone_and_only_those(tmp):
    gone = [_made_by_a_process_now_gone(tmp, p) for p in owned_dirs.PREFIXES]
    (gone[0] / "naive.cu").write_text("// a hand-in being graded when its grader was killed\n")
    (gone[0] / "build").mkdir()
    mine = owned_dirs.make(owned_dirs.TURN)
    no_owner = tmp / f"{owned_dirs.WORK}older"
    no_owner.mkdir()
    someone_elses = tmp / "not-the-graders"
    someone_elses.mkdir()
    (someone_elses / owned_dirs.OWNER_FILE).write_text((gone[0] / owned_dirs.OWNER_FILE).read_text())
    unreadable = tmp / f"{owned_dirs.HARNESS}garbled"
    unreadable.mkdir()
    (unreadable / owned_dirs.OWNER_FILE).write_text("{not json")
    a_link = tmp / f"{owned_dirs.WORK}link"
    a_link.symlink_to(gone[1])

    assert sorted(owned_dirs.sweep()) == sorted(gone)
    assert not any(p.exists() for p in gone)
    for kept in (mine, no_owner, someone_elses, unreadable):
        assert kept.is_dir()
    assert a_link.is_symlink()
    assert owned_dirs.sweep() == []


def test_a_pid_given_again_is_not_the_maker(tmp):
    made = owned_dirs.make(owned_dirs.WORKER)
    owner = json.loads((made / owned_dirs.OWNER_FILE).read_text())
    # This process's PID, with another start time: the PID came back to another process.
    (made / owned_dirs.OWNER_FILE).write_text(json.dumps({**owner, "started": owner["started"] + 1}))
    assert owned_dirs.sweep() == [made]


def test_another_pid_namespace_is_not_judged(tmp):
    made = _made_by_a_process_now_gone(tmp, owned_dirs.WORK)
    owner = json.loads((made / owned_dirs.OWNER_FILE).read_text())
    (made / owned_dirs.OWNER_FILE).write_text(json.dumps({**owner, "namespace": "pid:[1]"}))
    assert owned_dirs.sweep() == [] and made.is_dir()
