#!/usr/bin/env bash
# Generates Python, mypy stubs and gRPC stubs from proto/skyqa/v1 into <out>/skyqa/v1.
# With --check, generates into a temp dir and fails if the committed code differs.
set -euo pipefail
check=0
if [[ "${1:-}" == "--check" ]]; then check=1; shift; fi
out="${1:?usage: gen_proto.sh [--check] OUT_DIR}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="$out"
if (( check )); then target="$(mktemp -d)"; trap 'rm -rf "$target"' EXIT; fi
mkdir -p "$target/skyqa/v1"
cd "$root"
python -m grpc_tools.protoc -I proto \
  --python_out="$target" --mypy_out="$target" \
  --grpc_python_out="$target" --mypy_grpc_out="$target" \
  proto/skyqa/v1/*.proto 2> >(grep -v "^Writing mypy" >&2)
# gRPC stubs are only kept for files that declare a service.
for f in "$target"/skyqa/v1/*_pb2_grpc.py; do
  base="$(basename "$f" _pb2_grpc.py)"
  if ! grep -q '^service ' "proto/skyqa/v1/$base.proto"; then rm -f "$f" "${f%.py}.pyi"; fi
done
echo '"""Generated protobuf code for skyqa.v1 (make proto). Do not edit."""' > "$target/skyqa/v1/__init__.py"
if (( check )); then
  if ! diff -r -q -x '__pycache__' "$target/skyqa/v1" "$out/skyqa/v1"; then
    echo "generated protobuf code is stale: run 'make proto' and commit the result" >&2
    exit 1
  fi
  echo "protobuf code is up to date"
fi
