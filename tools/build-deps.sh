#!/usr/bin/env bash
# Builds the libraries a self-contained libllm42 carries inside it (Abseil, Protobuf's runtime,
# utf8proc) from Debian's own source packages, at the versions tools/install-deps.sh pins, as
# position-independent static libraries with hidden visibility, into a cache outside the build
# tree. Prints the install prefix on stdout (for -DLLM42_DEPS_PREFIX); progress goes to stderr.
#
#   tools/build-deps.sh [TARGET]      TARGET: linux-x86_64 (the default) or windows-x86_64
#
# windows-x86_64 cross-builds with Debian's MinGW-w64 (cmake/toolchains/mingw-w64-x86_64.cmake)
# and adds what a Windows build cannot take from the system: GoogleTest (for the tests, run under
# Wine) and nlohmann-json's headers.
#
# The sources come through `apt-get source`, with a source list this script writes under its
# cache from the system's own Debian archives (their deb entries as deb-src); the system's apt
# configuration is left alone. A second run with the cache in place takes a second; a cache whose
# stamp or libraries are missing is rebuilt. Protobuf's compiler stays Debian's (protobuf-compiler,
# the same version): only the runtime library is built.
# LLM42_DEPS_CACHE: the cache folder (default ~/.cache/llm42/deps).
set -euo pipefail

target=${1:-linux-x86_64}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Each bundled library: the binary package install-deps.sh pins (its source package has the same
# version), and the library it builds.
deps=(libabsl-dev libprotobuf-dev libutf8proc-dev)
case "$target" in
  linux-x86_64)
    flags="-O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden"
    target_args=() ;;
  windows-x86_64)
    # A DLL exports only what it marks: no visibility flags on PE.
    flags="-O2"
    target_args=(-DCMAKE_TOOLCHAIN_FILE="$here/../cmake/toolchains/mingw-w64-x86_64.cmake")
    deps+=(libgtest-dev nlohmann-json3-dev) ;;
  *) echo "llm42: build-deps: unknown target '$target' (linux-x86_64, windows-x86_64)" >&2; exit 2 ;;
esac
cache=${LLM42_DEPS_CACHE:-$HOME/.cache/llm42/deps}
prefix=$cache/$target
source "$here/install-deps.sh"  # PINNED only, when sourced

# Debian package -> its pinned version (the source package has the same version).
pin() {
  local spec
  for spec in "${PINNED[@]}"; do
    if [[ ${spec%%=*} == "$1" ]]; then echo "${spec#*=}"; return; fi
  done
  echo "llm42: build-deps: $1 is not pinned in tools/install-deps.sh" >&2
  exit 1
}
stamp_text="target=$target flags=$flags"
for d in "${deps[@]}"; do stamp_text+=" $d=$(pin "$d")"; done
stamp_text+=" script=$(cat "${BASH_SOURCE[0]}" "$here/../cmake/toolchains/mingw-w64-x86_64.cmake" | sha256sum | cut -c1-16)"

complete() {
  [[ -f $prefix/.stamp && $(cat "$prefix/.stamp") == "$stamp_text" ]] &&
    [[ -f $prefix/lib/libprotobuf.a && -f $prefix/lib/libutf8proc.a && -f $prefix/lib/libabsl_base.a ]]
}
if complete; then
  echo "$prefix"
  exit 0
fi

start=$(date +%s)
work=$cache/work-$target
rm -rf "$work" "$prefix"
mkdir -p "$work" "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial" "$cache/apt/sources.list.d" "$cache/src"

# The source list: every deb entry of the system's Debian archives, as deb-src.
python3 - "$cache/apt/sources.list.d/llm42-src.sources" <<'EOF'
import glob, sys
out = []
for path in sorted(glob.glob('/etc/apt/sources.list.d/*.sources')):
    for block in open(path).read().split('\n\n'):
        fields = {}
        for line in block.splitlines():
            if line.startswith('#') or ':' not in line:
                continue
            key, value = line.split(':', 1)
            fields[key.strip()] = value.strip()
        if 'deb' in fields.get('Types', '').split() and 'debian' in fields.get('Signed-By', ''):
            out.append('Types: deb-src\n' + ''.join(f'{k}: {fields[k]}\n' for k in ('URIs', 'Suites', 'Components', 'Signed-By') if k in fields))
for path in ['/etc/apt/sources.list'] + sorted(glob.glob('/etc/apt/sources.list.d/*.list')):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = line.split()
        if words and words[0] == 'deb' and 'debian' in line:
            out.append('Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\n' % (words[1], words[2], ' '.join(words[3:])))
if not out:
    sys.exit('llm42: build-deps: no Debian archive in the system apt sources')
open(sys.argv[1], 'w').write('\n'.join(out))
EOF
apt_opts=(-q -o "Dir::Etc::SourceList=$cache/apt/none.list" -o "Dir::Etc::SourceParts=$cache/apt/sources.list.d"
          -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache=$cache/apt/cache" -o "APT::Sandbox::User=root")
steps=$(( ${#deps[@]} + 1 ))
echo "llm42: build-deps: [1/$steps] source lists" >&2
apt-get "${apt_opts[@]}" update >&2

step=1
for d in "${deps[@]}"; do
  step=$((step + 1))
  want=$(pin "$d")
  echo "llm42: build-deps: [$step/$steps] $d $want: source" >&2
  dir=$cache/src/$d-$want
  if [[ ! -d $dir/tree ]]; then
    rm -rf "$dir" && mkdir -p "$dir"
    if ! (cd "$dir" && apt-get "${apt_opts[@]}" source --download-only "$d=$want" >&2); then
      echo "llm42: build-deps: the source of $d $want could not be downloaded" >&2
      exit 1
    fi
    (cd "$dir" && dpkg-source --no-check -x ./*.dsc tree >/dev/null)
  fi
  build=$work/$d
  common=(-G Ninja -S "$dir/tree" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix"
          -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF
          -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_CXX_VISIBILITY_PRESET=hidden
          -DCMAKE_VISIBILITY_INLINES_HIDDEN=ON "${target_args[@]}")
  case "$d" in
    # C++20, as llm42 compiles: Abseil's std:: aliases (optional, string_view, ...) follow the
    # standard it is built with, and must agree with the code that includes its headers.
    libabsl-dev) cmake "${common[@]}" -DCMAKE_CXX_STANDARD=20 -DABSL_PROPAGATE_CXX_STD=ON -DABSL_BUILD_TESTING=OFF >&2 ;;
    libprotobuf-dev) cmake "${common[@]}" -Dprotobuf_BUILD_TESTS=OFF -Dprotobuf_BUILD_PROTOC_BINARIES=OFF \
                       -Dprotobuf_BUILD_LIBPROTOC=OFF -Dprotobuf_WITH_ZLIB=OFF -Dprotobuf_BUILD_SHARED_LIBS=OFF >&2 ;;
    libutf8proc-dev) cmake "${common[@]}" -DUTF8PROC_ENABLE_TESTING=OFF >&2 ;;
    libgtest-dev) cmake "${common[@]}" -DCMAKE_CXX_STANDARD=20 -Dgtest_disable_pthreads=OFF >&2 ;;
    nlohmann-json3-dev) cmake "${common[@]}" -DJSON_BuildTests=OFF -DJSON_Install=ON >&2 ;;
  esac
  echo "llm42: build-deps: [$step/$steps] $d $want: build" >&2
  cmake --build "$build" --target install >&2
done
echo "$stamp_text" >"$prefix/.stamp"
rm -rf "$work"
echo "llm42: build-deps: $target built in $(( $(date +%s) - start )) s into $prefix" >&2
echo "$prefix"
