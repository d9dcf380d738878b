# `cmake --install` produces a usable SDK: installs the build tree into PREFIX, checks every
# part is there, builds samples/stream.c out of tree with find_package(llm42) and runs it, and
# runs the Python, Java and C# bindings from the installed locations (Python also from its
# wheel, Java from its Maven repository layout, C# from its NuGet package).
# -DPART=install (the default: install, then C) | python | java | csharp: ctest runs the language
# parts as their own tests after the install (a fixture), so that none runs long under the
# sanitizers on a busy machine.
# -DBUILD_DIR -DPREFIX -DSOURCE_DIR -DMODEL -DGENERATOR [-DPYTHON -DJAVA -DMVN -DMONO -DMCS]
if(NOT PART)
  set(PART install)
endif()
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
# Fails unless every path (relative to BASE, globs allowed) names at least one file of WHAT.
function(require_files what base)
  foreach(f ${ARGN})
    file(GLOB found "${base}/${f}")
    if(NOT found)
      message(FATAL_ERROR "${what} lacks ${f}")
    endif()
  endforeach()
endfunction()
# The one file PATTERN matches, into VAR.
function(glob_one var pattern)
  file(GLOB found ${pattern})
  list(LENGTH found n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "${n} files match ${pattern}: ${found}")
  endif()
  set(${var} ${found} PARENT_SCOPE)
endfunction()
# Fails unless FILE's text holds every one of the rest.
function(require_text file)
  file(READ ${file} text)
  foreach(element ${ARGN})
    string(FIND "${text}" "${element}" at)
    if(at LESS 0)
      message(FATAL_ERROR "${file} lacks ${element}")
    endif()
  endforeach()
endfunction()
# Runs a sample and checks it printed the model's continuation of "The cat".
function(sample what)
  run(${ARGN})
  if(NOT out MATCHES "^The cat [a-z]")
    message(FATAL_ERROR "${what}: the sample printed: ${out}")
  endif()
  message(STATUS "${what}: ${out}")
endfunction()
# Extracts ARCHIVE (members: the rest, or all) into DIR, afresh.
function(extract archive dir)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  run(${plain} ${CMAKE_COMMAND} -E chdir ${dir} ${CMAKE_COMMAND} -E tar xf ${archive} ${ARGN})
endfunction()

# Under ASan the test environment preloads the sanitizer runtime for the programs that load the
# instrumented libllm42 (Python, Java, Mono, the C consumer). CMake's own archive code hangs with
# it preloaded (the install's NuGet packing, extracting the jar and the package: seen as a
# 180 s timeout), so commands that load no libllm42 run without it.
set(plain ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD)

if(PART STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX} ${PREFIX}-consumer)
  run(${plain} ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
  require_files("the SDK" ${PREFIX} include/llm42/llm42.h include/llm42/llm42.hpp lib/libllm42.so
                lib/cmake/llm42/llm42Config.cmake lib/pkgconfig/llm42.pc bin/llm42)

  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/sdk_consumer -B ${PREFIX}-consumer/c -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${PREFIX} -DSAMPLE=${SOURCE_DIR}/samples/stream.c)
  run(${CMAKE_COMMAND} --build ${PREFIX}-consumer/c)
  sample("C (find_package)" ${PREFIX}-consumer/c/consumer ${MODEL} "The cat")
endif()

