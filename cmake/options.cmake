# Every llm42 build option, in one place.
option(LLM42_BUILD_TESTS "Build the test suite" ON)
option(LLM42_BUILD_SAMPLES "Build the samples" ON)
option(LLM42_BUILD_BINDINGS "Build the SWIG bindings whose toolchains are found" ON)
option(LLM42_WERROR "Treat warnings as errors" OFF)
option(LLM42_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs clang; tools/fuzz.sh)" OFF)
set(LLM42_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")
# A self-contained libllm42 (packages): Abseil, Protobuf's runtime and utf8proc linked statically
# from tools/build-deps.sh's cache (LLM42_DEPS_PREFIX, the path it prints), no BLIS. OFF (the
# default, and for distribution packagers): Debian's shared libraries.
option(LLM42_BUNDLED_DEPS "Link the dependencies tools/build-deps.sh builds, statically" OFF)
set(LLM42_DEPS_PREFIX "" CACHE PATH "tools/build-deps.sh's install prefix (LLM42_BUNDLED_DEPS)")
if(LLM42_BUNDLED_DEPS AND NOT EXISTS "${LLM42_DEPS_PREFIX}/lib/libprotobuf.a")
  message(FATAL_ERROR "LLM42_BUNDLED_DEPS needs LLM42_DEPS_PREFIX: the path tools/build-deps.sh prints")
endif()

if(WIN32 AND NOT LLM42_BUNDLED_DEPS)
  message(FATAL_ERROR "Windows builds link the bundled dependencies: tools/build-windows.sh")
endif()

# CUDA is optional: ON by default only where a toolkit is found (not on Windows: nvcc for Windows
# hosts needs MSVC).
if(NOT WIN32)
  find_package(CUDAToolkit QUIET)
endif()
if(CUDAToolkit_FOUND)
  set(_llm42_cuda_default ON)
else()
  set(_llm42_cuda_default OFF)
endif()
option(LLM42_WITH_CUDA "Build the CUDA backend (needs the CUDA toolkit)" ${_llm42_cuda_default})
# The CUDA backend as a plug-in (libllm42-cuda.so beside libllm42, loaded at run time) instead of
# compiled in: what packages ship (the self-contained builds turn it on).
option(LLM42_CUDA_PLUGIN "Build the CUDA backend as the plug-in libllm42-cuda.so" OFF)

# BLIS (Debian's libblis-serial-dev) for the fast schedule's prompt GEMMs: ON where it is found.
find_path(LLM42_BLIS_INCLUDE_DIR blis.h PATH_SUFFIXES blis-serial ${CMAKE_LIBRARY_ARCHITECTURE}/blis-serial)
find_library(LLM42_BLIS_LIBRARY blis)
if(LLM42_BLIS_INCLUDE_DIR AND LLM42_BLIS_LIBRARY AND NOT LLM42_BUNDLED_DEPS)
  set(_llm42_blis_default ON)
else()
  set(_llm42_blis_default OFF)
endif()
option(LLM42_WITH_BLIS "Run the fast schedule's prompt GEMMs through BLIS (libblis-serial-dev)" ${_llm42_blis_default})
if(LLM42_WITH_BLIS AND NOT (LLM42_BLIS_INCLUDE_DIR AND LLM42_BLIS_LIBRARY))
  message(FATAL_ERROR "LLM42_WITH_BLIS is ON but BLIS was not found (Debian: libblis-serial-dev)")
endif()

if(NOT CMAKE_C_COMPILER_LAUNCHER AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(LLM42_CCACHE ccache)
  if(LLM42_CCACHE)
    set(CMAKE_C_COMPILER_LAUNCHER ${LLM42_CCACHE})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${LLM42_CCACHE})
  endif()
endif()
