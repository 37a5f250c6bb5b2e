#!/usr/bin/env bash
# probe where a crash is suspected (a `crashed` file kept, as after NVML killed a child), on a machine whose driver
# answers: with os.fork refused (EAGAIN) NVML is not asked (state not_asked, never "no driver"); with fork working the
# child reads NVML cleanly, the probe reads the driver and the `crashed` file goes.
#   Run: bash scripts/device/r-stop14b.sh   (under a minute; wheels in .whl/: common.sh's)
EVIDENCE=r-stop14b
. scripts/device/common.sh
export XDG_CACHE_HOME=/tmp/stop14b-cache; rm -rf "$XDG_CACHE_HOME" "$PROVISION_HOME"
step 00-adopt $P adopt gpu $VENV --no-lock
mkdir -p "$XDG_CACHE_HOME/provision/nvml"; : > "$XDG_CACHE_HOME/provision/nvml/crashed"
REFUSED="import errno, os, runpy, sys
def refused():
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
os.fork = refused
sys.argv = ['provision', *sys.argv[1:]]
runpy.run_module('provision', run_name='__main__', alter_sys=True)"
step 01-probe-fork-refused python3 -c "$REFUSED" probe --json
step 02-ls-after ls -la "$XDG_CACHE_HOME/provision/nvml"
step 03-check-fork-refused python3 -c "$REFUSED" check gpu --only driver --json
step 04-probe-fork-works $P probe --json
step 05-ls-after ls -la "$XDG_CACHE_HOME/provision/nvml"
echo; cat "$E/steps.txt"; echo
drivers 01-probe-fork-refused 04-probe-fork-works
cat "$E/03-check-fork-refused.out" | head -c 800; echo; cat "$E/02-ls-after.out" "$E/05-ls-after.out"
