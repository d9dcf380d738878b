# Every llm42 build option, in one place.
option(LLM42_BUILD_TESTS "Build the test suite" ON)
option(LLM42_BUILD_SAMPLES "Build the samples" ON)
option(LLM42_BUILD_BINDINGS "Build the SWIG bindings whose toolchains are found" ON)
option(LLM42_WERROR "Treat warnings as errors" OFF)
option(LLM42_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs clang; tools/fuzz.sh)" OFF)
set(LLM42_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")

# CUDA is optional: ON by default only where a toolkit is found.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  set(_llm42_cuda_default ON)
else()
  set(_llm42_cuda_default OFF)
endif()
option(LLM42_WITH_CUDA "Build the CUDA backend (needs the CUDA toolkit)" ${_llm42_cuda_default})

if(NOT CMAKE_C_COMPILER_LAUNCHER AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(LLM42_CCACHE ccache)
  if(LLM42_CCACHE)
    set(CMAKE_C_COMPILER_LAUNCHER ${LLM42_CCACHE})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${LLM42_CCACHE})
  endif()
endif()
