# The extension zeus_cpp._core of the pip wheels, once per CPython version, in the wheel's own
# build (scripts/wheels/build-wheels.sh): the top-level project's zeus_core, compiled once per
# architecture, is linked into each. python/CMakeLists.txt is the source build's (pip install
# ./python); both compile the same ext/ sources.
#
# ZEUS_WHEEL_PYTHONS: entries TAG=INCLUDE_DIR (cp39=/.../include/python3.9); the module lands in
# ${PROJECT_BINARY_DIR}/python/TAG/. ZEUS_WHEEL_PYBIND11_INCLUDE: pybind11's headers (the pinned
# PyPI package's).
if(NOT ZEUS_WHEEL_PYBIND11_INCLUDE)
  message(FATAL_ERROR "ZEUS_WHEEL_PYTHONS needs ZEUS_WHEEL_PYBIND11_INCLUDE")
endif()
set(zeus_ext_sources
  ${CMAKE_CURRENT_LIST_DIR}/ext/module.cpp ${CMAKE_CURRENT_LIST_DIR}/ext/bind_cluster.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ext/bind_device.cpp ${CMAKE_CURRENT_LIST_DIR}/ext/bind_metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ext/bind_errors.cpp ${CMAKE_CURRENT_LIST_DIR}/ext/bind_grid.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ext/bind_job.cpp ${CMAKE_CURRENT_LIST_DIR}/ext/bind_monitor.cpp)
# Only the module's entry point is exported: the libc++ and the libraries linked in stay private,
# so they never meet another extension's (PyTorch's libstdc++, say) in the same process.
set(zeus_ext_exports ${PROJECT_BINARY_DIR}/python/exports.map)
file(WRITE ${zeus_ext_exports} "{ global: PyInit__core; local: *; };\n")
add_custom_target(zeus_wheel_extensions)
foreach(entry IN LISTS ZEUS_WHEEL_PYTHONS)
  if(NOT entry MATCHES "^cp([0-9]+)=(.+)$")
    message(FATAL_ERROR "ZEUS_WHEEL_PYTHONS: '${entry}' is not TAG=INCLUDE_DIR (cp39=/path)")
  endif()
  set(tag cp${CMAKE_MATCH_1})
  set(include_dir ${CMAKE_MATCH_2})
  if(NOT EXISTS ${include_dir}/Python.h)
    message(FATAL_ERROR "ZEUS_WHEEL_PYTHONS: no Python.h in ${include_dir} (${tag})")
  endif()
  set(target zeus_cpp_core_${tag})
  add_library(${target} MODULE ${zeus_ext_sources})
  target_include_directories(${target} SYSTEM PRIVATE ${include_dir} ${ZEUS_WHEEL_PYBIND11_INCLUDE})
  target_link_libraries(${target} PRIVATE zeus_core zeus_config nlohmann_json::nlohmann_json)
  target_link_options(${target} PRIVATE -Wl,--version-script=${zeus_ext_exports})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME _core PREFIX ""
    SUFFIX .cpython-${CMAKE_MATCH_1}-${CMAKE_SYSTEM_PROCESSOR}-linux-gnu.so
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/python/${tag}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  zeus_target_warnings(${target})
  add_dependencies(zeus_wheel_extensions ${target})
endforeach()
