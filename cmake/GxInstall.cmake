# Install rules: libgx.so (versioned SONAME), the public headers, a
# pkg-config file and a CMake package exporting gx::gx.
include(CMakePackageConfigHelpers)

install(TARGETS gx gx_public_headers EXPORT gxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/gx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT gxTargets NAMESPACE gx:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gx)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/gxConfig.cmake.in
  ${CMAKE_BINARY_DIR}/gxConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gx)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/gxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/gxConfig.cmake ${CMAKE_BINARY_DIR}/gxConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gx)

file(RELATIVE_PATH GX_PC_RELATIVE_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/gx.pc.in ${CMAKE_BINARY_DIR}/gx.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/gx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
include(${CMAKE_CURRENT_LIST_DIR}/GxPython.cmake)
