#!/usr/bin/env bash
# The main job as it stands: build tandem, and generate from the model given
# (or from a small random-weight Llama that it synthesizes when none is).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
go build -o tandem ./cmd/tandem
model=${1:-}
prompt=${2:-Once upon a time}
if [ -z "$model" ]; then
  model=$(mktemp -d)/tiny.gguf
  ./tandem model synth --preset tiny --type q8_0 -o "$model"
fi
./tandem model info "$model" | head -14
./tandem generate --model "$model" --prompt "$prompt" --max-tokens 48 --temperature 0
