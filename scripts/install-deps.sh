#!/usr/bin/env bash
# Installs the Debian 12 packages pagoda builds with (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends \
  g++ cmake ninja-build pkg-config \
  libtbb-dev libconcurrentqueue-dev libmimalloc-dev nlohmann-json3-dev libxxhash-dev \
  libzmq3-dev libmsgpack-cxx-dev libpng-dev libjpeg-dev libwebp-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev \
  libcpp-httplib-dev libboost-dev curl haproxy \
  chromium chromium-driver \
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-pytest-asyncio python3-jinja2 python3-jsonschema python3-pil \
  clang libclang-rt-dev clang-format
