#!/usr/bin/env bash
# Packages llm42 for machines that have never seen a compiler: a build with bundled dependencies
# (tools/build-deps.sh; the library needs only the C and C++ runtimes), written to dist/:
#   llm42-VERSION-cp3XX-cp3XX-manylinux_2_36_x86_64.whl   the Python binding (glibc 2.36: Debian 12's)
#   llm42-VERSION.jar                                      the Java binding, natives/linux-x86_64 inside
#   Llm42.VERSION.nupkg                                    the C# binding, runtimes/linux-x64/native
#   llm42-VERSION-linux-x86_64.tar.gz                      the C/C++ SDK: headers, library, CMake config,
#                                                          pkg-config file, the llm42 CLI
# (The CUDA backend is not in these packages until it is a plug-in; Windows is not built yet.)
# tools/test-packages.sh then runs the wheel and the SDK in a minimal Debian root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

source tools/bundled_common.sh
build=build-package
stage=$root/$build/stage
version=$(sed -n 's/^project(llm42 VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
echo "llm42: package: [1/3] build ($build)" >&2
configure_bundled "$build" -DLLM42_BUILD_TESTS=OFF -DLLM42_BUILD_SAMPLES=OFF
cmake --build "$build"
echo "llm42: package: [2/3] install" >&2
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" >/dev/null

echo "llm42: package: [3/3] dist/" >&2
rm -rf dist
mkdir -p dist
python3 tools/make_wheel.py --module-dir "$build/bindings/python" --lib "$build/lib/libllm42.so.0" \
  --version "$version" --platform manylinux_2_36_x86_64 --out dist >/dev/null
find "$stage" -name "llm42-$version.jar" -exec cp {} dist/ \;
find "$stage" -name "Llm42.$version.nupkg" -exec cp {} dist/ \;
sdk=llm42-$version-linux-x86_64
rm -rf "$build/$sdk"
mkdir -p "$build/$sdk"
cp -a "$stage/include" "$stage/bin" "$build/$sdk/"
mkdir -p "$build/$sdk/lib"
cp -a "$stage"/lib/libllm42.so* "$stage/lib/cmake" "$stage/lib/pkgconfig" "$build/$sdk/lib/"
tar -C "$build" -czf "dist/$sdk.tar.gz" "$sdk"
ls -l dist >&2
