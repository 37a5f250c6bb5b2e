#!/usr/bin/env bash
# Issue 20 item 6 on the GPU machine with real packages: the image's venv (torch 2.11 cu130, jax cuda13, cupy, ...)
# copied as hard links, the carried FlashInfer 0.6.9 installed into the copy, adopted with the image's profile; then
#  - every check with the driver (imports, torch, symmetric memory, FlashInfer JIT, ...): the GPU paths after today's
#    changes;
#  - the imports check again with libcuda.so.1 hidden from one process tree (a bind mount of /dev/null over the
#    driver's library in a private mount namespace; the machine's files untouched): a module failing only for want of
#    libcuda SKIPs with that reason, any other failure still FAILs.
# Run from the repository root there, `.whl` carried: bash scripts/device/imports-real.sh
EVIDENCE=${EVIDENCE:-h200-imports}
. scripts/device/common.sh
COPY=/tmp/img/.venv; rm -rf /tmp/img; mkdir -p /tmp/img
step 01-copy cp -al $VENV $COPY
step 02-flashinfer $COPY/bin/python -m pip install -q --no-index --no-deps --no-compile .whl/flashinfer_python-*.whl \
  .whl/apache_tvm_ffi-*.whl .whl/cuda_tile-*.whl .whl/nvidia_cudnn_frontend-*.whl
step 03-adopt $P adopt img $COPY --profile scripts/device/h200-image.toml --no-lock
step 04-check-all $P check img --target-sm 9.0 --json
step 05-check-all-table $P check img --target-sm 9.0 --only imports
step 05b-flashinfer-target-12 $P check img --target-sm 12.0 --only flashinfer-jit --json
LIBCUDA=$(python3 -c "import os; print(os.path.realpath([l.split(' => ')[1] for l in os.popen('ldconfig -p').read().splitlines() if 'libcuda.so.1 ' in l][0]))")
HIDE="mount --bind /dev/null $LIBCUDA && $P check img --only imports --json"
if unshare -rm true 2>/dev/null; then step 06-imports-no-driver unshare -rm sh -c "$HIDE"
else step 06-imports-no-driver unshare -m sh -c "$HIDE"; fi
step 07-imports-no-driver-table bash -c "unshare -m sh -c 'mount --bind /dev/null $LIBCUDA && $P check img --only imports'"
echo; cat "$E/steps.txt"; echo
python3 - "$E" <<'PY'
import json, sys, pathlib
e = pathlib.Path(sys.argv[1])
for name in ("04-check-all", "05b-flashinfer-target-12", "06-imports-no-driver"):
    try:
        doc = json.loads((e / f"{name}.out").read_text())
    except Exception as exc:
        print(name, "unreadable:", exc); continue
    print("==", name, doc.get("status"))
    for c in doc.get("checks", []):
        print(f"  {c['id']:<22} {c['status']:<6} {str(c.get('reason'))[:150]}")
        for mod, r in (c.get("details") or {}).get("modules", {}).items() if c["id"] == "imports" else []:
            if r.get("status") != "pass":
                print(f"      {mod}: {r.get('status')} {str(r.get('reason'))[:140]}")
PY
