# Parts of the assignment as build targets.
#
# The list of parts, their files, launchers and signatures comes from
# assignment.yaml, exported at configure time by tilelab.spec.build_export (a
# Python module that needs only PyYAML). Editing assignment.yaml, or a module
# that reads it, re-runs it.

set(TILELAB_ASSIGNMENT "${PROJECT_SOURCE_DIR}/assignment.yaml" CACHE FILEPATH "The assignment description")
set(TILELAB_ASSIGNMENT_JSON "${PROJECT_BINARY_DIR}/assignment.json")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${PROJECT_SOURCE_DIR}/grader"
          "${Python3_EXECUTABLE}" -m tilelab.spec.build_export "${TILELAB_ASSIGNMENT}"
          --cmake "${PROJECT_BINARY_DIR}/tilelab_parts.cmake" --json "${TILELAB_ASSIGNMENT_JSON}"
  RESULT_VARIABLE _tilelab_export_rc
  ERROR_VARIABLE _tilelab_export_err)
if(NOT _tilelab_export_rc EQUAL 0)
  message(FATAL_ERROR "tilelab: cannot read ${TILELAB_ASSIGNMENT}:\n${_tilelab_export_err}\n"
                      "(the build needs Python 3 with PyYAML: python3 -m pip install pyyaml)")
endif()
# The export reads assignment.yaml through these modules; a change to any of them re-runs it.
set(_tilelab_spec "${PROJECT_SOURCE_DIR}/grader/tilelab/spec")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             "${TILELAB_ASSIGNMENT}" "${_tilelab_spec}/assignment.py" "${_tilelab_spec}/cases.py"
             "${_tilelab_spec}/checks.py" "${_tilelab_spec}/schema.py" "${_tilelab_spec}/matmul.py"
             "${_tilelab_spec}/build_export.py")
include("${PROJECT_BINARY_DIR}/tilelab_parts.cmake")

