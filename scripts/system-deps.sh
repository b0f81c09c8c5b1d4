#!/usr/bin/env bash
# Installs the Debian packages cachescope's build, tests and demo need, when missing.
#   capnproto: the `capnp` compiler, for the test that checks the checked-in generated code;
#   valgrind, gcc, make: the Cachegrind-identity test builds C programs and runs them under
#   valgrind; the examples test builds examples/ with make and gcc's OpenMP (libgomp).
#   clang-14, libomp-14-dev: the tracer is tested with both compilers (clang's OpenMP runtime
#   is LLVM's libomp, seen through OMPT).
#   binutils: addr2line, which the tracer tests use to check code positions.
# The Rust toolchain itself (cargo, rustc >= 1.88) must already be installed.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found; install the Rust toolchain (rustup, Rust >= 1.88) first" >&2
  exit 2
fi
# The shim's variadic exec trampolines are naked functions (stable since Rust 1.88).
rust_version=$(rustc --version | awk '{print $2}')
if ! printf '1.88.0\n%s\n' "${rust_version%%-*}" | sort -V -C; then
  echo "error: rustc $rust_version is older than 1.88; update the toolchain (rustup update)" >&2
  exit 2
fi

missing=()
command -v capnp >/dev/null 2>&1 || missing+=(capnproto)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v clang-14 >/dev/null 2>&1 || missing+=(clang-14)
[ -e /usr/lib/llvm-14/lib/libomp.so ] || missing+=(libomp-14-dev)
command -v addr2line >/dev/null 2>&1 || missing+=(binutils)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing packages ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 2
  fi
  echo "installing ${missing[*]} ..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
