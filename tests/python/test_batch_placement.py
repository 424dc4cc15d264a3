"""Where `tilelab batch` runs its gradings: a Slurm array job and its student list, a worker per
GPU that sees only its GPU and takes its lock, and a sandbox user for each grading side by side."""

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT

from tilelab.cli import main
from tilelab.operations import batch
from tilelab.operations.batch import BatchError
from tilelab.operations.batch.scheduler import worker_slots
from tilelab.spec.assignment import load_assignment
from tilelab.system.sandbox import Sandbox


def _slurm(tmp_path: Path, *extra: str):
    class_dir, out = tmp_path / "class", tmp_path / "out"
    for name in ("alice", "bob", "bad name", "carol"):
        (class_dir / name).mkdir(parents=True)
    script = tmp_path / "jobs" / "grade.sbatch"
    result = CliRunner().invoke(main, ["--root", str(ROOT), "batch", str(class_dir), "--out", str(out),
                                       "--slurm", str(script), *extra])
    return class_dir, out, script, result


def test_slurm_writes_an_array_script_and_its_student_list(tmp_path):
    class_dir, out, script, result = _slurm(tmp_path, "--image", "ghcr.io/course/tilelab:2026", "--seed", "7")
    assert result.exit_code == 0, result.output
    assert "'bad name': skipped: unsafe directory name" in result.output
    text = script.read_text()
    directives = dict(line.removeprefix("#SBATCH ").split("=", 1) for line in text.splitlines()
                      if line.startswith("#SBATCH "))
    assert directives["--array"] == "0-2"
    assert directives["--gres"] == "gpu:1"
    hours, minutes, seconds = map(int, directives["--time"].split(":"))
    assert hours * 3600 + minutes * 60 + seconds >= batch.slurm_time_limit(load_assignment(ROOT / "assignment.yaml"))
    assert directives["--output"] == f"{out}/slurm-logs/%A_%a.log" and (out / "slurm-logs").is_dir()
    # Directives count only before the first command.
    body = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert text.index(body[0]) > text.rindex("#SBATCH")
    student_list = script.with_name("grade.students.txt")
    assert student_list.read_text().splitlines() == ["alice", "bob", "carol"]
    assert f"tilelab batch {class_dir} --out {out} --gradebook-only" in text
    assert "docker://ghcr.io/course/tilelab:2026" in text
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0

    # Each task, run with a stand-in for apptainer that records its arguments.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apptainer").write_text(textwrap.dedent("""\
        #!/bin/sh
        printf '%s\\n' "$@" > "$RECORD"
        """))
    (bin_dir / "apptainer").chmod(0o755)
    task_tmp = tmp_path / "node-tmp"
    task_tmp.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD": str(tmp_path / "argv"),
           "TMPDIR": str(task_tmp)}
    env.pop("TILELAB", None)
    for task, name in enumerate(["alice", "bob", "carol"]):
        run = subprocess.run(["bash", str(script)], env={**env, "SLURM_ARRAY_TASK_ID": str(task)},
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        argv = (tmp_path / "argv").read_text().splitlines()
        assert argv[:5] == ["exec", "--nv", "--fakeroot", "--contain", "--workdir"]
        assert Path(argv[5]).parent == task_tmp and Path(argv[5]).name.startswith(f"tilelab-{name}-")
        assert argv[6:] == [
            "--bind", f"{class_dir}/{name}:{class_dir}/{name}:ro",
            "--bind", f"{out}/{name}:{out}/{name}",
            "docker://ghcr.io/course/tilelab:2026",
            batch.IMAGE_TILELAB, "grade", f"{class_dir}/{name}", "--out", f"{out}/{name}", "--seed", "7",
        ]
        assert (out / name).is_dir()
    assert list(task_tmp.iterdir()) == []  # each task's /tmp is removed after it
    run = subprocess.run(["bash", str(script)], env={**env, "SLURM_ARRAY_TASK_ID": "3"}, capture_output=True,
                         text=True)
    assert run.returncode == 2 and "has no line 4" in run.stderr
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "sbatch" in run.stderr
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                         env={**env, "SLURM_ARRAY_TASK_ID": "0", "TILELAB": "/opt/venv/bin/tilelab --root /opt/src"})
    assert (tmp_path / "argv").read_text().splitlines()[11:15] == ["/opt/venv/bin/tilelab", "--root", "/opt/src",
                                                                  "grade"]


def test_slurm_without_a_seed_and_with_a_sif_image(tmp_path):
    class_dir, out, script, result = _slurm(tmp_path, "--image", str(tmp_path / "tilelab.sif"))
    assert result.exit_code == 0, result.output
    text = script.read_text()
    assert f"image={tmp_path / 'tilelab.sif'}\n" in text
    assert "--seed" not in text.splitlines()[-1] and "fresh seed" in text


def test_slurm_needs_an_image_and_paths_it_can_write(tmp_path):
    assert "--slurm needs --image" in _slurm(tmp_path)[3].output
    class_dir = tmp_path / "my class"
    (class_dir / "alice").mkdir(parents=True)
    with pytest.raises(BatchError, match="may not hold spaces"):
        batch.write_slurm(class_dir, tmp_path / "out", tmp_path / "g.sbatch", root=ROOT, image="x/y:1")


def test_gpus_from_cuda_visible_devices_nvidia_smi_or_the_command_line(monkeypatch):
    assert batch.find_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert batch.find_gpus({"CUDA_VISIBLE_DEVICES": "0,-1,2"}) == ["0"]  # CUDA stops at the first invalid one
    assert batch.find_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    listing = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n"
               "  MIG 1g.10gb     Device  0: (UUID: MIG-bbbb)\n"
               "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-cccc)\n")
    monkeypatch.setattr(subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=listing, stderr=""))
    assert batch.find_gpus({}) == ["0", "1"]

    def no_driver(*a, **k):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", no_driver)
    assert batch.find_gpus({}) == []
    assert batch.parse_gpus("0,2") == ["0", "2"]
    assert batch.parse_gpus("GPU-aaaa") == ["GPU-aaaa"]
    for bad in ("0,0", "", "0,,1", "0 1"):
        with pytest.raises(BatchError):
            batch.parse_gpus(bad)


def test_one_worker_per_gpu_each_seeing_only_its_gpu_with_its_own_lock():
    base = Sandbox(extra_env={"KEEP": "1"})
    workers = worker_slots(["0", "2"], 5, base)
    assert [w.label for w in workers] == ["GPU 0", "GPU 2"]
    assert [w.sandbox.extra_env for w in workers] == [{"KEEP": "1", "CUDA_VISIBLE_DEVICES": "0"},
                                                      {"KEEP": "1", "CUDA_VISIBLE_DEVICES": "2"}]
    assert workers[0].sandbox.env(Path("/tmp"))["CUDA_VISIBLE_DEVICES"] == "0"
    assert workers[0].gpu_lock is not workers[1].gpu_lock
    without = worker_slots([], 3, base)
    assert len(without) == 3 and len({id(w.gpu_lock) for w in without}) == 1
    assert all(w.sandbox == base for w in without)


def test_student_code_numbers_the_gpus_as_the_grader_does_and_sees_nothing_else(monkeypatch):
    # The trusted harness's services keep the grader's environment; a launcher sharing their buffers must find
    # the same GPU under the same number.
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("TILELAB_SERVICE_TOKEN", "secret")
    env = worker_slots(["1"], 1, Sandbox())[0].sandbox.env(Path("/tmp"))
    assert (env["CUDA_VISIBLE_DEVICES"], env["CUDA_DEVICE_ORDER"]) == ("1", "PCI_BUS_ID")
    assert "TILELAB_SERVICE_TOKEN" not in env
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    assert "CUDA_DEVICE_ORDER" not in Sandbox().env(Path("/tmp"))


def test_hand_ins_in_flight_on_one_gpu_share_its_lock_and_only_its_gpu():
    base = Sandbox()
    workers = worker_slots(["0", "2"], 1, base, in_flight=3)
    assert [w.label for w in workers] == ["GPU 0.1", "GPU 0.2", "GPU 0.3", "GPU 2.1", "GPU 2.2", "GPU 2.3"]
    assert len({id(w.gpu_lock) for w in workers[:3]}) == 1 and workers[0].gpu_lock is not workers[3].gpu_lock
    assert {w.sandbox.extra_env["CUDA_VISIBLE_DEVICES"] for w in workers[3:]} == {"2"}


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_gradings_side_by_side_get_a_sandbox_user_each_or_fewer_at_a_time(tmp_path):
    """As root with the users scripts/secure-checkout makes (tilelab-student,
    -2 ... -8), each worker on a GPU runs as a user of its own that no other
    grader on the host holds; as a user, one process limit is shared, so the
    default falls to one at a time."""
    import pwd

    from tilelab.system.sandbox import SANDBOX_USERS, slot_user
    from tilelab.system.sandbox_users import hold_users

    assert [slot_user("tilelab-student", i) for i in range(3)] == ["tilelab-student", "tilelab-student-2",
                                                                  "tilelab-student-3"]
    as_user = Sandbox()
    assert [h.sandbox for h in hold_users(as_user, 3, tmp_path)] == [as_user]
    assert batch.in_flight_for(["0"], as_user, None)[0] == 1
    kept, warning = batch.in_flight_for(["0"], as_user, 3)
    assert kept == 3 and "fork bomb" in warning
    assert batch.in_flight_for([], as_user, None) == (1, None)
    try:
        users = [pwd.getpwnam(slot_user("tilelab-student", i)) for i in range(SANDBOX_USERS)]
    except KeyError:
        pytest.skip("skipped: the sandbox users are made by scripts/secure-checkout as root")
    base = Sandbox(user=users[0].pw_name, uid=users[0].pw_uid, gid=users[0].pw_gid)
    held = hold_users(base, 6, tmp_path)
    assert batch.in_flight_for(["0", "1"], base, None, available=len(held)) == (3, None)
    workers = worker_slots(["0", "1"], 1, base, in_flight=3, users=[h.sandbox for h in held])
    assert len({w.sandbox.uid for w in workers}) == 6
    assert [w.sandbox.user for w in workers[:2]] == ["tilelab-student", "tilelab-student-2"]
    # Another grader holding them, a second one finds only the users left.
    existing = next(i for i in range(len(users), 1000) if not _user_exists(slot_user(base.user, i)))
    rest = hold_users(base, 9, tmp_path)
    assert len(rest) == min(9, existing - 6) and not {h.sandbox.user for h in rest} & {h.sandbox.user for h in held}
    fewer, note = batch.in_flight_for(["0", "1", "2"], base, None, available=len(rest))
    assert fewer == max(1, len(rest) // 3) and f"{len(rest)} free sandbox users for 9 gradings side by side" in note
    for h in held + rest:
        h.release()
