# Shared start of the device scripts (bench/*_device_run*.sh), sourced from the checkout root on the device:
#   R=$(pwd); . "$R/bench/device_preamble.sh" NAME
# NAME is the carried payload folder .device/NAME (payload.tar.xz: bin/{tritium,tritium_tests} built here for
# sm_90, lib/ the shared libraries they need, shared/ the test data). Sets D, OUT (results, fetched), S (summary),
# TR / TT (the binaries), say (echo into the summary) and el (seconds since the start); unpacks the payload and
# points the tests at the checkout's models.
D=$R/.device/${1:?payload folder name}; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium; TT=$D/bin/tritium_tests
nvidia-smi -L | tee -a $S; date -u | tee -a $S; ldd $TR | grep "not found" | tee -a $S
