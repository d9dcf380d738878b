# Packs the installed C# binding into <prefix>/share/nuget/Llm42.<version>.nupkg, at install time
# and from the installed files, whose RPATH is $ORIGIN: wherever a NuGet client puts
# runtimes/<rid>/native/, libllm42_csharp.so finds libllm42 beside it.
#   lib/netstandard2.1/Llm42.dll
#   runtimes/<rid>/native/libllm42_csharp.so, libllm42.so.<major>
#   Llm42.nuspec, [Content_Types].xml
# Llm42.dll is built by Mono's mcs against Mono's class libraries, which carry
# IAsyncEnumerable: it runs where .NET Standard 2.1 does (.NET Core 3+, Mono 6.4+, Unity 2021.2+),
# which is why the folder says 2.1, not 2.0 (whose hosts lack IAsyncEnumerable).
# Expects LLM42_NUGET_VERSION, LLM42_NUGET_RID, LLM42_NUGET_LIBDIR, LLM42_NUGET_SONAME,
# LLM42_NUGET_NUSPEC, LLM42_NUGET_STAGE.
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(stage ${LLM42_NUGET_STAGE})
set(native ${stage}/runtimes/${LLM42_NUGET_RID}/native)
file(REMOVE_RECURSE ${stage})
file(MAKE_DIRECTORY ${stage}/lib/netstandard2.1 ${native})
configure_file(${LLM42_NUGET_NUSPEC} ${stage}/Llm42.nuspec COPYONLY)
configure_file(${prefix}/${LLM42_NUGET_LIBDIR}/llm42/csharp/Llm42.dll ${stage}/lib/netstandard2.1/Llm42.dll COPYONLY)
# configure_file reads through the symlinks: the package holds plain files.
configure_file(${prefix}/${LLM42_NUGET_LIBDIR}/libllm42_csharp.so ${native}/libllm42_csharp.so COPYONLY)
configure_file(${prefix}/${LLM42_NUGET_LIBDIR}/${LLM42_NUGET_SONAME} ${native}/${LLM42_NUGET_SONAME} COPYONLY)
string(REGEX REPLACE "^.*\\." "" soname_ext "${LLM42_NUGET_SONAME}")
file(WRITE "${stage}/[Content_Types].xml"
  "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
  "<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">"
  "<Default Extension=\"nuspec\" ContentType=\"application/octet\" />"
  "<Default Extension=\"dll\" ContentType=\"application/octet\" />"
  "<Default Extension=\"so\" ContentType=\"application/octet\" />"
  "<Default Extension=\"${soname_ext}\" ContentType=\"application/octet\" />"
  "</Types>\n")
set(out ${prefix}/share/nuget/Llm42.${LLM42_NUGET_VERSION}.nupkg)
file(MAKE_DIRECTORY ${prefix}/share/nuget)
file(REMOVE ${out})
execute_process(COMMAND ${CMAKE_COMMAND} -E tar cf ${out} --format=zip -- Llm42.nuspec [Content_Types].xml lib runtimes
                WORKING_DIRECTORY ${stage} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "packing ${out} failed (${rc})")
endif()
file(REMOVE_RECURSE ${stage})
message(STATUS "Packed: ${out}")
