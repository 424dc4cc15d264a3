"""Building a hand-in like a compiler (tilelab.grading.build): the recipes
read from the project's own build tree, and what happens when a tree cannot
give them."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tilelab.grading.build import PartRecipe, RecipeError, SubmissionBuild, load_recipes
from tilelab.spec.assignment import load_assignment
from conftest import built_tree


def build_dir() -> Path:
    return built_tree("compile_commands.json")


def test_each_part_is_built_with_the_commands_of_its_starter(root):
    assignment = load_assignment(root / "assignment.yaml")
    recipes = load_recipes(build_dir(), list(assignment.parts))
    assert set(recipes) == {p.id for p in assignment.parts}
    naive = recipes["naive"]
    command = naive.compile_command(Path("/x/naive.cu"), Path("/y/naive.o"))
    assert Path(command[0]).name == "nvcc" and command[command.index("-c") + 1] == "/x/naive.cu"
    assert command[command.index("-o") + 1] == "/y/naive.o" and "-lineinfo" in command
    link = naive.link_command(Path("/y/naive.o"), Path("/y/naive"))
    assert "/y/naive.o" in link and link[link.index("-o") + 1] == "/y/naive"
    # Everything else it names is the prebuilt tree's, by absolute path: part_main and the harness.
    assert any(a.endswith("starter_naive.dir/grader/harness/part_main.cu.o") and Path(a).is_file() for a in link)
    assert any(a.endswith("libtilelab_harness.a") and Path(a).is_absolute() for a in link)
    assert not any("starter_naive_object.dir" in a or "--dependency-file" in a for a in link)
    # The shared object's link, from CMake's response files: the part's binding, the object, -z defs.
    library = naive.library_command(Path("/y/naive.o"), Path("/y/libnaive.so"))
    assert "/y/naive.o" in library and library[library.index("-o") + 1] == "/y/libnaive.so"
    assert any(a.endswith("starter_naive_library.dir/grader/harness/part_library.cu.o") for a in library)
    assert "-Wl,-z,defs" in library and not any(a.startswith("@") for a in library)
    # A tree named by a relative path gives the same commands: they run from the hand-in's own folder.
    relative = load_recipes(Path(os.path.relpath(build_dir())), list(assignment.parts))
    assert relative["naive"] == naive


def test_a_part_compiles_without_libstdcxxs_special_math_functions(root, tmp_path):
    """Their templates were a third of what nvcc parsed for a part; the part's
    compile leaves them out (cmake/TilelabParts.cmake), and the rest of the
    standard library, <cmath> and <random> among it, stays."""
    assignment = load_assignment(root / "assignment.yaml")
    naive = load_recipes(build_dir(), list(assignment.parts))["naive"].for_device("9.0")
    source = tmp_path / "naive.cu"
    source.write_text((root / "solutions/naive.cu").read_text() + "\n#include <random>\n#include <cmath>\n"
                      "double host_noise() { std::mt19937 g(1); return std::lgamma(3.0) + std::normal_distribution<>()(g); }\n")
    argv = naive.compile_command(source, tmp_path / "naive.ii")
    argv[argv.index("-c")] = "-E"
    preprocessed = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert preprocessed.returncode == 0, preprocessed.stderr
    text = (tmp_path / "naive.ii").read_text()
    read = set(re.findall(r'^# \d+ "([^"]+)"', text, re.M))
    assert any(f.endswith("/cmath") for f in read) and any(f.endswith("/random") for f in read)
    assert "lgamma" in text and "riemann_zeta" not in text
    compiled = subprocess.run(naive.compile_command(source, tmp_path / "naive.o"), capture_output=True, text=True)
    assert compiled.returncode == 0 and (tmp_path / "naive.o").is_file(), compiled.stderr


# How a tree configured without a GPU (CI, the autograder's TILELAB_PORTABLE
# build: "75-real;80-real;90") compiles the starter's naive.cu, from its
# compile_commands.json (CMake 3.25, nvcc 13.0), the include list left out.
PORTABLE_COMPILE = ("/usr/local/cuda/bin/nvcc", "-forward-unknown-to-host-compiler", "-O3", "-DNDEBUG",
                    "--generate-code=arch=compute_75,code=[sm_75]", "--generate-code=arch=compute_80,code=[sm_80]",
                    "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-lineinfo", "-std=c++17", "-x", "cu",
                    "-c", "{source}", "-o", "{object}")


def test_a_part_is_compiled_only_for_the_gpu_it_runs_on():
    naive = PartRecipe(PORTABLE_COMPILE, ("g++", "{object}", "-o", "{binary}"))

    def targets(capability):
        return [a for a in naive.for_device(capability).compile_argv if a.startswith("--generate-code")]

    everything = [a for a in PORTABLE_COMPILE if a.startswith("--generate-code")]
    assert targets("9.0") == ["--generate-code=arch=compute_90,code=[sm_90]"]  # the H100
    assert targets("7.5") == ["--generate-code=arch=compute_75,code=[sm_75]"]  # a T4 (Colab)
    # An A10 or an L4 runs the sm_80 image: the newest of its major version, no newer than it.
    assert targets("8.6") == targets("8.9") == ["--generate-code=arch=compute_80,code=[sm_80]"]
    # No image for it (a GPU newer than the tree) or nothing known: every target, PTX included.
    assert targets("12.0") == targets(None) == targets("") == targets("nine") == everything
    others = [a for a in PORTABLE_COMPILE if not a.startswith("--generate-code")]
    assert [a for a in naive.for_device("9.0").compile_argv if not a.startswith("--generate-code")] == others
    assert naive.for_device("9.0").link_argv == naive.link_argv


def test_a_tree_that_cannot_say_how_it_builds_is_the_graders_fault(root, tmp_path):
    assignment = load_assignment(root / "assignment.yaml")
    with pytest.raises(RecipeError, match="no readable compile_commands.json"):
        load_recipes(tmp_path, list(assignment.parts))
    (tmp_path / "compile_commands.json").write_text(json.dumps([]))
    with pytest.raises(RecipeError, match="does not say how it builds starter_naive"):
        load_recipes(tmp_path, list(assignment.parts))
    # A Ninja tree has compile_commands.json but no link.txt: the message says what to do.
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Ninja\n")
    with pytest.raises(RecipeError, match='configured with the Ninja generator.*-G "Unix Makefiles"'):
        load_recipes(tmp_path, list(assignment.parts))


def test_compile_error_audit_and_link_error_keep_their_three_messages(root, tmp_path):
    assignment = load_assignment(root / "assignment.yaml")
    naive = assignment.part("naive")
    cases = {
        "compile": (root / "tests/submissions/naive-compile-error/naive.cu", "naive.cu does not compile"),
        "audit": (root / "tests/submissions/naive-cublas/naive.cu", "cublas"),
        "link": (root / "tests/submissions/wrong-signature/naive.cu", "does not link"),
        None: (root / "solutions/naive.cu", "compiled and linked"),
    }
    prebuilt = build_dir()
    for step, (source, words) in cases.items():
        work = tmp_path / str(step)
        # With libraries the part is linked as a shared object too, put in place only where it built.
        builder = SubmissionBuild(prebuilt, work, libraries=True)
        builder.copy_sources([source])
        builder.prepare([naive])
        assert builder.links_library(naive)
        built = builder.build_part(naive, 300)
        assert built.failed_step == step and words in (built.summary + built.details), (step, built.summary)
        if step is None:
            assert built.binary.is_file() and os.access(built.binary, os.X_OK)
            assert built.library == builder.library_path(naive) and built.library.is_file()
            symbols = subprocess.run(["nm", "-D", "--defined-only", str(built.library)], capture_output=True, text=True)
            assert "tilelab_part_binding" in symbols.stdout
        else:
            # The audit runs beside the links: a part that fails it keeps no executable and no shared object.
            assert built.binary is None and not (builder.tree / naive.id).exists(), step
            assert built.library is None and not builder.library_path(naive).exists(), step
        assert not list(builder.tree.glob("*.partial"))
        shutil.rmtree(work)


def test_a_build_without_libraries_links_no_shared_object(root, tmp_path):
    naive = load_assignment(root / "assignment.yaml").part("naive")
    builder = SubmissionBuild(build_dir(), tmp_path, libraries=False)
    builder.copy_sources([root / "solutions/naive.cu"])
    builder.prepare([naive])
    assert not builder.links_library(naive)
    built = builder.build_part(naive, 300)
    assert built.ok and built.library is None and not builder.library_path(naive).exists()


def test_the_audit_refuses_host_memory_calls_in_the_symbol_table(root, tmp_path):
    """The self-test's hand-ins: cudaHostAlloc and cudaMallocManaged are refused
    by name from the compiled part's symbols. The one that finds
    cuMemHostRegister by walking libcuda's symbol table has no such symbol: it
    builds, and the harness's API recorder is what catches it on the GPU."""
    naive = load_assignment(root / "assignment.yaml").part("naive")
    cases = {
        "naive-mapped-host-memory": ("audit", "calls cudaHostAlloc (host memory that kernels can reach)"),
        "naive-managed-memory": ("audit", "calls cudaMallocManaged (managed memory, which the host can reach)"),
        "naive-registers-host-memory-by-address": (None, "compiled and linked"),
    }
    for name, (step, words) in cases.items():
        built = _build_hand_in(root, tmp_path, name, naive)
        assert built.failed_step == step and words in (built.summary + built.details), (name, built.summary)


