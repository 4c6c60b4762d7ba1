# Installed package (relocatable): headers, libxpti.a, libxptifw.so, collectors, a
# pkg-config file and a CMake package config (find_package(xptrace)).
include(CMakePackageConfigHelpers)
set(XPTRACE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/xptrace)
install(EXPORT xptraceTargets NAMESPACE xptrace:: DESTINATION ${XPTRACE_CMAKE_DIR})
file(WRITE ${CMAKE_BINARY_DIR}/xptraceConfig.cmake.in [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/xptraceTargets.cmake")
]=])
configure_package_config_file(${CMAKE_BINARY_DIR}/xptraceConfig.cmake.in
  ${CMAKE_BINARY_DIR}/xptraceConfig.cmake INSTALL_DESTINATION ${XPTRACE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/xptraceConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/xptraceConfig.cmake ${CMAKE_BINARY_DIR}/xptraceConfigVersion.cmake
  DESTINATION ${XPTRACE_CMAKE_DIR})

file(WRITE ${CMAKE_BINARY_DIR}/xpti.pc.in [=[
prefix=${pcfiledir}/../..
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: xpti
Description: xptrace XPTI instrumentation proxy (links libxpti.a; loads the dispatcher at run time)
Version: @PROJECT_VERSION@
Libs: -L${libdir} -lxpti
Libs.private: -ldl -lpthread
Cflags: -I${includedir}
]=])
configure_file(${CMAKE_BINARY_DIR}/xpti.pc.in ${CMAKE_BINARY_DIR}/xpti.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/xpti.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
