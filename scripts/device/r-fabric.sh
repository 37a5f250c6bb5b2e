#!/usr/bin/env bash
# Issue 37, item 4: what the GPU machine's real NVML answers for the NVSwitch fabric state (nvmlDeviceGetGpuFabricInfoV:
# state, status, clique), read by probe, recorded with --record-nvml, replayed through the same reader, and judged by
# the report (a fabric not `completed` is a FAIL naming Fabric Manager and NVLSM; NotSupported is no finding). No wheels.
#   Run: bash scripts/device/r-fabric.sh
EVIDENCE=r-fabric
. scripts/device/common.sh
step 01-probe-json $P probe --json
step 02-record $P probe --record-nvml "$E/nvml.json" --json
step 03-fabric-calls python3 -c "import json,sys; d=json.load(open('$E/nvml.json')); [print(json.dumps(c)) for c in d['calls'] if 'Fabric' in c['fn']]"
step 04-replay env PROVISION_NVML_REPLAY="$E/nvml.json" $P probe --json
step 05-report $P report --profile cu130-stable --json
step 06-direct python3 -c "import ctypes, pynvml as n; n.nvmlInit(); h=n.nvmlDeviceGetHandleByIndex(0); i=n.c_nvmlGpuFabricInfoV_t(); n.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(i)); print(i.state, i.status, i.cliqueId, bytes(i.clusterUuid).hex(), i.healthMask)"
step 07-nvidia-smi-fabric nvidia-smi -q -d FABRIC
echo; cat "$E/steps.txt"; echo
cat "$E/03-fabric-calls.out" "$E/03-fabric-calls.err"
python3 -c "import json; [print(g['index'], g['name'], g.get('fabric')) for g in json.load(open('$E/01-probe-json.out'))['gpus']]"
python3 -c "import json; [print(g['index'], g.get('fabric')) for g in json.load(open('$E/04-replay.out'))['gpus']]"
python3 -c "import json; d=json.load(open('$E/05-report.out')); print(d['knowledge_as_of']); [print(t['name'], [(g['id'], g['status'], g['reason'][:200]) for g in t['gates'] if g['id'] in ('fabric', 'multi-gpu')]) for t in d['machines'][0]['targets']]"
cat "$E/06-direct.out" "$E/06-direct.err"; head -n 30 "$E/07-nvidia-smi-fabric.out"