if(PART STREQUAL "python")
  file(GLOB_RECURSE py ${PREFIX}/lib/*/llm42.py)
  if(NOT py)
    message(FATAL_ERROR "the SDK lacks the Python package")
  endif()
  get_filename_component(site ${py} DIRECTORY)
  sample(Python ${CMAKE_COMMAND} -E env PYTHONPATH=${site} ${PYTHON} ${SOURCE_DIR}/samples/python/stream.py ${MODEL} "The cat")
  # The installed wheel, pip-installed into a fresh virtual environment (no index).
  glob_one(wheel ${PREFIX}/share/python-wheels/llm42-*.whl)
  set(venv ${PREFIX}-consumer/venv)
  file(REMOVE_RECURSE ${venv})
  run(${PYTHON} -m venv ${venv})
  run(${venv}/bin/python -m pip install -q --no-index ${wheel})
  sample("Python from the installed wheel" ${CMAKE_COMMAND} -E env --unset=PYTHONPATH ${venv}/bin/python
         ${SOURCE_DIR}/samples/python/stream.py ${MODEL} "The cat")
endif()
if(PART STREQUAL "java")
  require_files("the SDK" ${PREFIX} share/java/llm42.jar lib/jni/libllm42_jni.so)
  sample(Java ${JAVA} -Djava.library.path=${PREFIX}/lib/jni -cp ${PREFIX}/share/java/llm42.jar:${BUILD_DIR}/samples/java
         Stream ${MODEL} "The cat")
  # The Maven layout: ai.llm42:llm42:VERSION where a local repository keeps it, the pom naming
  # those coordinates (also inside the jar), and the sample run on that jar alone.
  glob_one(poms ${PREFIX}/share/maven-repo/ai/llm42/llm42/*/llm42-*.pom)
  get_filename_component(version_dir ${poms} DIRECTORY)
  get_filename_component(version ${version_dir} NAME)
  require_text(${poms} "<groupId>ai.llm42</groupId>" "<artifactId>llm42</artifactId>" "<version>${version}</version>"
               "<packaging>jar</packaging>")
  file(READ ${poms} pom)
  if(MVN)  # Maven itself reads the pom (validate needs no plugins, so it runs offline)
    file(REMOVE_RECURSE ${PREFIX}-consumer/maven)
    file(MAKE_DIRECTORY ${PREFIX}-consumer/maven)
    configure_file(${poms} ${PREFIX}-consumer/maven/pom.xml COPYONLY)
    execute_process(COMMAND ${plain} ${MVN} -o -q -B -Dmaven.repo.local=${PREFIX}-consumer/maven/repo validate
                    WORKING_DIRECTORY ${PREFIX}-consumer/maven RESULT_VARIABLE rc OUTPUT_VARIABLE mvn_out ERROR_VARIABLE mvn_out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "mvn validate rejects ${poms}:\n${mvn_out}")
    endif()
  endif()
  set(maven_jar ${version_dir}/llm42-${version}.jar)
  require_files("the SDK's Maven repository" ${version_dir} llm42-${version}.jar)
  extract(${maven_jar} ${PREFIX}-consumer/jar META-INF/maven/ai.llm42/llm42/pom.xml)
  file(READ ${PREFIX}-consumer/jar/META-INF/maven/ai.llm42/llm42/pom.xml pom_in_jar)
  if(NOT pom_in_jar STREQUAL pom)
    message(FATAL_ERROR "the pom inside llm42-${version}.jar differs from the one beside it")
  endif()
  sample("Java from the Maven repository" ${JAVA} -cp ${maven_jar}:${BUILD_DIR}/samples/java Stream ${MODEL} "The cat")
endif()
if(PART STREQUAL "csharp")
  require_files("the SDK" ${PREFIX} lib/llm42/csharp/Llm42.dll lib/libllm42_csharp.so)
  file(COPY ${PREFIX}/lib/llm42/csharp/Llm42.dll DESTINATION ${PREFIX}-consumer/cs)
  run(${MCS} -nologo -out:${PREFIX}-consumer/cs/Stream.exe -r:${PREFIX}-consumer/cs/Llm42.dll
      ${SOURCE_DIR}/samples/csharp/Stream.cs)
  sample("C#" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${PREFIX}/lib ${MONO} ${PREFIX}-consumer/cs/Stream.exe ${MODEL} "The cat")
  # The NuGet package: its manifest names it, it holds the assembly and both native libraries,
  # and the sample built against the packaged assembly runs from a folder laid out as `dotnet
  # publish` lays out a package's files (the assembly and runtimes/<rid>/native/ beside the
  # program), with no library path: libllm42_csharp.so finds libllm42 through $ORIGIN.
  glob_one(nupkg ${PREFIX}/share/nuget/Llm42.*.nupkg)
  set(pkg ${PREFIX}-consumer/nupkg)
  extract(${nupkg} ${pkg})
  get_filename_component(nupkg_name ${nupkg} NAME)
  string(REGEX REPLACE "^Llm42\\.(.*)\\.nupkg$" "\\1" nupkg_version ${nupkg_name})
  require_text(${pkg}/Llm42.nuspec "<id>Llm42</id>" "<version>${nupkg_version}</version>")
  require_files(${nupkg_name} ${pkg} "[[]Content_Types[]].xml" lib/netstandard2.1/Llm42.dll
                runtimes/*/native/libllm42_csharp.so runtimes/*/native/libllm42.so*)
  file(GLOB natives ${pkg}/runtimes/*/native/*)
  file(REMOVE_RECURSE ${PREFIX}-consumer/cs-app)
  set(app ${PREFIX}-consumer/cs-app)
  file(MAKE_DIRECTORY ${app})
  file(COPY ${pkg}/lib/netstandard2.1/Llm42.dll ${natives} DESTINATION ${app})
  run(${MCS} -nologo -out:${app}/Stream.exe -r:${app}/Llm42.dll ${SOURCE_DIR}/samples/csharp/Stream.cs)
  sample("C# from the NuGet package" ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${MONO} ${app}/Stream.exe ${MODEL} "The cat")
endif()
