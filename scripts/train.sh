#!/bin/sh
# Build cuttle and run the main job, `cuttle train`, with its defaults (arguments are passed on).
set -eu
cd "$(dirname "$0")/.."
./scripts/build.sh build
exec ./build/cuttle train "$@"
