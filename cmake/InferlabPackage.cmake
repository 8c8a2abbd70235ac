# The installed CMake package: find_package(inferlab) gives the imported target inferlab::core
# and inferlab_add_plugin() (the same cmake/InferlabPlugin.cmake the tree uses).
include(CMakePackageConfigHelpers)
set(INFERLAB_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/inferlab)
install(EXPORT inferlabTargets NAMESPACE inferlab:: DESTINATION ${INFERLAB_INSTALL_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/inferlabConfig.cmake.in
  ${PROJECT_BINARY_DIR}/inferlabConfig.cmake INSTALL_DESTINATION ${INFERLAB_INSTALL_CMAKE_DIR})
# 0.x: a new minor version may change the headers; the plugin ABI number is checked at load time.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/inferlabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/inferlabConfig.cmake ${PROJECT_BINARY_DIR}/inferlabConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/InferlabPlugin.cmake DESTINATION ${INFERLAB_INSTALL_CMAKE_DIR})
