# `cmake --install`: the public headers, libpagoda.a and libpagoda.so, the CMake package
# (find_package(pagoda) → pagoda::pagoda, the shared library, and pagoda::pagoda_static) and
# pagoda.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS pagoda pagoda_shared EXPORT pagodaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pagoda DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(PAGODA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pagoda)
install(EXPORT pagodaTargets NAMESPACE pagoda:: DESTINATION ${PAGODA_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pagodaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pagodaConfig.cmake INSTALL_DESTINATION ${PAGODA_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pagodaConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pagodaConfig.cmake ${PROJECT_BINARY_DIR}/pagodaConfigVersion.cmake
  DESTINATION ${PAGODA_CMAKE_DIR})

# Relative to the .pc file's folder, so the installed tree can move (or be installed with --prefix).
file(RELATIVE_PATH PAGODA_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" PAGODA_PC_TO_PREFIX "${PAGODA_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/pagoda.pc.in ${PROJECT_BINARY_DIR}/pagoda.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pagoda.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
