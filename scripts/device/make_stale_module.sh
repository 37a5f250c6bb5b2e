#!/usr/bin/env bash
# Build a JIT module linked against libcudart.so.12: what a cu128 environment leaves in a shared FlashInfer workspace.
set -eu
out=${1:?output folder}
mkdir -p "$out"
cd "$out"
echo 'int cudaRuntimeGetVersion(int* v) { *v = 12080; return 0; }' > stub.c
gcc -shared -fPIC -o libcudart.so.12 -Wl,-soname,libcudart.so.12 stub.c
echo 'extern int cudaRuntimeGetVersion(int*); int norm_module(void) { int v; return cudaRuntimeGetVersion(&v); }' > module.c
gcc -shared -fPIC -o norm.so module.c -L. -l:libcudart.so.12
rm -f stub.c module.c
