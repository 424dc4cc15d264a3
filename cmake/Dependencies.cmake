# The one place that decides where the build's dependencies come from, and
# says in one line what to install when one is missing.
#
#   CUDA Toolkit  nvcc, cudart, CUPTI (12.0 or newer; built and tested with 13.0)
#   Python 3      runs tilelab.spec.build_export at configure time (with PyYAML)
#   nlohmann/json the system's package when CMake finds it (3.2 or newer);
#                 otherwise the headers of PyPI's nlohmann-json package in the
#                 Python environment the build was given (scripts/bootstrap
#                 installs it into .venv), as an imported target of the same
#                 name
#   GoogleTest    the project's own C++ tests only: without it they are not
#                 built (scripts/test installs it or says how), and the main
#                 job (harness, tools, parts) builds as ever

set(TILELAB_MIN_CUDA_VERSION 12.0)
find_package(CUDAToolkit REQUIRED)
if(CUDAToolkit_VERSION VERSION_LESS TILELAB_MIN_CUDA_VERSION)
  message(FATAL_ERROR "tilelab: CUDA ${CUDAToolkit_VERSION} is older than the ${TILELAB_MIN_CUDA_VERSION} this build "
                      "needs: install a newer CUDA Toolkit and put its bin/ first on PATH")
endif()
find_package(Threads REQUIRED)
find_package(Python3 REQUIRED COMPONENTS Interpreter)

find_package(nlohmann_json 3.2 QUIET)
if(nlohmann_json_FOUND)
  message(STATUS "tilelab: nlohmann/json ${nlohmann_json_VERSION} from the system")
else()
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" -c
            "import nlohmann_json, os; print(os.path.join(os.path.dirname(nlohmann_json.__file__), 'include'))"
    OUTPUT_VARIABLE _tilelab_json_include OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
    RESULT_VARIABLE _tilelab_json_rc)
  if(NOT _tilelab_json_rc EQUAL 0 OR NOT EXISTS "${_tilelab_json_include}/nlohmann/json.hpp")
    message(FATAL_ERROR "tilelab: nlohmann/json not found: install it (apt install nlohmann-json3-dev, or pip "
                        "install nlohmann-json into ${Python3_EXECUTABLE}); scripts/bootstrap and the autograder's "
                        "setup.sh fetch it themselves where PyPI can be reached")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED GLOBAL)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_tilelab_json_include}")
  message(STATUS "tilelab: nlohmann/json from PyPI's nlohmann-json in ${_tilelab_json_include}")
endif()

# Tests exist only in the full project tree, not in the bundles.
if(TILELAB_BUILD_TESTS AND NOT EXISTS "${PROJECT_SOURCE_DIR}/tests/CMakeLists.txt")
  set(TILELAB_BUILD_TESTS OFF)
endif()
set(TILELAB_HAVE_GTEST OFF CACHE INTERNAL "Whether GoogleTest was found (scripts/test reads it)")
if(TILELAB_BUILD_TESTS)
  find_package(GTest QUIET)
  set(TILELAB_HAVE_GTEST ${GTest_FOUND} CACHE INTERNAL "Whether GoogleTest was found (scripts/test reads it)")
  if(NOT GTest_FOUND)
    message(STATUS "tilelab: GoogleTest not found: the project's tests are not built (scripts/test installs it; "
                   "or apt install libgtest-dev)")
    set(TILELAB_BUILD_TESTS OFF)
  endif()
endif()
