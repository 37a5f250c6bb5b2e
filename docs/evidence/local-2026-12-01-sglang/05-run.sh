#!/bin/bash
# run4's first report again: the 21 wheels it fetched are kept in provision's cache, nothing is downloaded.
P=/work/wt/sglang/.venv/bin/provision
export UV_CACHE_DIR=/tmp/sg-stack/uv XDG_CACHE_HOME=/tmp/sg-stack/xdg4
cd /tmp
M=/work/wt/sglang/docs/machines
/usr/bin/time -f "report --lock again: %e s" $P report --lock /tmp/sg-stack/pylock.today.toml --machine $M/h200.probe.json --machine $M/rtx-pro-6000-x8.probe.json --json > /tmp/sg-stack/report-lock-again.json
echo "rc $?"
