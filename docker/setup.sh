#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source (the unpacked
# autograder zip of `tilelab dist autograder`) when it builds the autograder
# image. docker/Dockerfile runs the same script, one step per layer, so the
# Docker image and Gradescope's are built the same way.
# The image must already hold the CUDA Toolkit (an nvidia/cuda devel image).
#
#   setup.sh [STEP...]   the steps, in this order (default: all three)
#     system    apt packages, and the unprivileged user student code runs as
#     python    the virtual environment .venv, the grader's dependencies,
#               and CMake 3.24 or newer (scripts/build-deps: from PyPI into
#               .venv where apt's is older, as on Ubuntu 22.04)
#     project   the grader itself, the harness and tools (build/), and the
#               permissions that keep the key and the hidden cases from
#               student code
#
# Environment:
#   TILELAB_AUTOGRADER_ROOT  replaces /autograder (tests, local runs)
#   TILELAB_SANDBOX_USER     the user student code runs as (tilelab-student)
#   TILELAB_OFFLINE=1        a machine without network: no apt, and the venv
#                            uses the Python packages of the python3 that runs
#                            this, which must hold the grader's
#                            (scripts/python-env)
set -euo pipefail
umask 022  # what the venv and the build write must be readable by the sandbox user
root=${TILELAB_AUTOGRADER_ROOT:-/autograder}
user=${TILELAB_SANDBOX_USER:-tilelab-student}
offline=${TILELAB_OFFLINE:-0}
cd "$root/source"

step_system() {
  if [ "$offline" = 1 ]; then
    echo "setup.sh: offline: no apt packages installed"
  elif command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # binutils: the audit of compiled objects; util-linux: prlimit, setpriv
    # and unshare, which the sandbox of student code is made of.
    apt-get install -y -qq --no-install-recommends cmake g++ make nlohmann-json3-dev \
      python3 python3-venv python3-pip binutils util-linux >/dev/null
    rm -rf /var/lib/apt/lists/*
  fi
  # The grader runs as root and refuses to grade without this user.
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: not root: student code will run as $(id -un), without a sandbox user"
  else
    # One user per grading side by side, held host-wide by each worker or batch
    # (grader/tilelab/system/sandbox_users.py), each with its own process
    # limit: 3 per GPU, at least 8; TILELAB_SANDBOX_USERS=N makes N.
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    count=${TILELAB_SANDBOX_USERS:-$(( ${gpus:-0} * 3 > 8 ? ${gpus:-0} * 3 : 8 ))}
    for name in "$user" $(seq -f "$user-%g" 2 "$count"); do
      id "$name" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$name"
    done
  fi
}

step_python() {
  # The packages alone (grader/pyproject.toml names them): the Dockerfile
  # runs this step before the grader's sources are in the image, so that
  # changing them does not download the packages again.
  bash scripts/python-env --packages --no-test-tools
  # shellcheck source=SCRIPTDIR/../scripts/build-deps
  . scripts/build-deps
  deps_cmake || exit 1
}

step_project() {
  # The solutions must never reach an autograder image, questions are not
  # graded without the key, and speed has no targets without the compiled
  # references: refuse a checkout or a partial tree.
  if [ -e solutions ] || [ ! -f key/answers.yaml ] || [ ! -d references ]; then
    echo "setup.sh: $PWD is not an unpacked autograder zip (key/answers.yaml, references/, no solutions/);" \
      "make one with \`tilelab dist autograder\`" >&2
    exit 1
  fi
  # Student code (as $user) must read the harness sources and the build,
  # and must not change them, nor read the key, the full assignment (its
  # hidden cases) or the compiled references: the grader checks this before
  # every grading. The zip's own modes are not trusted, since they depend on
  # how it was unpacked.
  # This comes before the build, which closes what it writes that lists the
  # hidden cases (build/assignment.json).
  chmod -R a+rX,go-w .
  chmod -R o-rwx key references
  chmod o-rwx assignment.yaml
  # The grading service's URL and the course token (tilelab dist autograder
  # --service): read by the forwarder, which runs as root, and by no one else.
  if [ -f service.json ]; then
    [ "$(id -u)" -ne 0 ] || chown root:root service.json
    chmod 0600 service.json
  fi

  bash scripts/python-env --grader
  .venv/bin/tilelab --help >/dev/null  # fails here, not at the first submission, if a package is missing

  command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
  nvcc --version | tail -1
  # shellcheck source=SCRIPTDIR/../scripts/build-deps
  . scripts/build-deps
  deps_cmake || exit 1  # on PATH again: Docker runs each step in a shell of its own
  # The portable architecture list of cmake/CudaArchitectures.cmake, GPU or
  # not: the references in references/ are compiled for it, and a student's
  # part must be compiled as the reference it is timed against. The build
  # links them into build/reference/, which only root can read.
  local log status=0
  log=$(mktemp)
  deps_configure "$log" -B build -DTILELAB_BUILD_TESTS=OFF -DTILELAB_PORTABLE=ON \
    -DPython3_EXECUTABLE="$PWD/.venv/bin/python" || status=$?
  if [ $status -ne 0 ]; then
    # Status 2: no nlohmann/json, and the one line naming the fix is said.
    [ $status -eq 2 ] || { cat "$log" >&2; echo "setup.sh: configuring the build failed (the output above says why)" >&2; }
    rm -f "$log"
    exit 1
  fi
  grep -E "^-- tilelab: " "$log" | sed 's/^-- tilelab: /setup.sh: /' || true
  rm -f "$log"
  cmake --build build -j "$(nproc)"

  # Gradescope's layout; the results are the grader's alone.
  mkdir -p "$root/submission"
  install -d -m 0700 "$root/results"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(system python project)
for step in "${steps[@]}"; do
  case $step in
    system | python | project) "step_$step" ;;
    *)
      echo "setup.sh: unknown step '$step' (system, python, project)" >&2
      exit 2
      ;;
  esac
done
