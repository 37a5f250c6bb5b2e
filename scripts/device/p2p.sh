#!/usr/bin/env bash
# Issue 25 items 1-2 on the one-GPU machine (nvidia-h200): the probe's PCI facts (IOMMU mode, the bridges above the GPU
# and their ACS bits) recorded with --record-nvml and replayed, beside the raw sysfs they came from and `lspci -vvv` of
# the same functions; the GPU's config space as root (4 KB) and as an unprivileged user (64 bytes: the note that root
# reads it); the parser's capability offsets beside lspci's. Run from the repository root there, as root.
# Needs .whl (scripts/device/common.sh) and, for lspci, Debian's pciutils carried as .debs in .carry/pciutils, fetched
# here with: mkdir -p .carry/pciutils && (cd .carry/pciutils && apt-get download pciutils libpci3 pci.ids libkmod2)
# and unpacked there into a folder (never /). Carry: .whl .carry
EVIDENCE=${EVIDENCE:-h200-p2p}
. scripts/device/common.sh
RAW=$E/raw; mkdir -p "$RAW"
step 00-id id
step 01-probe-json $P probe --json --record-nvml "$E/h200-p2p.nvml.json"
step 02-probe-replayed env PROVISION_NVML_REPLAY="$E/h200-p2p.nvml.json" $P probe --json
step 03-probe $P probe
step 04-report $P report --profile cu130
# The NVIDIA functions and every PCI device above them, from their sysfs paths
VENDOR=${P2P_VENDOR:-0x10de}  # NVIDIA; another vendor's functions stand in for a dry run on a machine without a GPU
GPUS=$(for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor)" = $VENDOR ] && basename $d; done)
CHAIN=$(for g in $GPUS; do readlink -f /sys/bus/pci/devices/$g | tr / '\n' | grep -E '^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$'; done | sort -u)
{
  echo "GPUs: $GPUS"; echo "functions on their paths: $CHAIN"
  for b in $CHAIN; do
    d=/sys/bus/pci/devices/$b
    echo "== $b $(readlink -f $d) class=$(cat $d/class) vendor=$(cat $d/vendor) device=$(cat $d/device) config_size=$(stat -c %s $d/config)"
    echo "iommu_group: $(readlink -f $d/iommu_group 2>&1) type: $(cat $d/iommu_group/type 2>&1)"
    cp $d/config "$RAW/$(echo $b | tr : _).config"
  done
  echo "== /sys/class/iommu: $(ls /sys/class/iommu | tr '\n' ' ')"; echo "== /sys/kernel/iommu_groups: $(ls /sys/kernel/iommu_groups | wc -l) groups"
  echo "== /proc/cmdline"; cat /proc/cmdline
} > "$E/10-sysfs.txt" 2>&1
step 11-dmesg-iommu bash -c "dmesg 2>&1 | grep -iE 'iommu|dmar|amd-vi|acs' | head -40"
# What a reader without root gets (Linux hands it 64 bytes), through the probe's own reader, as user nobody (with a
# copy of provision it can read: the checkout may sit in root's home)
rm -rf /tmp/p2p-src && mkdir -p /tmp/p2p-src && cp -r provision /tmp/p2p-src/ && chmod -R a+rX /tmp/p2p-src /tmp/site
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp PYTHONPATH=/tmp/site:/tmp/p2p-src"
for b in $CHAIN; do
  step 12-unprivileged-$b $NOBODY python3 -c \
    "import sys; from provision.machine import sysfs; print(len(sysfs.Live().read(sys.argv[1])))" /sys/bus/pci/devices/$b/config
done
step 13-probe-unprivileged $NOBODY python3 -m provision probe --json
# lspci from the carried .debs, unpacked into a folder
PU=
if ls .carry/pciutils/*.deb >/dev/null 2>&1; then
  PU=/tmp/pciutils; mkdir -p $PU; for f in .carry/pciutils/*.deb; do dpkg -x "$f" $PU; done
  export LD_LIBRARY_PATH=$PU/usr/lib/x86_64-linux-gnu:$PU/lib/x86_64-linux-gnu
  LSPCI="$PU/usr/bin/lspci -i $PU/usr/share/misc/pci.ids"
  step 20-lspci-tree $LSPCI -tv
  for b in $CHAIN; do
    step 21-lspci-vvv-$b $LSPCI -vvv -nn -D -s $b
    step 22-lspci-x-$b $LSPCI -xxxx -s $b
    step 23-setpci-acs-$b $PU/usr/bin/setpci -s $b ECAP_ACS+0x6.w
  done
fi
step 40-bench-pci python3 scripts/bench_pci.py --runs 21 ${PU:+--lspci $PU/usr/bin/lspci} --json "$E/bench-pci.json"
# The parser's reading of each dumped config space beside lspci's capability offsets
step 30-parser-vs-lspci python3 - "$RAW" "$E" <<'EOF'
import pathlib, re, sys
from provision.machine import pciconfig
raw, evidence = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for dump in sorted(raw.glob("*.config")):
    bdf = dump.stem.replace("_", ":")
    data = dump.read_bytes()
    config = pciconfig.parse(data)
    ours = [offset for _, offset in pciconfig.capabilities(data)] + [o for *_, o in pciconfig.extended_capabilities(data)]
    print(f"{bdf}: {len(data)} bytes, {config.vendor_id:04x}:{config.device_id:04x} class {config.class_code:06x} "
          f"port {config.port_type} ACS {config.acs_capability, config.acs_control}")
    print(f"  capabilities (parser): {[hex(o) for o in ours]}")
    lspci = evidence / f"21-lspci-vvv-{bdf}.out"
    if lspci.exists():
        theirs = [int(o, 16) for o in re.findall(r"Capabilities: \[([0-9a-f]+)(?: v\d+)?\]", lspci.read_text())]
        print(f"  capabilities (lspci):  {[hex(o) for o in theirs]} -> {'MATCH' if theirs == ours else 'DIFFER'}")
EOF
cp "$E/01-probe-json.out" "$OUT/h200-p2p.probe.json"; cp "$E/h200-p2p.nvml.json" "$OUT/"
echo; cat "$E/steps.txt"; echo; cat "$E/10-sysfs.txt" "$E/30-parser-vs-lspci.out" "$E/40-bench-pci.out"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d['pci'], indent=1)); print(d['notes'])" "$E/01-probe-json.out"
for f in "$E"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -3 "$f"; }; done
