# A static library of kernels built once per SIMD level, the level chosen by CPU at run time. Each
# kernel is an object library of its own, so that nothing of the engine is compiled with a kernel's
# SIMD flags (a wider instruction inlined into engine code would fault on a CPU without it), and so
# that one source can be built for several levels, each time with its flags and definitions.
#   optireduce_simd_library(<target> <layer>
#     SOURCES <file>...                    compiled as the rest of the project (the dispatch)
#     SCALAR <file>...                     the reference the others are tested against: -O2, not vectorized
#     KERNEL <file> <flag>... [KERNEL ...] -O3 and the flags of its level (-D... among them); a file
#                                          may stand in several KERNELs)
function(optireduce_simd_library target layer)
  set(mode "")
  set(kernel "")
  set(sources "")
  set(kernels 0)
  foreach(arg IN LISTS ARGN)
    if(arg STREQUAL "SOURCES" OR arg STREQUAL "SCALAR" OR arg STREQUAL "KERNEL")
      set(mode ${arg})
      set(kernel "")
    elseif(mode STREQUAL "SOURCES")
      list(APPEND sources ${arg})
    elseif(mode STREQUAL "SCALAR")
      list(APPEND sources ${arg})
      set_source_files_properties(${arg} PROPERTIES COMPILE_OPTIONS "-O2;-fno-tree-vectorize;-fno-tree-slp-vectorize")
    elseif(mode STREQUAL "KERNEL" AND kernel STREQUAL "")
      math(EXPR kernels "${kernels} + 1")
      set(kernel ${target}_kernel${kernels})
      add_library(${kernel} OBJECT ${arg})
      set_target_properties(${kernel} PROPERTIES POSITION_INDEPENDENT_CODE ON)
      target_compile_options(${kernel} PRIVATE -O3)
      # Its own layer's headers only: not include/optireduce/cpu_features.hpp, whose inline
      # functions built with these flags could be the ones the linker keeps.
      optireduce_layer(${kernel} ${layer} ${CMAKE_CURRENT_SOURCE_DIR})
      list(APPEND sources $<TARGET_OBJECTS:${kernel}>)
    elseif(mode STREQUAL "KERNEL")
      target_compile_options(${kernel} PRIVATE ${arg})
    else()
      message(FATAL_ERROR "optireduce_simd_library(${target}): \"${arg}\" before SOURCES, SCALAR or KERNEL")
    endif()
  endforeach()
  add_library(${target} STATIC ${sources})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  optireduce_layer(${target} ${layer} ${CMAKE_CURRENT_SOURCE_DIR})
  # The dispatch reads include/optireduce/cpu_features.hpp.
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include)
endfunction()
