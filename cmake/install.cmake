# `cmake --install <build> [--prefix P]` installs OptiReduce like a library:
#   P/lib/liboptireduce.so.0.1.0 (soname liboptireduce.so.0) + liboptireduce.so, the same for
#     liboptireduce-engine.so (the engine's C entry point without MPI: the torch backend's) and
#     liboptireduce-mpich.so when it was built;
#   P/include/optireduce/*.h* (the public C API and the transport interface);
#   P/bin/optireduce-run, optireduce-info, optireduce-bench;
#   P/lib/pkgconfig/optireduce.pc;
#   P/lib/cmake/optireduce/optireduceConfig.cmake (+ version file and exported targets):
#     optireduce::optireduce (the C API of include/optireduce/optireduce.h), and
#     optireduce::optireduce-mpich, optireduce::optireduce-run when they were built.
# The launcher finds P/lib/liboptireduce.so from P/bin, so the tree can be moved as a whole.
# Included at the end of the top CMakeLists.txt (after the tests are enabled).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_optireduce_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/optireduce)
file(RELATIVE_PATH _optireduce_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})

# --- Libraries: soname and version, headers from the install tree ------------------------------
set(_optireduce_libraries optireduce optireduce-engine)
if(TARGET optireduce-mpich)
  list(APPEND _optireduce_libraries optireduce-mpich)
endif()
foreach(_lib IN LISTS _optireduce_libraries)
  set_target_properties(${_lib} PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    # The MPI library it links may live outside the linker's default path.
    INSTALL_RPATH_USE_LINK_PATH ON)
  # The include directory users see: the source tree while building, P/include once installed.
  set_property(TARGET ${_lib} PROPERTY INTERFACE_INCLUDE_DIRECTORIES
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>;$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
endforeach()
install(TARGETS ${_optireduce_libraries} EXPORT optireduceTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/optireduce DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

# --- Tools -----------------------------------------------------------------------------------
if(TARGET optireduce-run)
  install(TARGETS optireduce-run EXPORT optireduceTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(_tool optireduce-info optireduce-bench)
  if(TARGET ${_tool})
    # Whatever they link of the project's is found next door, wherever the tree is.
    set_target_properties(${_tool} PROPERTIES INSTALL_RPATH "$ORIGIN/${_optireduce_bin_to_lib}"
      INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${_tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# --- pkg-config: written at install time, so --prefix lands in it ---------------------------------
set(_optireduce_pc_mpich "")
if(TARGET optireduce-mpich)
  set(_optireduce_pc_mpich "preload_mpich=\${libdir}/liboptireduce-mpich.so")
endif()
set(_optireduce_pc ${PROJECT_BINARY_DIR}/install/optireduce.pc)
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(OPTIREDUCE_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(OPTIREDUCE_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(OPTIREDUCE_PC_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(OPTIREDUCE_PC_VERSION \"${PROJECT_VERSION}\")
  set(OPTIREDUCE_PC_MPICH \"${_optireduce_pc_mpich}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/optireduce.pc.in\" \"${_optireduce_pc}\" @ONLY)
")
install(FILES ${_optireduce_pc} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- CMake package ---------------------------------------------------------------------------
set(OPTIREDUCE_CONFIG_LIBDIR ${CMAKE_INSTALL_LIBDIR})
set(OPTIREDUCE_CONFIG_BINDIR ${CMAKE_INSTALL_BINDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/optireduceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/optireduceConfig.cmake
  INSTALL_DESTINATION ${_optireduce_cmake_dir}
  PATH_VARS OPTIREDUCE_CONFIG_LIBDIR OPTIREDUCE_CONFIG_BINDIR)
# 0.x: the soname is liboptireduce.so.0, so any 0.y.z satisfies a request for 0.y'.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/optireduceConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(EXPORT optireduceTargets NAMESPACE optireduce:: DESTINATION ${_optireduce_cmake_dir})
install(FILES ${PROJECT_BINARY_DIR}/install/optireduceConfig.cmake
  ${PROJECT_BINARY_DIR}/install/optireduceConfigVersion.cmake DESTINATION ${_optireduce_cmake_dir})

# --- Test: install into a temporary prefix and use what landed there -------------------------------
if(OPTIREDUCE_BUILD_TESTS AND TARGET optireduce-run)
  set(_optireduce_expect_mpich 0)
  if(TARGET optireduce-mpich)
    set(_optireduce_expect_mpich 1)
  endif()
  add_test(NAME install.tree
    COMMAND ${PROJECT_SOURCE_DIR}/tests/install/check_install.sh
      ${CMAKE_COMMAND} ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}/tests/install/consumer
      ${CMAKE_C_COMPILER} ${_optireduce_expect_mpich} ${CMAKE_INSTALL_LIBDIR} ${PROJECT_VERSION})
  set_tests_properties(install.tree PROPERTIES LABELS install TIMEOUT 300)
endif()
