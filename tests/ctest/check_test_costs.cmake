# CTestCosts.NameTests: every name in test_costs.cmake is a test of this tree (BUILD_DIR), so
# that a renamed test cannot silently lose its place at the front of the queue.
set(ZEUS_TEST_COSTS_LIST_ONLY ON)
include(${CMAKE_CURRENT_LIST_DIR}/test_costs.cmake)
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} -N WORKING_DIRECTORY ${BUILD_DIR}
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest -N in ${BUILD_DIR} failed (${rc}):\n${listing}")
endif()
set(missing "")
foreach(entry IN LISTS zeus_test_costs)
  string(REGEX REPLACE "=.*" "" name "${entry}")
  string(FIND "${listing}" ": ${name}\n" at)
  if(at EQUAL -1)
    list(APPEND missing ${name})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "tests/ctest/test_costs.cmake names tests this tree does not have: "
                      "${missing}; rename or remove them there (ctest -N lists the tests)")
endif()
list(LENGTH zeus_test_costs n)
message(STATUS "all ${n} tests of tests/ctest/test_costs.cmake are tests of ${BUILD_DIR}")
