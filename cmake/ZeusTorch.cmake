# Finding libtorch: Debian's libtorch-dev (1.13, CPU only; the default), or the libtorch inside
# PyTorch's wheel (2.x with CUDA and NCCL) when ZEUS_TORCH_PYTHON names an interpreter whose
# environment has torch. The wheel build handles the four traps of docs/gpu.md, each with a
# configure-time check that stops with a message saying what went wrong and what to do:
#   1. c10 (and every torch library) must come from the wheel, never from Debian's libtorch-dev;
#   2. the wheel's nvidia/*/lib directories come first for the linker (the toolkit's NCCL is older
#      and lacks symbols libtorch_cuda needs);
#   3. the wheel's nccl.h comes first for the compiler (ProcessGroupNCCL::Options embeds
#      ncclConfig_t by value: another NCCL's header corrupts memory silently);
#   4. the wheel bundles fmt 12 headers, which would shadow Debian's fmt 9 that spdlog is built
#      with: zeus's own fmt include directory comes before torch's.
# Sets ZEUS_TORCH_VERSION, ZEUS_TORCH_CUDA (ON when libtorch has CUDA and NCCL) and the imported
# target zeus::libtorch that zeus_torch links.

set(ZEUS_TORCH_PYTHON "" CACHE FILEPATH
  "Interpreter of an environment with PyPI torch >= 2.11 to build against (empty: Debian's libtorch-dev)")

set(kZeusMinWheelTorch 2.11)

function(zeus_fail_torch what)
  message(FATAL_ERROR "zeus-cpp, libtorch from ${ZEUS_TORCH_PYTHON}: ${what}")
endfunction()

# Runs ZEUS_TORCH_PYTHON to locate torch without importing it (importing loads CUDA).
function(zeus_locate_wheel out_root out_site out_version out_nccl_pin)
  execute_process(
    COMMAND "${ZEUS_TORCH_PYTHON}" -c [=[
import importlib.util, pathlib, re
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    raise SystemExit("torch is not installed for this interpreter")
root = pathlib.Path(spec.submodule_search_locations[0]).resolve()
text = (root / "version.py").read_text()
print(root); print(root.parent); print(re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text).group(1))
# The NCCL that torch's own metadata pins (Requires-Dist: nvidia-nccl-cuNN==X.Y.Z).
import importlib.metadata as md
pins = [m.group(1) for r in (md.distribution("torch").requires or [])
        for m in [re.match(r"nvidia-nccl-cu\d+\s*==\s*([0-9.]+)", r)] if m]
print(pins[0] if pins else "none")
]=]
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    zeus_fail_torch("cannot locate torch (${err}); run scripts/install-torch.sh, or point ZEUS_TORCH_PYTHON at an interpreter that has torch")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  list(GET lines 0 root)
  list(GET lines 1 site)
  list(GET lines 2 version)
  list(GET lines 3 nccl_pin)
  set(${out_nccl_pin} "${nccl_pin}" PARENT_SCOPE)
  set(${out_root} "${root}" PARENT_SCOPE)
  set(${out_site} "${site}" PARENT_SCOPE)
  set(${out_version} "${version}" PARENT_SCOPE)
endfunction()

# Appends to `out` the files of imported target `target` and of the imported targets it links,
# for every configuration.
function(zeus_imported_locations target out)
  set(files ${${out}})
  zeus_link_closure(targets paths ${target})
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    get_target_property(configs ${t} IMPORTED_CONFIGURATIONS)
    foreach(suffix IN ITEMS "" ${configs})
      if(suffix STREQUAL "")
        get_target_property(location ${t} IMPORTED_LOCATION)
      else()
        get_target_property(location ${t} IMPORTED_LOCATION_${suffix})
      endif()
      if(location)
        list(APPEND files "${location}")
      endif()
    endforeach()
  endforeach()
  list(APPEND files ${paths})
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# Trap 1: every library libtorch brings must lie in the wheel (torch/ or nvidia/) or the CUDA
# toolkit; a Debian libc10.so beside the wheel's aborts the program at start.
function(zeus_check_torch_libraries root site)
  set(found "")
  foreach(item IN LISTS TORCH_LIBRARIES)
    if(TARGET ${item})
      zeus_imported_locations(${item} found)
    elseif(item MATCHES "^/")
      list(APPEND found "${item}")
    endif()
  endforeach()
  foreach(lib IN LISTS found)
    get_filename_component(real "${lib}" REALPATH)
    get_filename_component(name "${lib}" NAME)
    if(name MATCHES "^lib(c10|torch)" AND NOT real MATCHES "^${site}/")
      zeus_fail_torch("${name} resolved to ${real}, outside the wheel (${root}); another libtorch (Debian's libtorch-dev?) was found first. Mixing two libc10 aborts at start: remove the other one from CMAKE_PREFIX_PATH, or configure in a fresh build directory")
    endif()
    if(name MATCHES "^lib(cudart|nvrtc|nccl)\\.so" AND NOT real MATCHES "^${site}/")
      zeus_fail_torch("${name} resolved to ${real}, outside the wheel's nvidia/ packages; libtorch was built against the wheel's CUDA runtime, and the first ${name} a program loads is the one every library uses. Configure in a fresh build directory")
    endif()
  endforeach()
