#!/bin/bash
# The whole SGLang 0.5.23 stack, as a new user makes it: lock, then create with uv's cache empty at first.
set -x
P=/work/wt/sglang/.venv/bin/provision
export UV_CACHE_DIR=/tmp/sg-stack/uv PROVISION_HOME=/tmp/sg-stack/home XDG_CACHE_HOME=/tmp/sg-stack/xdg
cd /tmp/sg-stack  # today.toml: provision profiles new today --from sglang==0.5.23 --index NAME=$REGISTRY for pytorch, sglang, flashinfer, default ($REGISTRY: uv's default registry)
date -u
/usr/bin/time -f "lock: %e s" $P lock ./today.toml -o /tmp/sg-stack/pylock.today.toml --json > lock.json
date -u
/usr/bin/time -f "create: %e s" $P create ./today.toml --lock /tmp/sg-stack/pylock.today.toml --python /root/.pyenv/versions/3.12.1/bin/python3.12 --json > create.json
echo "create rc $?"
date -u
du -sh /tmp/sg-stack/uv /tmp/sg-stack/home
