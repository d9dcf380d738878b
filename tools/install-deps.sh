#!/usr/bin/env bash
# Installs the Debian packages llm42 builds with, at the versions it is tested with.
# Packages already present at the pinned version are left alone. When a pinned version is no
# longer offered by the archive (a security update replaced it), the current one is installed
# instead and a warning says so.
set -euo pipefail

PINNED=(
  cmake=3.25.1-1
  ninja-build=1.11.1-2~deb12u1
  g++=4:12.2.0-3
  ccache=4.8+really4.7.5-1
  pkg-config=1.8.1-1
  libabsl-dev=20220623.1-1+deb12u2
  libprotobuf-dev=3.21.12-3+deb12u1
  protobuf-compiler=3.21.12-3+deb12u1
  libgtest-dev=1.12.1-0.2
  libgmock-dev=1.12.1-0.2
  nlohmann-json3-dev=3.11.2-2
  libutf8proc-dev=2.8.0-1
  libblis-serial-dev=0.9.0-1
  libssl-dev=3.0.19-1~deb12u2
  clang=1:14.0-55.7~deb12u1
  python3-jinja2=3.1.2-1+deb12u3
  python3-jsonschema=4.10.3-1
  swig=4.1.0-0.2
  python3-dev=3.11.2-1+b1
  python3-pytest=7.2.1-2
  python3-venv=3.11.2-1+b1
  openjdk-17-jdk-headless=17.0.15+6-1~deb12u1
  junit4=4.13.2-3
  mono-devel=6.8.0.105+dfsg-3.3+deb12u1
  libnunit-cil-dev=2.6.4+dfsg-1.1
  nunit-console=2.6.4+dfsg-1.1
  dpkg-dev=1.21.22
  debootstrap=1.0.128+nmu2+deb12u2
  g++-mingw-w64-x86-64-posix=12.2.0-14+deb12u1+25.2+b1
  wine64=8.0~repack-4
)
# Sourced (tools/build-deps.sh reads the pins): nothing else.
if [[ ${BASH_SOURCE[0]} != "$0" ]]; then return 0; fi

missing=()
for spec in "${PINNED[@]}"; do
  pkg=${spec%%=*}
  want=${spec#*=}
  state=$(dpkg-query -W -f='${db:Status-Abbrev}|${Version}' "$pkg" 2>/dev/null || true)
  if [ "${state:0:2}" != "ii" ]; then
    missing+=("$spec")
  elif [ "${state#*|}" != "$want" ]; then
    echo "llm42: note: $pkg ${state#*|} is installed; tested with $want" >&2
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
echo "llm42: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "llm42: warning: pinned versions unavailable; installing the archive's current versions" >&2
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]%%=*}"
fi