endfunction()

# Trap 3: the nccl.h the compiler finds first must be the NCCL that torch's metadata pins (the
# one libtorch_cuda was built and is loaded with), not merely the header in the wheel's folder.
function(zeus_check_nccl_header nccl_include pinned)
  file(STRINGS "${nccl_include}/nccl.h" lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  set(version "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#define NCCL_[A-Z]+ +([0-9]+).*" "\\1" n "${line}")
    list(APPEND version ${n})
  endforeach()
  list(JOIN version "." version)
  set(probe_dir "${CMAKE_BINARY_DIR}/zeus-checks")
  file(WRITE "${probe_dir}/nccl_probe.cpp" "#include <nccl.h>
#include <cstdio>
int main() { std::printf(\"%d.%d.%d\", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH); }
")
  get_target_property(torch_includes torch INTERFACE_INCLUDE_DIRECTORIES)
  try_run(run_rc compile_ok "${probe_dir}/build" "${probe_dir}/nccl_probe.cpp"
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${nccl_include};${torch_includes};${CUDAToolkit_INCLUDE_DIRS}"
    COMPILE_OUTPUT_VARIABLE compile_log RUN_OUTPUT_VARIABLE seen)
  if(NOT compile_ok)
    zeus_fail_torch("cannot compile against ${nccl_include}/nccl.h: ${compile_log}")
  endif()
  if(pinned STREQUAL "none")
    zeus_fail_torch("torch's metadata pins no nvidia-nccl wheel (Requires-Dist); this is not a CUDA build of torch")
  endif()
  if(NOT version STREQUAL pinned)
    zeus_fail_torch("${nccl_include}/nccl.h is NCCL ${version}, but torch pins NCCL ${pinned} (its Requires-Dist); ProcessGroupNCCL's options would be laid out wrongly. Reinstall the pinned one: pip install nvidia-nccl-cu13==${pinned}")
  endif()
  if(NOT seen STREQUAL pinned)
    zeus_fail_torch("the compiler finds NCCL ${seen}'s nccl.h, but torch pins NCCL ${pinned} (${nccl_include}); ProcessGroupNCCL's options would be laid out wrongly. The wheel's nvidia/nccl/include must come first")
  endif()
  set(ZEUS_NCCL_VERSION "${version}" PARENT_SCOPE)
endfunction()

# Trap 4: a directory holding only a link to the fmt that spdlog was built with, put before
# torch's include directories so that <fmt/...> is that fmt for every zeus-cpp file; checked by
# compiling against torch's include path.
function(zeus_fmt_shim out_dir)
  get_target_property(fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  set(fmt_header "")
  foreach(dir IN LISTS fmt_includes)
    if(EXISTS "${dir}/fmt/core.h")
      set(fmt_header "${dir}/fmt")
      break()
    endif()
  endforeach()
  if(fmt_header STREQUAL "")
    foreach(dir IN ITEMS /usr/include /usr/local/include)
      if(EXISTS "${dir}/fmt/core.h")
        set(fmt_header "${dir}/fmt")
        break()
      endif()
    endforeach()
  endif()
  if(fmt_header STREQUAL "")
    zeus_fail_torch("cannot find the fmt headers of fmt::fmt (${fmt_includes})")
  endif()
  file(STRINGS "${fmt_header}/core.h" fmt_line REGEX "^#define FMT_VERSION ")
  string(REGEX REPLACE "^#define FMT_VERSION ([0-9]+).*" "\\1" fmt_version "${fmt_line}")
  set(shim "${CMAKE_BINARY_DIR}/zeus-checks/fmt-shim")
  file(MAKE_DIRECTORY "${shim}")
  file(CREATE_LINK "${fmt_header}" "${shim}/fmt" SYMBOLIC)
  set(probe_dir "${CMAKE_BINARY_DIR}/zeus-checks")
  file(WRITE "${probe_dir}/fmt_probe.cpp" "#include <fmt/core.h>
static_assert(FMT_VERSION == ${fmt_version}, \"<fmt/core.h> is not the fmt spdlog uses\");
int main() {}
")
  get_target_property(torch_includes torch INTERFACE_INCLUDE_DIRECTORIES)
  try_compile(compile_ok "${probe_dir}/fmt-build" "${probe_dir}/fmt_probe.cpp"
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${shim};${torch_includes}"
    OUTPUT_VARIABLE compile_log)
  if(NOT compile_ok)
    zeus_fail_torch("with torch's include directories, <fmt/core.h> is not fmt ${fmt_version} (the wheel bundles fmt 12 in ${ZEUS_TORCH_ROOT}/include/fmt): ${compile_log}")
  endif()
  set(${out_dir} "${shim}" PARENT_SCOPE)
endfunction()

macro(zeus_find_torch)
  if(ZEUS_TORCH_PYTHON STREQUAL "")
    find_package(Torch REQUIRED)
    set(ZEUS_TORCH_FLAVOR "debian")
    set(ZEUS_TORCH_SITE "")
    set(ZEUS_TORCH_CUDA OFF)
    set(ZEUS_WHEEL_NVIDIA_LIB_DIRS "")
    add_library(zeus_libtorch INTERFACE)
    target_link_libraries(zeus_libtorch INTERFACE ${TORCH_LIBRARIES})
    target_include_directories(zeus_libtorch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  else()
    zeus_locate_wheel(ZEUS_TORCH_ROOT ZEUS_TORCH_SITE ZEUS_TORCH_WHEEL_VERSION ZEUS_TORCH_NCCL_PIN)
    string(REGEX MATCH "^[0-9]+\\.[0-9]+(\\.[0-9]+)?" wheel_numeric "${ZEUS_TORCH_WHEEL_VERSION}")
    if(wheel_numeric VERSION_LESS kZeusMinWheelTorch)
      zeus_fail_torch("torch ${ZEUS_TORCH_WHEEL_VERSION} is older than ${kZeusMinWheelTorch}; use scripts/install-torch.sh (pins 2.15.0) or a newer environment")
    endif()
    if(NOT EXISTS "${ZEUS_TORCH_ROOT}/share/cmake/Torch/TorchConfig.cmake")
      zeus_fail_torch("${ZEUS_TORCH_ROOT} has no share/cmake/Torch/TorchConfig.cmake; is this PyPI's torch wheel?")
    endif()
    file(GLOB ZEUS_WHEEL_NVIDIA_LIB_DIRS LIST_DIRECTORIES true "${ZEUS_TORCH_SITE}/nvidia/*/lib")
    set(nccl_include "${ZEUS_TORCH_SITE}/nvidia/nccl/include")
    if(NOT EXISTS "${nccl_include}/nccl.h")
      zeus_fail_torch("the wheel's NCCL header ${nccl_include}/nccl.h is missing (package nvidia-nccl-cu13); reinstall torch")
    endif()
    # The wheel's CMake config enables CUDA: it needs an nvcc whose version equals the toolkit's.
    if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
    # CMake 3.25 copies C++20 into the CUDA standard and then fails ("CUDA20"); no .cu file is
    # compiled, so 17 is only what CMake checks.
    set(CMAKE_CUDA_STANDARD 17)
    # Nothing is compiled for the GPU: no architecture to detect, and none for Caffe2's config to
    # warn about (it does whenever CMAKE_CUDA_ARCHITECTURES is defined, which enabling CUDA does).
    set(TORCH_CUDA_ARCH_LIST "9.0")
    enable_language(CUDA)
    unset(CMAKE_CUDA_ARCHITECTURES CACHE)
    unset(CMAKE_CUDA_ARCHITECTURES)
    # Kineto (the profiler) is linked into libtorch_cpu; TorchConfig looks for a library of its
    # own and warns when there is none.
    set(kineto_LIBRARY "${ZEUS_TORCH_ROOT}/lib/libtorch_cpu.so" CACHE FILEPATH "inside libtorch_cpu" FORCE)
    # Trap 1, before the search: the libraries TorchConfig looks up by find_library are pinned to
    # the wheel, so a Debian libc10.so in /usr/lib cannot win the search.
    foreach(pin IN ITEMS c10:c10 C10_CUDA:c10_cuda TORCH:torch)
      string(REPLACE ":" ";" pair "${pin}")
      list(GET pair 0 var)
      list(GET pair 1 lib)
      set(${var}_LIBRARY "${ZEUS_TORCH_ROOT}/lib/lib${lib}.so" CACHE FILEPATH "pinned to the wheel" FORCE)
    endforeach()
    # TorchConfig finds Caffe2Config with find_dependency, which searches the system first:
    # Debian's Caffe2 config would bring Debian's c10 target.
    # The CUDA runtime and NVRTC the wheel ships (the toolkit's are older: a binary that loads
    # /usr/local/cuda's libcudart.so.13 first gives libtorch that one).
    foreach(pin IN ITEMS cudart:CUDA_cudart_LIBRARY nvrtc:CUDA_nvrtc_LIBRARY nvrtc:CUDA_NVRTC_LIB)
      string(REPLACE ":" ";" pair "${pin}")
      list(GET pair 0 lib)
      list(GET pair 1 var)
      file(GLOB candidates "${ZEUS_TORCH_SITE}/nvidia/*/lib/lib${lib}.so.[0-9]*")
      list(FILTER candidates EXCLUDE REGEX "builtins")
      if(NOT candidates)
        zeus_fail_torch("the wheel has no lib${lib}.so under ${ZEUS_TORCH_SITE}/nvidia/*/lib; reinstall torch")
      endif()
      list(GET candidates 0 first)
      set(${var} "${first}" CACHE FILEPATH "pinned to the wheel" FORCE)
    endforeach()
    set(Torch_DIR "${ZEUS_TORCH_ROOT}/share/cmake/Torch" CACHE PATH "the wheel's TorchConfig" FORCE)
    set(Caffe2_DIR "${ZEUS_TORCH_ROOT}/share/cmake/Caffe2" CACHE PATH "the wheel's Caffe2Config" FORCE)
    find_package(Torch REQUIRED NO_DEFAULT_PATH PATHS "${ZEUS_TORCH_ROOT}/share/cmake/Torch")
    zeus_check_torch_libraries("${ZEUS_TORCH_ROOT}" "${ZEUS_TORCH_SITE}")
    zeus_check_nccl_header("${nccl_include}" "${ZEUS_TORCH_NCCL_PIN}")
    set(ZEUS_TORCH_FLAVOR "wheel")
    set(ZEUS_TORCH_CUDA ON)
    add_library(zeus_libtorch INTERFACE)
    # Trap 3 and 4: the wheel's NCCL header first; then Debian's fmt (through the fmt shim below),
    # then torch's own include directories.
    zeus_fmt_shim(fmt_shim)
    target_include_directories(zeus_libtorch SYSTEM BEFORE INTERFACE "${nccl_include}" "${fmt_shim}")
    target_link_libraries(zeus_libtorch INTERFACE ${TORCH_LIBRARIES})
    # c10d's ProcessGroupGloo.hpp includes Gloo's headers, which the wheel does not ship.
    find_path(ZEUS_GLOO_INCLUDE_DIR gloo/algorithm.h DOC "Gloo's headers (libgloo-dev)")
    if(NOT ZEUS_GLOO_INCLUDE_DIR)
      zeus_fail_torch("the wheel has no Gloo headers, which ProcessGroupGloo.hpp includes, and none were found: install libgloo-dev (scripts/install-deps.sh), or pass -DZEUS_GLOO_INCLUDE_DIR=<dir holding gloo/>")
    endif()
    target_include_directories(zeus_libtorch SYSTEM INTERFACE "${ZEUS_GLOO_INCLUDE_DIR}")
    # Trap 2: the wheel's NVIDIA libraries first for the linker, for libraries that libtorch_cuda
    # needs (rpath-link) and for those named directly.
    foreach(dir IN LISTS ZEUS_WHEEL_NVIDIA_LIB_DIRS)
      target_link_options(zeus_libtorch INTERFACE "LINKER:-rpath-link,${dir}")
    endforeach()
    target_link_directories(zeus_libtorch BEFORE INTERFACE ${ZEUS_WHEEL_NVIDIA_LIB_DIRS})
    # Trap 5: torch 2.11's libtorch.so exports ~180 std::filesystem functions of a newer
    # libstdc++ (GCC 13's), and a program that loads it before libstdc++ calls those instead of
    # its own. Its remove_all calls recursive_directory_iterator::__erase, a weak reference that
    # an older libstdc++ (Debian bookworm's GCC 12) lacks: the call jumps to address 0. So
    # libstdc++ is the first library the program needs (link options precede the objects and
    # libraries on CMake's link line), and the standard library's symbols resolve to it.
    target_link_options(zeus_libtorch INTERFACE "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
  endif()
  set(ZEUS_TORCH_VERSION "${Torch_VERSION}")
  add_library(zeus::libtorch ALIAS zeus_libtorch)
  if(ZEUS_TORCH_CUDA)
    message(STATUS "zeus-cpp: libtorch ${Torch_VERSION} from the wheel (${ZEUS_TORCH_ROOT}), CUDA + NCCL ${ZEUS_NCCL_VERSION}")
  else()
    message(STATUS "zeus-cpp: libtorch ${Torch_VERSION} (Debian, CPU only)")
  endif()
endmacro()
