# Fails unless the shared library LIB needs nothing beyond the C and C++ runtimes (libc, libm,
# libstdc++, libgcc_s, the dynamic loader): the self-contained build (LLM42_BUNDLED_DEPS), whose
# Abseil, Protobuf and utf8proc are inside it. Checked to fail on the default build, which needs
# Debian's shared Abseil, Protobuf, utf8proc and BLIS.
execute_process(COMMAND readelf -d ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf failed on ${LIB}")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[([^]\n]+)\\]" entries "${out}")
set(needed "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE ".*\\[([^]]+)\\]" "\\1" name "${entry}")
  list(APPEND needed ${name})
  if(NOT name MATCHES "^(libc\\.so\\.6|libm\\.so\\.6|libstdc\\+\\+\\.so\\.6|libgcc_s\\.so\\.1|ld-linux-x86-64\\.so\\.2)$")
    message(FATAL_ERROR "${LIB} needs ${name}, outside the C and C++ runtimes")
  endif()
endforeach()
if(NOT needed)
  message(FATAL_ERROR "readelf listed no NEEDED entry for ${LIB}")
endif()
message(STATUS "${LIB} needs only: ${needed}")
