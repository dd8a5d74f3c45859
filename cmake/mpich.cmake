# One preload library per MPI flavor, from the same pmpi/ sources: liboptireduce.so for the default
# MPI that FindMPI found (Open MPI here, the target `optireduce`), and liboptireduce-mpich.so
# (target `optireduce-mpich`) compiled against MPICH's mpi.h and linked to libmpich whenever MPICH
# is installed beside it. The engine (optireduce_engine) has no MPI in it and serves both.
# Included from the top CMakeLists.txt after the `optireduce` target is defined.

# OPTIREDUCE_MPI_FLAVORS (top CMakeLists.txt, default "openmpi;mpich") names the wanted ones.
set(_optireduce_known_flavors openmpi mpich)
foreach(_flavor IN LISTS OPTIREDUCE_MPI_FLAVORS)
  if(NOT _flavor IN_LIST _optireduce_known_flavors)
    message(FATAL_ERROR "OPTIREDUCE_MPI_FLAVORS: unknown flavor \"${_flavor}\"; known: ${_optireduce_known_flavors}")
  endif()
endforeach()

# The default MPI's flavor, from its mpi.h.
set(OPTIREDUCE_DEFAULT_MPI_FLAVOR unknown)
foreach(_dir IN LISTS MPI_C_HEADER_DIR MPI_C_INCLUDE_DIRS)
  if(EXISTS "${_dir}/mpi.h")
    file(STRINGS "${_dir}/mpi.h" _defines REGEX "^#define (OPEN_MPI|MPICH_VERSION) ")
    if(_defines MATCHES "OPEN_MPI")
      set(OPTIREDUCE_DEFAULT_MPI_FLAVOR openmpi)
    elseif(_defines MATCHES "MPICH_VERSION")
      set(OPTIREDUCE_DEFAULT_MPI_FLAVOR mpich)
    endif()
    break()
  endif()
endforeach()
# liboptireduce.so is what the tools and tests link and preload: it is always built.
if(NOT "openmpi" IN_LIST OPTIREDUCE_MPI_FLAVORS)
  message(STATUS "OPTIREDUCE_MPI_FLAVORS lacks openmpi: liboptireduce.so is still built, for the default MPI (${OPTIREDUCE_DEFAULT_MPI_FLAVOR}), which the tools and tests use")
elseif(NOT OPTIREDUCE_DEFAULT_MPI_FLAVOR STREQUAL "openmpi")
  message(WARNING "The default MPI is ${OPTIREDUCE_DEFAULT_MPI_FLAVOR}, not Open MPI: liboptireduce.so is built for it")
endif()

if(NOT "mpich" IN_LIST OPTIREDUCE_MPI_FLAVORS)
  message(STATUS "MPICH: not in OPTIREDUCE_MPI_FLAVORS, liboptireduce-mpich.so is not built")
  return()
endif()

# MPICH: pkg-config first, then Debian's paths. Its mpi.h must really be MPICH's.
pkg_check_modules(OPTIREDUCE_MPICH QUIET IMPORTED_TARGET mpich)
if(OPTIREDUCE_MPICH_FOUND)
  set(_mpich_target PkgConfig::OPTIREDUCE_MPICH)
  set(_mpich_include_dirs ${OPTIREDUCE_MPICH_INCLUDE_DIRS})
else()
  find_path(OPTIREDUCE_MPICH_INCLUDE_DIR mpi.h
    PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/mpich /usr/include/mpich /usr/lib64/mpich/include
    NO_DEFAULT_PATH)
  find_library(OPTIREDUCE_MPICH_LIBRARY mpich
    PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib64/mpich/lib /usr/lib/mpich/lib)
  if(OPTIREDUCE_MPICH_INCLUDE_DIR AND OPTIREDUCE_MPICH_LIBRARY)
    add_library(optireduce_mpich_api INTERFACE)
    target_include_directories(optireduce_mpich_api SYSTEM INTERFACE ${OPTIREDUCE_MPICH_INCLUDE_DIR})
    target_link_libraries(optireduce_mpich_api INTERFACE ${OPTIREDUCE_MPICH_LIBRARY})
    set(_mpich_target optireduce_mpich_api)
    set(_mpich_include_dirs ${OPTIREDUCE_MPICH_INCLUDE_DIR})
  endif()
endif()
set(_mpich_header)
foreach(_dir IN LISTS _mpich_include_dirs)
  if(EXISTS "${_dir}/mpi.h")
    file(STRINGS "${_dir}/mpi.h" _defines REGEX "^#define MPICH_VERSION ")
    if(_defines)
      set(_mpich_header "${_dir}/mpi.h")
      break()
    endif()
  endif()
endforeach()
if(NOT _mpich_target OR NOT _mpich_header)
  message(STATUS "MPICH: not installed (no pkg-config mpich, no mpich/mpi.h + libmpich; Debian: apt-get install mpich libmpich-dev), liboptireduce-mpich.so is not built")
  return()
endif()
# MPICH's own launcher, for the tests and the launcher's checks.
find_program(OPTIREDUCE_MPICH_MPIEXEC NAMES mpiexec.mpich mpiexec.hydra mpirun.mpich
  DOC "MPICH's mpiexec (hydra)")

# The sources, definitions and link options of liboptireduce.so, so the two cannot drift apart.
get_target_property(_pmpi_sources optireduce SOURCES)
list(TRANSFORM _pmpi_sources PREPEND ${PROJECT_SOURCE_DIR}/pmpi/)
get_target_property(_pmpi_definitions optireduce COMPILE_DEFINITIONS)
get_target_property(_pmpi_link_options optireduce LINK_OPTIONS)
get_target_property(_pmpi_link_depends optireduce LINK_DEPENDS)
get_target_property(_pmpi_dependencies optireduce MANUALLY_ADDED_DEPENDENCIES)
add_library(optireduce-mpich SHARED ${_pmpi_sources})
target_link_libraries(optireduce-mpich PRIVATE optireduce_entry ${_mpich_target} ${CMAKE_DL_LIBS})
target_include_directories(optireduce-mpich PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
if(_pmpi_definitions)
  target_compile_definitions(optireduce-mpich PRIVATE ${_pmpi_definitions})
endif()
if(_pmpi_link_options)
  target_link_options(optireduce-mpich PRIVATE ${_pmpi_link_options})
endif()
if(_pmpi_dependencies)
  add_dependencies(optireduce-mpich ${_pmpi_dependencies})
endif()
if(_pmpi_link_depends)
  set_target_properties(optireduce-mpich PROPERTIES LINK_DEPENDS "${_pmpi_link_depends}")
endif()
# The target carrying MPICH's mpi.h and libmpich, for test programs (tests/mpich).
set(OPTIREDUCE_MPICH_MPI_TARGET ${_mpich_target})
get_filename_component(_mpich_header_dir "${_mpich_header}" DIRECTORY)
message(STATUS "MPICH: ${_mpich_header_dir} (launcher ${OPTIREDUCE_MPICH_MPIEXEC}): building liboptireduce-mpich.so")
