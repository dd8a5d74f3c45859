# A static library of kernels built once per SIMD level, the level chosen by CPU at run time. A
# target of its own, so that nothing of the engine is compiled with a kernel's SIMD flags (a wider
# instruction inlined into engine code would fault on a CPU without it).
#   optireduce_simd_library(<target> <layer>
#     SOURCES <file>...                    compiled as the rest of the project (the dispatch)
#     SCALAR <file>...                     the reference the others are tested against: -O2, not vectorized
#     KERNEL <file> <flag>... [KERNEL ...] -O3 and the flags of its level)
function(optireduce_simd_library target layer)
  set(mode "")
  set(kernel "")
  set(sources "")
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
      set(kernel ${arg})
      list(APPEND sources ${arg})
      set_source_files_properties(${arg} PROPERTIES COMPILE_OPTIONS "-O3")
    elseif(mode STREQUAL "KERNEL")
      set_property(SOURCE ${kernel} APPEND PROPERTY COMPILE_OPTIONS ${arg})
    else()
      message(FATAL_ERROR "optireduce_simd_library(${target}): \"${arg}\" before SOURCES, SCALAR or KERNEL")
    endif()
  endforeach()
  add_library(${target} STATIC ${sources})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  optireduce_layer(${target} ${layer} ${CMAKE_CURRENT_SOURCE_DIR})
  # The dispatch reads include/optireduce/cpu_features.hpp; kernels compiled with SIMD flags must
  # not include it (an inline function built with them could be the one the linker keeps).
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include)
endfunction()
