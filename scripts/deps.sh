#!/bin/sh
# Install the Debian packages cuttle needs, only those missing. Needs root or sudo when any is.
# Arguments name more packages to install the same way (scripts/python_env.sh passes the test-only
# python3-torch and python3-venv, which building and training do not need).
set -eu
pkgs="build-essential cmake pkg-config libopenblas-openmp-dev zlib1g-dev libcmocka-dev libcjson-dev libxxhash-dev libpcre2-dev dataset-fashion-mnist pocl-opencl-icd ocl-icd-opencl-dev opencl-headers libclblast-dev libopenmpi-dev openmpi-bin libdlpack-dev libprotobuf-c-dev protobuf-c-compiler libpng-dev libjpeg62-turbo-dev"
pkgs="$pkgs $*"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "cuttle: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
