# Project-wide compiler settings and the one helper that registers a test executable.

function(zeus_setup_toolchain)
  if(ZEUS_USE_CCACHE)
    find_program(ZEUS_CCACHE ccache)
    if(ZEUS_CCACHE)
      # Paths relative to the source tree and no build-directory hash, so that the Debian build
      # (build/ci) and the wheel build (build/cuda) share the objects of every file that does not
      # include libtorch (the debug info then names the directory that compiled it first).
      # With ZEUS_PCH, ccache caches what uses a precompiled header only when told that it may
      # (its manual, "Precompiled headers").
      set(launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
                   CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
                   ${ZEUS_CCACHE})
      set(CMAKE_C_COMPILER_LAUNCHER ${launcher} PARENT_SCOPE)
      set(CMAKE_CXX_COMPILER_LAUNCHER ${launcher} PARENT_SCOPE)
    endif()
  endif()
  if(ZEUS_SANITIZE)
    foreach(san IN LISTS ZEUS_SANITIZE)
      if(NOT san MATCHES "^(address|undefined|thread)$")
        message(FATAL_ERROR "ZEUS_SANITIZE: unknown sanitizer '${san}' (address, undefined, thread)")
      endif()
    endforeach()
    list(JOIN ZEUS_SANITIZE "," sanitizers)
    add_compile_options(-fsanitize=${sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    add_link_options(-fsanitize=${sanitizers})
  endif()
endfunction()

# Warnings are errors for the project's own targets only (not for third-party headers).
# The fake NVML (tests/fakes/fake_nvml.cpp) as TARGET, a libnvidia-ml.so.1 in DIR: the test
# suites' (tests/) and, built by the wheel's toolchain, the wheels' tests' (tests/wheels).
function(zeus_add_fake_nvml target dir)
  add_library(${target} SHARED ${PROJECT_SOURCE_DIR}/tests/fakes/fake_nvml.cpp)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME nvidia-ml PREFIX lib SUFFIX .so.1 LIBRARY_OUTPUT_DIRECTORY ${dir})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${target} PRIVATE nlohmann_json::nlohmann_json)
  zeus_target_warnings(${target})
endfunction()

function(zeus_target_warnings target)
  # The project's own targets, for zeus_precompile_headers.
  set_property(GLOBAL APPEND PROPERTY ZEUS_OWN_TARGETS ${target})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  if(ZEUS_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ZEUS_UNITY_BATCH})
    # In a batch no source is the main file, so GCC reports each class that holds a member of a
    # type from its file's anonymous namespace (subobject-linkage), which is fine in the file.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
  if(ZEUS_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# zeus_add_test(NAME name SOURCES a.cpp b.cpp LIBS lib... [ENV VAR=value...] [TIMEOUT s] [SERIAL])
# SERIAL: its cases run alone (they load the machine, e.g. a real Slurm training a model, and
# would make the timing of others flaky).
# TORCH: the suite (or a program it runs) links libtorch; `make test-cuda` reruns only these
# (ctest -L torch) against the second libtorch, the rest ran once already in `make test`.
# ONE_PROCESS Suite...: each named gtest suite is one ctest entry, `<Suite>.WholeSuite`, run in
# one process, so that its SetUpTestSuite starts a real server (Slurm, PostgreSQL) once for all
# of its cases instead of once per case; each case still cleans its own state. TIMEOUT is then
# the whole suite's.
function(zeus_add_test)
  cmake_parse_arguments(T "SERIAL;TORCH" "NAME;TIMEOUT" "SOURCES;LIBS;ENV;ONE_PROCESS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set(label core)
  if(T_TORCH)
    set(label torch)
  else()
    set_property(GLOBAL APPEND PROPERTY ZEUS_CORE_TESTS ${T_NAME})
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  zeus_target_warnings(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} zeus_test_support GTest::gmock GTest::gtest_main)
  set(filter "")
  foreach(suite IN LISTS T_ONE_PROCESS)
    add_test(NAME ${suite}.WholeSuite COMMAND ${T_NAME} --gtest_filter=${suite}.*)
    set_tests_properties(${suite}.WholeSuite PROPERTIES
      ENVIRONMENT "ZEUS_TEST_BINARY_DIR=${PROJECT_BINARY_DIR};${T_ENV}" TIMEOUT ${T_TIMEOUT}
      RUN_SERIAL "${T_SERIAL}" LABELS ${label}
      # A filter that selects no case is a failure (a renamed suite), not a silent pass. A case
      # that skips prints its reason in the log (in CI, a missing server fails instead).
      FAIL_REGULAR_EXPRESSION "Running 0 tests")
    list(APPEND filter "${suite}.*")
  endforeach()
  set(discover_filter "")
  if(filter)
    list(JOIN filter ":" joined)
    set(discover_filter TEST_FILTER "-${joined}")
  endif()
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60 ${discover_filter}
    PROPERTIES ENVIRONMENT "ZEUS_TEST_BINARY_DIR=${PROJECT_BINARY_DIR};${T_ENV}" TIMEOUT ${T_TIMEOUT}
    RUN_SERIAL ${T_SERIAL} LABELS ${label})
