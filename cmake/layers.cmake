# Qualified includes per layer: a target sees the headers of a layer only when it links it, as
# "optireduce/<layer>/<file>.hpp", so a wrong dependency between layers fails to build. Each
# layer's folder is exposed under a generated include root in the build tree.
function(optireduce_layer target layer folder)
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  set(link ${root}/optireduce/${layer})
  if(NOT EXISTS ${link})
    file(MAKE_DIRECTORY ${root}/optireduce)
    file(CREATE_LINK ${folder} ${link} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${root})
endfunction()

# A transport module: liboptireduce-transport-<name>.so beside the library, exporting only its
# entry point, loaded with dlopen on first use.
function(optireduce_transport_module name)
  cmake_parse_arguments(PARSE_ARGV 1 M "" "" "SOURCES;LINK")
  set(target optireduce-transport-${name})
  add_library(${target} MODULE ${M_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "lib" OUTPUT_NAME optireduce-transport-${name}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/transport_module.map)
  target_link_libraries(${target} PRIVATE ${M_LINK})
  target_link_options(${target} PRIVATE
    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/transport_module.map -Wl,--as-needed)
  # Every symbol resolved at link time, except in clang's sanitizer builds, whose runtime only the
  # executable carries.
  if(NOT (OPTIREDUCE_SANITIZE AND CMAKE_CXX_COMPILER_ID MATCHES "Clang"))
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