def test_the_audit_refuses_the_harnesss_own_names(root, tmp_path):
    """security-calls-harness-internals calls tilelab::LaunchRecorder::clear()
    (to erase the records of its host copies) and redefines the harness's
    inline tilelab::median; part.h's own helpers (TILELAB_CUDA_CHECK, used by
    good-tiled-graph-and-scratch) stay allowed."""
    assignment = load_assignment(root / "assignment.yaml")
    built = _build_hand_in(root, tmp_path, "security-calls-harness-internals", assignment.part("naive"))
    assert built.failed_step == "audit"
    # It links (the harness has those names), beside the audit: the executable is taken away.
    assert built.binary is None and not (tmp_path / "security-calls-harness-internals" / "build" / "naive").exists()
    assert built.details.splitlines() == [
        "uses tilelab::LaunchRecorder, which belongs to the harness: a part may call only what tilelab/part.h gives it",
        "uses tilelab::median, which belongs to the harness: a part may call only what tilelab/part.h gives it"]
    built = _build_hand_in(root, tmp_path, "good-tiled-graph-and-scratch", assignment.part("tiled"))
    assert built.failed_step is None, built.summary


def _build_hand_in(root, tmp_path, name, part):
    builder = SubmissionBuild(build_dir(), tmp_path / name)
    builder.copy_sources([root / "tests/submissions" / name / part.file])
    builder.prepare([part])
    return builder.build_part(part, 300)
