#!/usr/bin/env bash
# Issue 23, item 6, on the one-H200 machine: whole-process `scan --json FILE` A/B in ONE run. A = .carry/before.tar (a
# `git archive` of main before the change, carried: the device copy's .git is older than main), B = this checkout;
# both as `python -m provision` from their folder, in provision's own venv as startup2.sh builds it, interleaved.
#   Run: bash scripts/device/scan-ab.sh   (from the repository root; `.whl` and `.carry/before.tar` carried)
EVIDENCE=scan-ab
. scripts/device/common.sh
python3 -m venv --without-pip /tmp/pv
PV=/tmp/pv/bin/python
printf '%s\n' /tmp/site "$SITE" > "$($PV -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/provision-paths.pth"
python3 -m compileall -q /tmp/site $SITE/click >/dev/null
rm -rf /tmp/before && mkdir -p /tmp/before && tar -xf .carry/before.tar -C /tmp/before
unset PYTHONPATH
LIBS=(jax_plugins/xla_cuda13/xla_cuda_plugin.so nvidia/cu13/lib/libcublasLt.so.13 torch/lib/libtorch_cpu.so
      torch/lib/libtorch_cuda.so triton/_C/libtriton.so)
SCANS=(); for lib in "${LIBS[@]}"; do SCANS+=(--scan "$SITE/$lib"); done
step 01-before bash -c "diff <(cd /tmp/before && find provision -name '*.py' | sort | xargs md5sum) <(find provision -name '*.py' | sort | xargs md5sum); nproc"
step 02-ab $PV scripts/bench_startup.py --runs 21 --before /tmp/before "${SCANS[@]}" --scan /bin/true --json /tmp/$EVIDENCE/ab.json
same() {  # each library's answer from A and from B, compared without the "seconds" line (each run's own time)
  for lib in "${LIBS[@]}"; do
    name=$(basename "$lib")
    (cd /tmp/before && $PV -m provision scan --json "$SITE/$lib") > "$E/before-$name.json"
    $PV -m provision scan --json "$SITE/$lib" > "$E/after-$name.json"
    if diff <(grep -v '"seconds"' "$E/before-$name.json") <(grep -v '"seconds"' "$E/after-$name.json"); then
      echo "same answer: $name"; else echo "DIFFERENT: $name"; status=1; fi
  done
  return ${status:-0}
}
step 03-same same
echo; cat "$E/steps.txt"; echo; cat "$E/01-before.out" "$E/02-ab.out" "$E/03-same.out"
