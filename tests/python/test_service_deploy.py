"""The service's deployment files agree with the commands they run:
docker/compose.yaml gives each worker the GPU it names, and every option
that compose and the Slurm script pass exists in `tilelab serve`/`worker`."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def options_of(command: str) -> set:
    shown = subprocess.run([sys.executable, "-m", "tilelab.cli", command, "--help"], capture_output=True, text=True,
                           cwd=ROOT, env={"PYTHONPATH": str(ROOT / "grader"), "PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0, shown.stderr
    return set(re.findall(r"(--[a-z][a-z-]*)", shown.stdout))


def test_each_compose_worker_grades_on_the_gpu_it_is_given():
    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    workers = {name: s for name, s in services.items() if name.startswith("worker-")}
    assert workers and {"postgres", "gateway"} <= set(services)
    for name, worker in workers.items():
        command = worker["command"]
        gpu = command[command.index("--gpu") + 1]
        (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
        assert name == f"worker-{gpu}" and device["device_ids"] == [gpu] and "gpu" in device["capabilities"]
        assert "TILELAB_DATABASE_URL" in worker["environment"]
    assert "TILELAB_DATABASE_URL" in services["gateway"]["environment"]


def test_the_deployment_files_pass_only_options_the_commands_have():
    services = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]
    for service in ("gateway", "worker-0"):
        command = services[service]["command"]
        used = {word for word in command if word.startswith("--")}
        assert used <= options_of(command[0]), (service, used - options_of(command[0]))
    sbatch = (ROOT / "scripts" / "service-worker.sbatch").read_text().replace("\\\n", " ")
    (line,) = re.findall(r"\S*/tilelab worker (.*)$", sbatch, flags=re.M)  # the command it runs
    used = {word for word in line.split() if word.startswith("--")}
    assert used and used <= options_of("worker")
    # Every array task's GPU is device 0: the name, not HOST:GPU, tells two tasks on one node apart.
    (name,) = re.findall(r'--name ("[^"]*")', line)
    named = [subprocess.run(["bash", "-c", f"echo {name}"], capture_output=True, text=True, check=True,
                            env={"PATH": "/usr/bin:/bin", "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": task}
                            ).stdout.strip() for task in ("0", "1")]
    assert named[0] != named[1] and all(n.endswith(f"slurm-77-{t}") for n, t in zip(named, "01")), named
    # The environment variable the files set is the one the commands read.
    assert "TILELAB_DATABASE_URL" in subprocess.run(
        [sys.executable, "-m", "tilelab.cli", "worker", "--help"], capture_output=True, text=True, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "grader"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}).stdout
