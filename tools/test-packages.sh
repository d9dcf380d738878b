#!/usr/bin/env bash
# Runs dist/'s packages (tools/package.sh) on a machine that has never seen a compiler: a minimal
# Debian 12 root (debootstrap --variant=minbase, cached under ~/.cache/llm42/roots, python3 the
# only package added), where no -dev package exists. Inside it: the wheel, unpacked into a site
# folder as pip would, streams a deterministic generation from Python; the C SDK's sample
# (samples/stream.c, compiled here against the SDK archive alone, with an rpath to the SDK's lib)
# streams one from C; and the SDK's llm42 CLI reproduces the Python run's receipt. Needs root.
# Then Windows, under Wine: the Windows SDK's sample (compiled with MinGW against the SDK zip alone)
# streams a generation, its llm42.exe reproduces the same receipt (written on Linux), and the
# jar's and nupkg's Windows natives load and export their entry points.
# Checked to fail with the default build's wheel: its _llm42 needs libprotobuf.so.32, not in the root.
# LLM42_ROOTS_CACHE: where the root is kept.
set -euo pipefail
root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root_dir"
model=$root_dir/../shared/models/stories260K.gguf
if [[ ! -f $model ]]; then
  echo "llm42: test-packages: skipped: $model is missing" >&2
  exit 0
fi
version=$(tools/version.sh)
wheel=$(ls dist/llm42-"$version"-*-manylinux_2_36_x86_64.whl)
sdk=dist/llm42-$version-linux-x86_64.tar.gz
[[ -f $sdk ]] || { echo "llm42: test-packages: run tools/package.sh first" >&2; exit 1; }

cache=${LLM42_ROOTS_CACHE:-$HOME/.cache/llm42/roots}
min=$cache/bookworm-minbase
if [[ ! -f $min/.llm42-ready ]]; then
  echo "llm42: test-packages: [1/5] a minimal Debian root (debootstrap, once)" >&2
  command -v debootstrap >/dev/null || { echo "llm42: test-packages: debootstrap is missing (tools/install-deps.sh)" >&2; exit 1; }
  # The archive this machine's apt uses for Debian.
  mirror=$(python3 - <<'EOF'
import glob
for path in sorted(glob.glob('/etc/apt/sources.list.d/*.sources')):
    for block in open(path).read().split('\n\n'):
        f = dict(l.split(':', 1) for l in block.splitlines() if ':' in l and not l.startswith('#'))
        if 'bookworm' in f.get('Suites', '').split() and 'deb' in f.get('Types', '').split():
            print(f['URIs'].split()[0].strip()); raise SystemExit
for path in ['/etc/apt/sources.list'] + sorted(glob.glob('/etc/apt/sources.list.d/*.list')):
    try:
        for line in open(path):
            w = line.split()
            if len(w) > 2 and w[0] == 'deb' and w[2] == 'bookworm':
                print(w[1]); raise SystemExit
    except OSError:
        pass
raise SystemExit('no bookworm archive in the apt sources')
EOF
)
  rm -rf "$min"
  mkdir -p "$cache"
  debootstrap --variant=minbase bookworm "$min" "$mirror" >&2
  chroot "$min" apt-get -q update >&2
  DEBIAN_FRONTEND=noninteractive chroot "$min" apt-get -q install -y --no-install-recommends python3 >&2
  chroot "$min" apt-get clean
  touch "$min/.llm42-ready"
fi
for f in usr/include/stdio.h usr/bin/cc usr/bin/gcc usr/bin/g++ usr/include/google/protobuf usr/include/absl; do
  if [[ -e $min/$f ]]; then
    echo "llm42: test-packages: the root has /$f; it is not minimal" >&2
    exit 1
  fi
done

echo "llm42: test-packages: [2/5] the packages into the root" >&2
work=$min/tmp/llm42-packages
rm -rf "$work"
mkdir -p "$work/site" "$work/sdk"
cp "$model" "$work/model.gguf"
python3 -m zipfile -e "$wheel" "$work/site"
tar -C "$work/sdk" -xzf "$sdk" --strip-components=1
# The C sample, compiled here (outside) against the SDK alone.
cc -std=c99 -O2 -I"$work/sdk/include" samples/stream.c -o "$work/stream_c" -L"$work/sdk/lib" -lllm42 \
  -Wl,-rpath,/tmp/llm42-packages/sdk/lib
# /proc in the root, as a real machine has it (the library asks the OS for its CPUs).
if ! mountpoint -q "$min/proc"; then
  mount -t proc proc "$min/proc" 2>/dev/null || echo "llm42: test-packages: note: /proc not mounted in the root" >&2
fi
trap 'umount "$min/proc" 2>/dev/null || true' EXIT

echo "llm42: test-packages: [3/5] Python: the wheel" >&2
chroot "$min" env -i PATH=/usr/bin:/bin PYTHONPATH=/tmp/llm42-packages/site python3 - <<'EOF'
import llm42
with llm42.SessionOptions() as o:
    o.set_model_path("/tmp/llm42-packages/model.gguf")
    s = llm42.Session(o)
