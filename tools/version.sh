#!/usr/bin/env bash
# Prints the library's version ("MAJOR.MINOR.PATCH"), read from where it is written once:
# LLM42_VERSION_STRING in include/llm42/llm42.h (CMakeLists.txt reads it from there too).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=$(sed -n 's/^#define LLM42_VERSION_STRING "\([0-9]*\.[0-9]*\.[0-9]*\)"$/\1/p' include/llm42/llm42.h)
if [[ -z "$version" ]]; then
  echo "tools/version.sh: no LLM42_VERSION_STRING \"MAJOR.MINOR.PATCH\" in include/llm42/llm42.h" >&2
  exit 1
fi
echo "$version"
