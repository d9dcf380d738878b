#!/usr/bin/env bash
# Packages llm42 for machines that have never seen a compiler: a build with bundled dependencies
# (tools/build-deps.sh; the library needs only the C and C++ runtimes), written to dist/:
#   llm42-VERSION-cp3XX-cp3XX-manylinux_2_36_x86_64.whl   the Python binding (glibc 2.36: Debian 12's)
#   llm42-VERSION.jar                                      the Java binding, natives/linux-x86_64 and
#                                                          natives/windows-x86_64 inside
#   Llm42.VERSION.nupkg                                    the C# binding, runtimes/linux-x64/native and
#                                                          runtimes/win-x64/native
#   llm42-VERSION-linux-x86_64.tar.gz                      the C/C++ SDK: headers, library, CMake config,
#   llm42-VERSION-windows-x86_64.zip                       pkg-config file, the llm42 CLI (Windows: the
#                                                          DLL, llm42.lib and libllm42.dll.a)
# Windows comes from tools/build-windows.sh (MinGW-w64). The CUDA backend is the plug-in
# lib/libllm42-cuda.so in the Linux SDK archive; the wheel, jar and nupkg are CPU-only.
# tools/test-packages.sh then runs the wheel and the SDK in a minimal Debian root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

source tools/bundled_common.sh
build=build-package
stage=$root/$build/stage
version=$(tools/version.sh)
echo "llm42: package: [1/4] build ($build)" >&2
configure_bundled "$build" -DLLM42_BUILD_TESTS=OFF -DLLM42_BUILD_SAMPLES=OFF
cmake --build "$build"
echo "llm42: package: [2/4] install" >&2
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" >/dev/null

echo "llm42: package: [3/4] dist/" >&2
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
# The CUDA backend's plug-in, where the toolkit was found (it needs the driver and cuBLASLt 13
# where it runs; without them --backend cuda says so and auto takes the CPU).
if [[ -f $stage/lib/libllm42-cuda.so ]]; then cp -a "$stage/lib/libllm42-cuda.so" "$build/$sdk/lib/"; fi
tar -C "$build" -czf "dist/$sdk.tar.gz" "$sdk"

echo "llm42: package: [4/4] Windows x64 (build-windows)" >&2
bash tools/build-windows.sh >&2
win_stage=$root/$build/stage-windows
rm -rf "$win_stage"
cmake --install build-windows --prefix "$win_stage" >/dev/null
cp build-windows/bindings/lib/llm42_jni.dll build-windows/bindings/lib/llm42_csharp.dll "$win_stage/bin/"
x86_64-w64-mingw32-strip --strip-unneeded "$win_stage"/bin/*.dll "$win_stage"/bin/*.exe
python3 - "$win_stage" "$version" dist <<'EOF'
import os, sys, zipfile
stage, version, dist = sys.argv[1:]
bin_dir = os.path.join(stage, 'bin')
def add(archive, files, prefix, extra=None):
    with zipfile.ZipFile(archive, 'a', zipfile.ZIP_DEFLATED) as z:
        for name in files:
            z.write(os.path.join(bin_dir, name), prefix + name)
        for name, text in (extra or {}).items():
            z.writestr(prefix + name, text)
# The jar loads libs.txt's libraries in order: the C ABI before the JNI library that imports it.
add(os.path.join(dist, f'llm42-{version}.jar'), ['llm42.dll', 'llm42_jni.dll'],
    'ai/llm42/natives/windows-x86_64/', {'libs.txt': 'llm42.dll\nllm42_jni.dll\n'})
add(os.path.join(dist, f'Llm42.{version}.nupkg'), ['llm42.dll', 'llm42_csharp.dll'], 'runtimes/win-x64/native/')
sdk = f'llm42-{version}-windows-x86_64'
with zipfile.ZipFile(os.path.join(dist, sdk + '.zip'), 'w', zipfile.ZIP_DEFLATED) as z:
    for top in ['include', 'bin', 'lib']:
        for dirpath, _, files in os.walk(os.path.join(stage, top)):
            for f in sorted(files):
                if top == 'bin' and f not in ('llm42.dll', 'llm42.exe'):
                    continue
                path = os.path.join(dirpath, f)
                z.write(path, os.path.join(sdk, os.path.relpath(path, stage)))
EOF
ls -l dist >&2

