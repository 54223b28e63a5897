#!/usr/bin/env bash
# Runs the node tests (node's built-in test runner + the official openai and @anthropic-ai/sdk npm packages, ajv)
# against `tritium serve` started here on free loopback ports: openai.test.mjs, structured.test.mjs and
# anthropic.test.mjs on the bundled model (anthropic.test.mjs's tool tests on the Qwen3 server); tools.test.mjs
# on the bundled model with the Qwen3 chat template (from $TRITIUM_TEST_DATA/tokenizers/qwen3), and the structured
# output test on tiny-qwen2 too ($TRITIUM_TEST_DATA/models/tiny-qwen2); both skipped without the shared data.
# responses.test.mjs (POST /v1/responses) on the bundled model, its tool tests on the Qwen3-template server.
# Usage: run.sh PATH/TO/tritium
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:?usage: run.sh PATH/TO/tritium}"
cd "$here"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/ajv ] || [ ! -d node_modules/ajv-formats ] ||
   [ ! -d node_modules/@anthropic-ai/sdk ]; then
  npm ci --no-audit --no-fund --silent
fi
key="sk-tritium-test"
tmp="$(mktemp -d)"
# start_server runs in a command substitution (a subshell), so the servers' pids go to a file, not a variable.
cleanup() {
  if [ -f "$tmp/pids" ]; then
    while read -r p; do
      kill -TERM "$p" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
      kill -KILL "$p" 2>/dev/null || true
    done < "$tmp/pids"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# start_server NAME ARGS...: prints the port once /health answers.
start_server() {
  local name=$1; shift
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$bin" serve -t 1 --host 127.0.0.1 --port "$port" --api-key "$key" --kv-cache-memory 64MiB "$@" >"$tmp/$name.log" 2>&1 &
  local pid=$!
  echo "$pid" >> "$tmp/pids"
  for _ in $(seq 1 200); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then echo "$port"; return; fi
    if ! kill -0 "$pid" 2>/dev/null; then cat "$tmp/$name.log" >&2; echo "tritium serve exited early" >&2; exit 1; fi
    sleep 0.05
  done
}
port="$(start_server main)"
tools_url=""
data="${TRITIUM_TEST_DATA:-$here/../../../shared}"
if [ -f "$data/tokenizers/qwen3/tokenizer_config.json" ]; then
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chat_template"], end="")' \
    "$data/tokenizers/qwen3/tokenizer_config.json" > "$tmp/qwen3.jinja"
  tools_port="$(start_server qwen3 --chat-template "$tmp/qwen3.jinja")"
  tools_url="http://127.0.0.1:$tools_port/v1"
fi
qwen2_url=""
if [ -f "$data/models/tiny-qwen2/config.json" ]; then
  qwen2_url="http://127.0.0.1:$(start_server qwen2 -m "$data/models/tiny-qwen2")/v1"
fi
TRITIUM_URL="http://127.0.0.1:$port/v1" TRITIUM_TOOLS_URL="$tools_url" TRITIUM_QWEN2_URL="$qwen2_url" TRITIUM_API_KEY="$key" \
  node --test openai.test.mjs structured.test.mjs tools.test.mjs responses.test.mjs anthropic.test.mjs
