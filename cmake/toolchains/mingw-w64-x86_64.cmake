# Windows x64 from Linux with Debian's MinGW-w64 (g++-mingw-w64-x86-64-posix: posix threads, so
# std::thread and std::mutex work through winpthread). Used by tools/build-deps.sh and
# tools/build-windows.sh; tests run through Wine (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(_llm42_triple x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${_llm42_triple}-gcc-posix)
set(CMAKE_CXX_COMPILER ${_llm42_triple}-g++-posix)
set(CMAKE_RC_COMPILER ${_llm42_triple}-windres)
set(CMAKE_AR ${_llm42_triple}-gcc-ar-posix CACHE FILEPATH "")
set(CMAKE_RANLIB ${_llm42_triple}-gcc-ranlib-posix CACHE FILEPATH "")
# Libraries and headers from the MinGW sysroot and the bundled-dependency prefix only; programs
# (protoc, swig) from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/${_llm42_triple} ${LLM42_DEPS_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# GCC for Win64 does not align the stack beyond 16 bytes (GCC bug 54412), yet spills 32- and
# 64-byte vectors with aligned moves: the assembler turns every aligned vector move into its
# unaligned form, which is as fast on aligned data.
set(CMAKE_C_FLAGS_INIT "-Wa,-muse-unaligned-vector-move")
set(CMAKE_CXX_FLAGS_INIT "-Wa,-muse-unaligned-vector-move")
find_program(_llm42_wine NAMES wine64 PATHS /usr/lib/wine NO_DEFAULT_PATH)
if(_llm42_wine)
  # Without Wine's debugger a crash ends the process with a failing status (with it, status 0),
  # and without its diagnostics the tests' output is theirs alone.
  set(CMAKE_CROSSCOMPILING_EMULATOR env WINEDEBUG=-all WINEDLLOVERRIDES=winedbg.exe=d ${_llm42_wine})
endif()
