#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image;
# the autograder zip is unpacked in /autograder/source. It installs the
# build dependencies, the grader, and builds the harness and tools.
# The image must already hold the CUDA Toolkit (an nvidia/cuda devel image).
set -euo pipefail
root=${TILELAB_AUTOGRADER_ROOT:-/autograder}
cd "$root/source"

if command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends cmake g++ make nlohmann-json3-dev \
    python3 python3-venv python3-pip binutils >/dev/null
fi
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
nvcc --version | tail -1

python3 -m venv .venv
.venv/bin/python -m pip install --quiet ./grader
# No GPU is visible while the image is built: the fixed architecture list
# of cmake/CudaArchitectures.cmake applies (it includes sm_90).
cmake -S . -B build -DTILELAB_BUILD_TESTS=OFF -DPython3_EXECUTABLE="$PWD/.venv/bin/python"
cmake --build build -j "$(nproc)"
