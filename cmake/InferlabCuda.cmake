# INFERLAB_CUDA (AUTO | ON | OFF): AUTO builds the CUDA backend whenever nvcc and the toolkit are
# found, ON requires them, OFF never looks. The CPU build never needs CUDA.
# With CUDA: kernels for sm_90 as SASS and as PTX (CMake's bare "90" means both), CUDA C++20
# (CMake 3.25 has no CUDA20 dialect for nvcc; it is taught below: nvcc 13 takes -std=c++20),
# the CUDA runtime linked statically (cuBLAS stays shared: no static cuBLAS ships here), and
# INFERLAB_HAVE_CUDA=1 on inferlab::core and everything linking it.
set(INFERLAB_HAVE_CUDA OFF)
if(NOT INFERLAB_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "INFERLAB_CUDA='${INFERLAB_CUDA}': allowed AUTO, ON, OFF")
endif()
if(NOT INFERLAB_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Before enable_language, or CMake caches the architecture of whatever GPU (or none) it finds.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures (90 = sm_90 SASS + compute_90 PTX)")
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(INFERLAB_HAVE_CUDA ON)
      if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
        set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
        list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
      endif()
      set(CMAKE_CUDA_STANDARD 20)  # targets would inherit CXX_STANDARD 20 anyway
      set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    endif()
  endif()
  if(INFERLAB_CUDA STREQUAL "ON" AND NOT INFERLAB_HAVE_CUDA)
    message(FATAL_ERROR "INFERLAB_CUDA=ON but no CUDA compiler/toolkit was found (set CMAKE_CUDA_COMPILER or use AUTO/OFF)")
  endif()
endif()
if(INFERLAB_HAVE_CUDA)
  message(STATUS "inferlab: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "inferlab: CUDA backend OFF (INFERLAB_CUDA=${INFERLAB_CUDA})")
endif()