# tilelab_add_part(<set> <part> <source> <launcher> <signature> [EXPECT <status>] [NO_TEST] [LIBRARY])
#
# Adds the harness executable <set>_<part> (written to build/<set>/<part>)
# built from the part's source file, and its GPU test: the part's public and
# hidden cases run through the harness, expecting the given harness status
# ("pass": every case right; "not_implemented": the starter's TODO stubs).
#
# The part file compiles alone into <set>_<part>_object, so a compile error
# is told apart from a link error (a launcher with the wrong signature), and
# the grader can audit the object's symbols: build/<set>/<part>.objects
# names its object file. A <source> ending in .o is an object compiled
# elsewhere (the autograder bundle's references) and is only linked. With
# LIBRARY the part's object is also linked as a shared object,
# <set>/lib<part>.so, that tilelab-part-host loads, with a test of its own.
function(tilelab_add_part SET PART SOURCE LAUNCHER SIGNATURE)
  cmake_parse_arguments(ARG "NO_TEST;LIBRARY" "EXPECT" "" ${ARGN})
  set(target ${SET}_${PART})
  string(TOUPPER "${SIGNATURE}" signature_upper)
  # The part's binding to the harness (grader/harness/part_binding.h), in its executable and its shared object.
  set(binding TILELAB_PART_ID="${PART}" TILELAB_LAUNCHER=${LAUNCHER} TILELAB_SIGNATURE_${signature_upper})
  add_executable(${target} "${PROJECT_SOURCE_DIR}/grader/harness/part_main.cu")
  if(SOURCE MATCHES "\\.o$")
    target_sources(${target} PRIVATE "${SOURCE}")
  else()
    add_library(${target}_object OBJECT "${SOURCE}")
    target_include_directories(${target}_object PRIVATE "${PROJECT_SOURCE_DIR}/include")
    # In C++17 libstdc++'s <cmath>, which nvcc includes in every file, declares the special math
    # functions (std::riemann_zeta and kin): a third of what nvcc parses for a part, and no kernel
    # can call them. Their header's include guard, set beforehand, leaves them out.
    target_compile_definitions(${target}_object PRIVATE _GLIBCXX_BITS_SPECFUN_H)
    file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/${SET}/${PART}.objects" CONTENT "$<TARGET_OBJECTS:${target}_object>\n")
    target_link_libraries(${target} PRIVATE ${target}_object)
  endif()
  if(ARG_LIBRARY AND NOT SOURCE MATCHES "\\.o$")
    # With LIBRARY, the same object in a shared object too, <set>/lib<part>.so, for
    # tilelab-part-host to load (grader/harness/part_library.cu).
    set_target_properties(${target}_object PROPERTIES POSITION_INDEPENDENT_CODE ON)
    add_library(${target}_library SHARED "${PROJECT_SOURCE_DIR}/grader/harness/part_library.cu")
    target_include_directories(${target}_library PRIVATE "${PROJECT_SOURCE_DIR}/grader/harness" "${PROJECT_SOURCE_DIR}/include")
    target_compile_definitions(${target}_library PRIVATE ${binding})
    target_link_libraries(${target}_library PRIVATE ${target}_object)
    target_link_options(${target}_library PRIVATE "LINKER:-z,defs")
    # The CUDA runtime shared, the one the harness itself uses: a runtime of the part's own would set
    # itself up inside the launcher's first call, with calls (cuGetProcAddress) the launch checks refuse.
    set_target_properties(${target}_library PROPERTIES
      OUTPUT_NAME ${PART}
      LIBRARY_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/${SET}"
      CUDA_RUNTIME_LIBRARY Shared
      CUDA_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
    if(TILELAB_BUILD_TESTS AND NOT ARG_NO_TEST)
      _tilelab_part_test(gpu.${SET}.${PART}.loaded ${PART} ${ARG_EXPECT} $<TARGET_FILE:tilelab-part-host>
                         --library $<TARGET_FILE:${target}_library>)
    endif()
  endif()
  target_compile_definitions(${target} PRIVATE ${binding})
  target_link_libraries(${target} PRIVATE tilelab::tilelab_harness)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${PART}
    RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/${SET}")
  if(TILELAB_BUILD_TESTS AND NOT ARG_NO_TEST)
    _tilelab_part_test(gpu.${SET}.${PART} ${PART} ${ARG_EXPECT} $<TARGET_FILE:${target}>)
  endif()
endfunction()

# A part's GPU test NAME: its public and hidden cases through HARNESS (and
# the arguments after it), expecting EXPECT (tests/cpp/part_tests.cpp).
function(_tilelab_part_test NAME PART EXPECT HARNESS)
  add_test(NAME ${NAME}
           COMMAND tilelab_part_tests --part ${PART} --harness ${HARNESS} ${ARGN}
                   --expect ${EXPECT} --assignment "${TILELAB_ASSIGNMENT_JSON}")
  # Without a GPU the tests print "skipped: no CUDA device"; CTest must count that as skipped.
  set_tests_properties(${NAME} PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "skipped: ")
endfunction()

# tilelab_add_part_set(<set> <dir> EXPECT <status> [REQUIRED] [COMPILED] [LIBRARY])
#
# EXPECT starter: each part's own starter expectation from assignment.yaml.
# One target per part of assignment.yaml whose file exists in <dir>. With
# REQUIRED a missing file stops the configuration; otherwise (a submission)
# the part is reported missing and skipped, and the grader scores it as such.
# With COMPILED, <dir> holds each part compiled, <part>.o, instead of its source.
function(tilelab_add_part_set SET DIR)
  cmake_parse_arguments(ARG "REQUIRED;COMPILED;LIBRARY" "EXPECT" "" ${ARGN})
  if(NOT ARG_EXPECT)
    set(ARG_EXPECT pass)
  endif()
  foreach(part IN LISTS TILELAB_PARTS)
    if(ARG_COMPILED)
      set(source "${DIR}/${part}.o")
    else()
      set(source "${DIR}/${TILELAB_PART_${part}_FILE}")
    endif()
    if(NOT EXISTS "${source}")
      if(ARG_REQUIRED)
        message(FATAL_ERROR "tilelab: ${source} is missing")
      endif()
      message(STATUS "tilelab: ${SET}: no ${source}; part ${part} not built")
      continue()
    endif()
    set(expect ${ARG_EXPECT})
    if(expect STREQUAL "starter")  # each part's starter: a TODO stub, or a working kernel to improve
      set(expect ${TILELAB_PART_${part}_STARTER_EXPECT})
    endif()
    set(library)
    if(ARG_LIBRARY)
      set(library LIBRARY)
    endif()
    tilelab_add_part(${SET} ${part} "${source}" ${TILELAB_PART_${part}_LAUNCHER}
                     ${TILELAB_PART_${part}_SIGNATURE} EXPECT ${expect} ${library})
  endforeach()
endfunction()
