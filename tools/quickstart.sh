#!/usr/bin/env bash
# Installs what is missing, builds the llm42 CLI and streams a deterministic generation.
#   tools/quickstart.sh [MODEL.gguf or Hugging Face directory] [PROMPT]
# Without MODEL it uses ../shared/models/stories260K.gguf beside the repository.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

model=${1:-../shared/models/stories260K.gguf}
prompt=${2:-Once upon a time}
if [ ! -e "$model" ]; then
  cat >&2 <<MSG
llm42: no model at '$model'.
Download a GGUF model, for example the 1 MB stories260K from the Hugging Face repository
ggml-org/models (file tinyllamas/stories260K.gguf):
  https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf
then run: tools/quickstart.sh PATH/TO/MODEL.gguf "Your prompt"
MSG
  exit 1
fi

bash tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target llm42_cli
echo "--- llm42 generate (deterministic, streamed) ---" >&2
exec build/tools/llm42 generate --model "$model" --prompt "$prompt" --max-tokens 200 --deterministic
