#!/usr/bin/env bash
# Runs tests/node/openai.test.mjs (node's built-in test runner + the official openai npm package) against a
# `tritium serve` started here on a free loopback port. Usage: run.sh PATH/TO/tritium
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:?usage: run.sh PATH/TO/tritium}"
cd "$here"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/ajv ]; then
  npm ci --no-audit --no-fund --silent
fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
key="sk-tritium-test"
log="$(mktemp)"
"$bin" serve -t 1 --host 127.0.0.1 --port "$port" --api-key "$key" --kv-cache-memory 64MiB >"$log" 2>&1 &
pid=$!
cleanup() { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT
for _ in $(seq 1 200); do
  if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; echo "tritium serve exited early" >&2; exit 1; fi
  sleep 0.05
done
TRITIUM_URL="http://127.0.0.1:$port/v1" TRITIUM_API_KEY="$key" node --test openai.test.mjs structured.test.mjs
