include(CMakePackageConfigHelpers)

install(TARGETS llm42 EXPORT llm42Targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS llm42_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET llm42_cuda)
  # The CUDA backend's plug-in beside libllm42 (LLM42_CUDA_PLUGIN; backend_plugin.h).
  install(TARGETS llm42_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
if(WIN32)
  # MSVC's import library (lib/CMakeLists.txt makes it from the DLL's exports) beside MinGW's.
  install(FILES $<TARGET_FILE_DIR:llm42>/llm42.lib DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES include/llm42/llm42.h include/llm42/llm42_testing.h include/llm42/llm42.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/llm42)
install(EXPORT llm42Targets NAMESPACE llm42:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/llm42)

configure_package_config_file(cmake/llm42Config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/llm42Config.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/llm42)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/llm42ConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/llm42Config.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/llm42ConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/llm42)

# Relocatable: the prefix is found from the .pc file's own location.
file(RELATIVE_PATH LLM42_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(cmake/llm42.pc.in ${CMAKE_CURRENT_BINARY_DIR}/llm42.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/llm42.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Last, from the installed files: the C# binding's NuGet package (bindings/csharp/make_nupkg.cmake).
if(LLM42_HAVE_CSHARP)
  install(CODE "
    set(LLM42_NUGET_VERSION ${PROJECT_VERSION})
    set(LLM42_NUGET_RID ${LLM42_NUGET_RID})
    set(LLM42_NUGET_LIBDIR ${CMAKE_INSTALL_LIBDIR})
    set(LLM42_NUGET_SONAME $<TARGET_SONAME_FILE_NAME:llm42>)
    set(LLM42_NUGET_NUSPEC ${PROJECT_BINARY_DIR}/bindings/csharp/Llm42.nuspec)
    set(LLM42_NUGET_STAGE ${PROJECT_BINARY_DIR}/bindings/csharp/nupkg-stage)
    include(${PROJECT_SOURCE_DIR}/bindings/csharp/make_nupkg.cmake)")
endif()
