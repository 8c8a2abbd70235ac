# inferlab_add_plugin(<kind> <name> SOURCES a.cpp ... [TESTS test_a.cpp ...])
# Builds plugins/<kind>/<name> as a shared library named inferlab_<kind>_<name> in the
# plugin directory the registry scans, and its tests as a GoogleTest binary registered with ctest.
# Every plugin target is listed in the global property INFERLAB_PLUGIN_TARGETS; the target
# inferlab_plugins (plugins/CMakeLists.txt) builds them all.
function(inferlab_add_plugin kind name)
  cmake_parse_arguments(P "" "" "SOURCES;TESTS;LIBS" ${ARGN})
  set(target inferlab_${kind}_${name})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE inferlab_core inferlab_warnings inferlab_cpu_flags ${P_LIBS})
  set_target_properties(${target} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${INFERLAB_PLUGIN_DIR}
    PREFIX "lib")
  set_property(GLOBAL APPEND PROPERTY INFERLAB_PLUGIN_TARGETS ${target})
  if(P_TESTS AND INFERLAB_TESTS)
    set(test_target test_${kind}_${name})
    add_executable(${test_target} ${P_TESTS})
    target_link_libraries(${test_target} PRIVATE inferlab_core inferlab_test_support inferlab_warnings
                          inferlab_cpu_flags GTest::gtest_main ${P_LIBS})
    target_include_directories(${test_target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    add_dependencies(${test_target} ${target})
    gtest_discover_tests(${test_target} DISCOVERY_TIMEOUT 60
      PROPERTIES ENVIRONMENT "INFERLAB_PLUGIN_PATH=${INFERLAB_PLUGIN_DIR}")
  endif()
endfunction()