with s, llm42.RequestOptions() as ro:
    ro.set_prompt("Once upon a time")
    ro.set_max_tokens(24)
    ro.set_deterministic(True)
    with s.submit(ro) as r:
        text = "".join(r)
        receipt = r.receipt()
    assert len(text) > 0, "no text"
    open("/tmp/llm42-packages/receipt.bin", "wb").write(receipt)
    print("python in the minimal root:", repr(text[:60]))
EOF

echo "llm42: test-packages: [4/5] C: the SDK's sample and CLI" >&2
chroot "$min" env -i PATH=/usr/bin:/bin /tmp/llm42-packages/stream_c /tmp/llm42-packages/model.gguf "Once upon a time" |
  head -c 200 >&2
echo >&2
chroot "$min" env -i PATH=/usr/bin:/bin /tmp/llm42-packages/sdk/bin/llm42 verify \
  --model /tmp/llm42-packages/model.gguf /tmp/llm42-packages/receipt.bin
# The CUDA plug-in in the SDK's lib/: with no CUDA libraries in the root it cannot load, and
# --backend cuda says so (UNSUPPORTED, naming the missing library) instead of failing to start.
if [[ -f $work/sdk/lib/libllm42-cuda.so ]]; then
  out=$(chroot "$min" env -i PATH=/usr/bin:/bin /tmp/llm42-packages/sdk/bin/llm42 generate \
    --model /tmp/llm42-packages/model.gguf --prompt "Once" --max-tokens 4 --backend cuda 2>&1 || true)
  if [[ $out != *"LLM42_UNSUPPORTED"*"libllm42-cuda.so cannot be loaded"*"libcublasLt"* ]]; then
    echo "llm42: test-packages: --backend cuda without CUDA printed: $out" >&2
    exit 1
  fi
  echo "without CUDA in the root: $out" >&2
fi
echo "llm42: test-packages: the wheel, the C SDK and its CLI ran in a root without compilers or -dev packages" >&2

echo "llm42: test-packages: [5/5] Windows (Wine): the SDK zip, its CLI, the bindings' natives" >&2
win=$(mktemp -d)
trap 'umount "$min/proc" 2>/dev/null || true; rm -rf "$win"; /usr/lib/wine/wineserver -k 2>/dev/null || true' EXIT
python3 -m zipfile -e "dist/llm42-$version-windows-x86_64.zip" "$win"
wsdk=$win/llm42-$version-windows-x86_64
x86_64-w64-mingw32-gcc-posix -std=c99 -O2 -I"$wsdk/include" samples/stream.c -o "$win/stream_c.exe" \
  -L"$wsdk/lib" -lllm42
cp "$wsdk/bin/llm42.dll" "$win/"
export WINEPREFIX=${WINEPREFIX:-$HOME/.cache/llm42/wine} WINEDEBUG=-all WINEDLLOVERRIDES=winedbg.exe=d
wine=/usr/lib/wine/wine64
$wine wineboot -u >/dev/null 2>&1  # Wine's services start detached from this script's output
$wine "$win/stream_c.exe" "$model" "Once upon a time" | head -c 200 >&2
echo >&2
$wine "$wsdk/bin/llm42.exe" verify --model "$model" "$min/tmp/llm42-packages/receipt.bin"
# The bindings' Windows natives: each loads (with llm42.dll, which it imports, beside it) and
# exports the binding's entry point for llm42_version_number.
cat > "$win/load.c" <<'EOF'
#include <stdio.h>
#include <windows.h>
int main(int argc, char** argv) {
  HMODULE m = LoadLibraryA(argv[1]);
  if (m == NULL) { fprintf(stderr, "cannot load %s (error %lu)\n", argv[1], GetLastError()); return 1; }
  if (GetProcAddress(m, argv[2]) == NULL) { fprintf(stderr, "%s does not export %s\n", argv[1], argv[2]); return 1; }
  printf("%s loads and exports %s\n", argv[1], argv[2]);
  return 0;
}
EOF
x86_64-w64-mingw32-gcc-posix -O2 "$win/load.c" -o "$win/load.exe"
mkdir -p "$win/jar" "$win/nupkg"
python3 -m zipfile -e "dist/llm42-$version.jar" "$win/jar"
python3 -m zipfile -e "dist/Llm42.$version.nupkg" "$win/nupkg"
jar_natives=$win/jar/ai/llm42/natives/windows-x86_64
[[ $(cat "$jar_natives/libs.txt") == $'llm42.dll\nllm42_jni.dll' ]] || { echo "llm42: test-packages: the jar's Windows libs.txt is wrong" >&2; exit 1; }
# load.exe beside each package's natives, so that the llm42.dll found is the package's own.
nupkg_natives=$win/nupkg/runtimes/win-x64/native
cp "$win/load.exe" "$jar_natives/" && cp "$win/load.exe" "$nupkg_natives/"
(cd "$jar_natives" && $wine ./load.exe llm42_jni.dll Java_ai_llm42_llm42JNI_versionNumber)
(cd "$nupkg_natives" && $wine ./load.exe llm42_csharp.dll CSharp_Llm42_VersionNumber)
echo "llm42: test-packages: the Windows SDK, its CLI and the bindings' natives ran under Wine" >&2
