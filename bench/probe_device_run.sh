#!/bin/bash
# Kept from the session 4 runs (the payload folder .device/probe held the nvcc-built probe: nvcc -O3 -arch=sm_90a -std=c++20 -Isrc -o .device/probe/gemv_probe bench/probes/gemv_probe.cu).
D=$(pwd)/.device/probe; OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi -L; date -u
timeout 120 $D/gemv_probe 15 "${FILTER:-}" | tee $OUT/probe.md
