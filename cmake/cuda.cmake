# CUDA detection. PSTRAIN_CUDA=AUTO builds the CUDA targets when nvcc is
# found (default location /usr/local/cuda); ON requires it; OFF skips it.
# NCCL ships no CMake config, so it is found with find_library.
set(PSTRAIN_HAVE_CUDA OFF)
if(NOT PSTRAIN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(PSTRAIN_NVCC nvcc PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin NO_CACHE)
    if(PSTRAIN_NVCC)
      set(CMAKE_CUDA_COMPILER ${PSTRAIN_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Ampere and Hopper by default; override with -DCMAKE_CUDA_ARCHITECTURES.
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    find_library(NCCL_LIBRARY NAMES nccl
      HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
    find_path(NCCL_INCLUDE_DIR nccl.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
    if(NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
      set(PSTRAIN_HAVE_CUDA ON)
      add_library(pstrain::nccl UNKNOWN IMPORTED)
      set_target_properties(pstrain::nccl PROPERTIES
        IMPORTED_LOCATION ${NCCL_LIBRARY}
        INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
      set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 cannot pass CUDA20 to nvcc
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
      message(STATUS "pstrain: CUDA ${CUDAToolkit_VERSION} with NCCL ${NCCL_LIBRARY}: building CUDA targets")
    elseif(PSTRAIN_CUDA STREQUAL "ON")
      message(FATAL_ERROR "PSTRAIN_CUDA=ON but NCCL was not found")
    else()
      message(STATUS "pstrain: CUDA found but NCCL missing: CUDA targets skipped")
    endif()
  elseif(PSTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PSTRAIN_CUDA=ON but nvcc was not found")
  else()
    message(STATUS "pstrain: no CUDA toolkit: CPU-only build")
  endif()
endif()