endfunction()

# zeus_add_torch_suites_target(NAME name KEEP test...): a target that builds what the default
# build makes, less the test programs whose cases are all labelled core (zeus_add_test without
# TORCH), except those KEEP names (core programs that also hold libtorch cases). What a second
# libtorch needs (make test-cuda: ctest -L torch, the loader cases, the Python suite): the
# libraries, zeus, zeusd, the examples, the fakes and the test helpers, which the core programs
# left out do not build for anything else.
function(zeus_add_torch_suites_target)
  cmake_parse_arguments(A "" "NAME" "KEEP" ${ARGN})
  get_property(core GLOBAL PROPERTY ZEUS_CORE_TESTS)
  list(REMOVE_ITEM core ${A_KEEP})
  zeus_buildsystem_targets(all)
  set(targets "")
  foreach(t IN LISTS all)
    if(NOT t IN_LIST core)
      list(APPEND targets ${t})
    endif()
  endforeach()
  add_custom_target(${A_NAME})
  add_dependencies(${A_NAME} ${targets})
endfunction()

# zeus_buildsystem_targets(out): every target the default build makes (executables and
# libraries, not EXCLUDE_FROM_ALL), from every directory of the project.
function(zeus_buildsystem_targets out)
  set(targets "")
  set(dirs ${PROJECT_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(sub DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${sub})
    get_property(here DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS here)
      get_target_property(type ${t} TYPE)
      get_target_property(excluded ${t} EXCLUDE_FROM_ALL)
      if(type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|STATIC_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$"
         AND NOT excluded)
        list(APPEND targets ${t})
      endif()
    endforeach()
  endwhile()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# zeus_link_closure(out_targets out_files target): the targets `target` links, directly or through
# what they link (itself and aliases resolved to what they name, each once), and the absolute
# paths among those links. Generator expressions are read as their build-tree value:
# $<BUILD_INTERFACE:x> and $<LINK_ONLY:x> are x, $<INSTALL_INTERFACE:x> is nothing; any other is
# neither a target nor a path.
function(zeus_link_closure out_targets out_files target)
  set(seen "")
  set(files "")
  set(targets "")
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    if(NOT TARGET ${t} OR t IN_LIST seen)
      if(t MATCHES "^/")
        list(APPEND files "${t}")
      endif()
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(aliased ${t} ALIASED_TARGET)
    if(aliased)
      list(APPEND todo ${aliased})
      continue()
    endif()
    list(APPEND targets ${t})
    get_target_property(type ${t} TYPE)
    set(links "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${t} LINK_LIBRARIES)
      if(direct)
        list(APPEND links ${direct})
      endif()
    endif()
    get_target_property(interface ${t} INTERFACE_LINK_LIBRARIES)
    if(interface)
      list(APPEND links ${interface})
    endif()
    foreach(l IN LISTS links)
      if(l MATCHES "^\\$<INSTALL_INTERFACE:")
        continue()
      endif()
      string(REGEX REPLACE "^\\$<(BUILD_INTERFACE|LINK_ONLY):(.*)>$" "\\2" l "${l}")
      list(APPEND todo ${l})
    endforeach()
  endwhile()
  set(${out_targets} ${targets} PARENT_SCOPE)
  set(${out_files} ${files} PARENT_SCOPE)
endfunction()

# zeus_links_target(out target wanted): whether target links wanted (zeus_link_closure).
function(zeus_links_target out target wanted)
  set(${out} FALSE PARENT_SCOPE)
  if(NOT TARGET ${wanted})
    return()
  endif()
  zeus_link_closure(targets files ${target})
  get_target_property(aliased ${wanted} ALIASED_TARGET)
  if(aliased)
    set(wanted ${aliased})
  endif()
  if(wanted IN_LIST targets)
    set(${out} TRUE PARENT_SCOPE)
  endif()
endfunction()

# zeus_precompile_headers(): with ZEUS_PCH (the CI presets), the standard, fmt, spdlog and
# nlohmann/json headers that most of the project's translation units include, precompiled once
# for each set of flags a PCH must match (GCC rejects one made with other -fPIC/-fPIE settings
# or other macros its headers test): the libraries' (-fPIC), the programs' (-fPIE) and the test
# programs' (-fPIE, with GoogleTest and GoogleMock). Reused by every project target of that kind
# (REUSE_FROM), not remade per target. Targets that link libtorch keep none: its flags and
# macros (_GLIBCXX_USE_CXX11_ABI) differ, and they are 17 of about 300 translation units; nor do
# those without spdlog (the fakes: other macros). A
# header a file forgets to include is then found anyway: the builds without ZEUS_PCH (a user's
# plain build, make test-install; the wheels') still catch it in what they build.
function(zeus_precompile_headers)
  set(headers <algorithm> <atomic> <chrono> <condition_variable> <cstdint> <filesystem>
      <functional> <map> <memory> <mutex> <optional> <set> <string> <string_view> <thread>
      <unordered_map> <utility> <variant> <vector> <fmt/format.h> <nlohmann/json.hpp>
      <spdlog/spdlog.h>)
  set(dir ${PROJECT_BINARY_DIR}/zeus-pch)
  file(WRITE ${dir}/empty.cpp "// The precompiled headers' own translation unit (zeus_precompile_headers).\n")
  file(WRITE ${dir}/main.cpp "int main() { return 0; }\n")
  add_library(zeus_pch_library OBJECT ${dir}/empty.cpp)
  add_executable(zeus_pch_program ${dir}/main.cpp)
  set(providers zeus_pch_library zeus_pch_program)
  if(TARGET GTest::gtest)
    add_executable(zeus_pch_test ${dir}/main.cpp)
    target_link_libraries(zeus_pch_test PRIVATE GTest::gmock GTest::gtest)
    list(APPEND providers zeus_pch_test)
  endif()
  foreach(p IN LISTS providers)
    target_link_libraries(${p} PRIVATE fmt::fmt spdlog::spdlog nlohmann_json::nlohmann_json
                                       Threads::Threads)
    zeus_target_warnings(${p})
    target_compile_options(${p} PRIVATE -pthread)
    target_precompile_headers(${p} PRIVATE ${headers})
  endforeach()
  if(TARGET zeus_pch_test)
    target_precompile_headers(zeus_pch_test PRIVATE <gmock/gmock.h> <gtest/gtest.h>)
  endif()
  get_property(own GLOBAL PROPERTY ZEUS_OWN_TARGETS)
  zeus_buildsystem_targets(all)
  foreach(t IN LISTS all)
    if(NOT t IN_LIST own OR t IN_LIST providers)
      continue()
    endif()
    zeus_links_target(torch ${t} zeus_libtorch)
    zeus_links_target(spdlog ${t} spdlog::spdlog)
    if(torch OR NOT spdlog)
      continue()
    endif()
    # gRPC's targets give theirs -pthread (_REENTRANT), which the PCH must match: all get it.
    target_compile_options(${t} PRIVATE -pthread)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      zeus_links_target(gtest ${t} GTest::gmock)
      if(gtest AND TARGET zeus_pch_test)
        target_precompile_headers(${t} REUSE_FROM zeus_pch_test)
      else()
        target_precompile_headers(${t} REUSE_FROM zeus_pch_program)
      endif()
    else()
      target_precompile_headers(${t} REUSE_FROM zeus_pch_library)
    endif()
  endforeach()
endfunction()
