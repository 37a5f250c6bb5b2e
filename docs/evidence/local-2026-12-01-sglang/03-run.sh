#!/bin/bash
# The imports check (and drift) in the SGLang 0.5.23 environment built by run2.sh, on a machine without a driver.
P=/work/wt/sglang/.venv/bin/provision
export UV_CACHE_DIR=/tmp/sg-stack/uv PROVISION_HOME=/tmp/sg-stack/home XDG_CACHE_HOME=/tmp/sg-stack/xdg
cd /tmp/sg-stack
date -u
/usr/bin/time -f "check --only imports: %e s" $P check today --only imports --json > check-imports.json
echo "rc $?"
date -u
