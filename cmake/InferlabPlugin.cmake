# inferlab_add_plugin(<kind> <name> SOURCES a.cpp ... [CUDA_SOURCES a_cuda.cpp ...] [LIBS lib ...]
#                     [TESTS test_a.cpp ...])
# Builds a strategy plugin: a MODULE library libinferlab_<kind>_<name>.so (the file name the
# registry scans for), C++20, linked to inferlab::core, whose usage requirements carry what the
# headers need to match the core (BOOST_DLL_USE_STD_FS, Boost's headers). One function, two homes:
# - in the inferlab tree (plugins/<kind>/<name>/CMakeLists.txt): also warnings-as-errors and the
#   CPU flags, output into the build's plugin directory, installed beside the core, and TESTS
#   become a GoogleTest binary registered with ctest;
# - out of the tree, after find_package(inferlab) (which includes this file): output into the
#   current build folder, to be named in an experiment's [plugins] paths or INFERLAB_PLUGIN_PATH.
#   TESTS is refused there: the test helpers are not installed.
# CUDA_SOURCES (the strategy's CUDA implementation, entered in its descriptor's device map under
# `#if INFERLAB_HAVE_CUDA`) are compiled only when the core was built with CUDA, into the plugin
# and its tests alike.
# In the tree every plugin target is listed in the global property INFERLAB_PLUGIN_TARGETS; the
# target inferlab_plugins (plugins/CMakeLists.txt) builds them all.
function(inferlab_add_plugin kind name)
  cmake_parse_arguments(P "" "" "SOURCES;CUDA_SOURCES;TESTS;LIBS" ${ARGN})
  if(NOT kind MATCHES "^(attention|quantization|scheduling|decoding)$")
    message(FATAL_ERROR "inferlab_add_plugin: kind '${kind}' is not one of attention, quantization, scheduling, decoding")
  endif()
  if(NOT P_SOURCES OR P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "inferlab_add_plugin(${kind} ${name} SOURCES a.cpp ... [CUDA_SOURCES ...] [LIBS ...] [TESTS ...])"
                        " got: ${ARGN}")
  endif()
  set(in_tree FALSE)
  if(TARGET inferlab_core)
    set(in_tree TRUE)
  endif()
  get_target_property(core_definitions inferlab::core INTERFACE_COMPILE_DEFINITIONS)
  if(NOT "INFERLAB_HAVE_CUDA=1" IN_LIST core_definitions)
    set(P_CUDA_SOURCES "")
  endif()
  set(target inferlab_${kind}_${name})
  # In the tree, the sources a plugin and its test binary share (the strategy itself, e.g.
  # gptq.cpp) are compiled once, into an OBJECT library linked into both, rather than once per
  # binary (same flags either way: the plugin's).
  set(shared_sources "")
  set(test_sources ${P_TESTS})
  if(in_tree AND P_TESTS AND INFERLAB_TESTS)
    foreach(src ${P_TESTS})
      if(src IN_LIST P_SOURCES)
        list(APPEND shared_sources ${src})
      endif()
    endforeach()
  endif()
  if(shared_sources)
    set(module_sources ${P_SOURCES})
    list(REMOVE_ITEM module_sources ${shared_sources})
    list(REMOVE_ITEM test_sources ${shared_sources})
    add_library(${target}_objects OBJECT ${shared_sources})
    target_link_libraries(${target}_objects PRIVATE inferlab::core inferlab_warnings inferlab_cpu_flags ${P_LIBS})
    add_library(${target} MODULE ${module_sources} ${P_CUDA_SOURCES} $<TARGET_OBJECTS:${target}_objects>)
  else()
    add_library(${target} MODULE ${P_SOURCES} ${P_CUDA_SOURCES})
  endif()
  target_link_libraries(${target} PRIVATE inferlab::core ${P_LIBS})
  set_target_properties(${target} PROPERTIES PREFIX "lib" CXX_EXTENSIONS OFF)
  if(in_tree)
    target_link_libraries(${target} PRIVATE inferlab_warnings inferlab_cpu_flags)
    set_target_properties(${target} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${INFERLAB_PLUGIN_DIR}
      INSTALL_RPATH "$ORIGIN/..")
    install(TARGETS ${target} LIBRARY DESTINATION ${INFERLAB_INSTALL_PLUGIN_DIR})
    set_property(GLOBAL APPEND PROPERTY INFERLAB_PLUGIN_TARGETS ${target})
  elseif(P_TESTS)
    message(FATAL_ERROR "inferlab_add_plugin(${kind} ${name}): TESTS is only supported in the inferlab tree;"
                        " add your own test executable linked to inferlab::core")
  endif()
  if(P_TESTS AND INFERLAB_TESTS)
    set(test_target test_${kind}_${name})
    add_executable(${test_target} ${test_sources} ${P_CUDA_SOURCES})
    if(shared_sources)
      target_sources(${test_target} PRIVATE $<TARGET_OBJECTS:${target}_objects>)
    endif()
    target_link_libraries(${test_target} PRIVATE inferlab_core inferlab_test_support inferlab_warnings
                          inferlab_test_flags GTest::gtest_main ${P_LIBS})
    target_include_directories(${test_target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    add_dependencies(${test_target} ${target} inferlab_plugins)  # tests may load other plugins
    gtest_discover_tests(${test_target} DISCOVERY_TIMEOUT 60
      PROPERTIES ENVIRONMENT "INFERLAB_PLUGIN_PATH=${INFERLAB_PLUGIN_DIR}")
  endif()
endfunction()
