# Layering probe: no source outside src/zeus/device/ names a GPU vendor's library in code (an
# identifier such as nvmlDevice_t, device::nvml:: or amdsmi_init, or an include of device/nvml/...). Comments
# and string literals may name it (messages say "NVML"); the fake library and the tests aside,
# and common/env.{h,cpp}: the catalogue of every variable the programs read (ZEUS_NVML_LIBRARY is
# one; common_test requires each to be declared there), which no backend code is in.
# Usage: cmake -DROOT=<tree> -P vendor_names.cmake; fails listing each file:line that does.
if(NOT ROOT)
  message(FATAL_ERROR "vendor_names.cmake: pass -DROOT=<source tree>")
endif()
set(vendors "[Nn][Vv][Mm][Ll]|[Aa][Mm][Dd]_?[Ss][Mm][Ii]")  # NVML; AMD SMI (amdsmi, amd_smi)
file(GLOB_RECURSE sources RELATIVE ${ROOT}
  ${ROOT}/src/zeus/*.h ${ROOT}/src/zeus/*.cpp ${ROOT}/apps/*.h ${ROOT}/apps/*.cpp
  ${ROOT}/python/ext/*.h ${ROOT}/python/ext/*.cpp)
set(found "")
foreach(file IN LISTS sources)
  if(file MATCHES "^src/zeus/device/" OR file MATCHES "^src/zeus/common/env\\.(h|cpp)$")
    continue()
  endif()
  file(STRINGS ${ROOT}/${file} lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    set(code "${line}")
    if(NOT code MATCHES "^[ \t]*#[ \t]*include")
      string(REGEX REPLACE "\"([^\"\\\\]|\\\\.)*\"" "\"\"" code "${code}")  # string literals
    endif()
    string(REGEX REPLACE "//.*$" "" code "${code}")
    if(code MATCHES "${vendors}")
      list(APPEND found "${file}:${n}: ${line}")
    endif()
  endforeach()
endforeach()
if(found)
  list(JOIN found "\n  " listed)
  message(FATAL_ERROR "a GPU vendor's library is named outside src/zeus/device/ (open GPUs "
    "through device/discovery.h, the registry, instead):\n  ${listed}")
endif()
message(STATUS "vendor names: ${ROOT}: none outside src/zeus/device/")
