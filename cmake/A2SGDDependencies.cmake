# Third-party dependencies of the a2sgd library, for its build (Kokkos in A2SGDKokkos.cmake). The
# installed package finds what a consumer needs itself (A2SGDConfig.cmake.in); the applications'
# Boost is found in apps/, Catch2 in tests/.

include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/A2SGDKokkos.cmake)

find_package(MPI 3.0 REQUIRED COMPONENTS CXX)

# Parallel HDF5: checkpoints are written collectively by all ranks into one file.
# FindHDF5 probes its C wrapper with a C compiler.
get_property(_a2sgd_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(NOT "C" IN_LIST _a2sgd_languages)
  enable_language(C)
endif()
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 1.10 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "A2SGD: HDF5 ${HDF5_VERSION} was found but it is not built with MPI "
                      "(HDF5_IS_PARALLEL is false). Install a parallel HDF5 (Debian: "
                      "libhdf5-openmpi-dev; Spack: hdf5+mpi) or point HDF5_ROOT at one.")
endif()
if(NOT TARGET A2SGD::HDF5)
  add_library(A2SGD::HDF5 INTERFACE IMPORTED GLOBAL)
  if(TARGET hdf5::hdf5)
    target_link_libraries(A2SGD::HDF5 INTERFACE hdf5::hdf5)
  else()
    target_include_directories(A2SGD::HDF5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
    target_link_libraries(A2SGD::HDF5 INTERFACE ${HDF5_C_LIBRARIES})
    target_compile_definitions(A2SGD::HDF5 INTERFACE ${HDF5_C_DEFINITIONS} ${HDF5_DEFINITIONS})
  endif()
endif()
# What a consumer of a static liba2sgd links for HDF5: the library files FindHDF5 found (the
# installed config cannot run FindHDF5, which needs the C language enabled in the consumer).
set(A2SGD_HDF5_LINK_LIBRARIES "")
foreach(_lib IN LISTS HDF5_C_LIBRARIES)
  if(IS_ABSOLUTE "${_lib}" OR TARGET "${_lib}")
    list(APPEND A2SGD_HDF5_LINK_LIBRARIES "${_lib}")
  endif()
endforeach()

find_package(ZLIB REQUIRED)  # gzip-compressed IDX data files
find_package(Threads REQUIRED)  # the collective watchdog's thread
