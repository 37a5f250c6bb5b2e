#!/bin/bash
# README's upgrade steps, as written, one after the other; a fresh home and provision cache, the tests' uv cache.
W=/tmp/steps18f; rm -rf $W; mkdir -p $W; cd $W
export PATH=/tmp/q1b/.venv/bin:$PATH   # the newcomer's install of README's first command
export PROVISION_HOME=$W/home XDG_CACHE_HOME=$W/xdg UV_CACHE_DIR=/root/.cache/provision-tests/sglang-stack/uv
R=<the default registry: its simple URL>
step() { echo "\$ $*"; "$@"; echo "rc=$?"; echo; }
step provision probe
step provision report
provision probe --json > gpu-box.json; echo "\$ provision probe --json > gpu-box.json"; echo "rc=$?"; echo
step provision report --machine gpu-box.json --markdown
step provision profiles new today --from sglang --cuda 13.0
# the venv that works today: here a small one built by uv (no cu128 SGLang venv on this machine)
python3 -m venv $W/sglang-cu128 >/dev/null && $W/sglang-cu128/bin/pip install -q six >/dev/null 2>&1
step provision adopt cu128 $W/sglang-cu128 --profile cu128
step provision switch cu128
echo "(this machine reaches no PyTorch index (DNS): every index pointed at the default registry from here on)"
export PROVISION_INDEX_PYTORCH=$R PROVISION_INDEX_SGLANG=$R PROVISION_INDEX_DEFAULT=$R
step provision lock today.toml --python 3.12
step provision report --lock lockfiles/pylock.today.toml --machine gpu-box.json
step provision create today.toml
step provision check today --target-sm 12.0
step provision baseline today --runs 5
step provision check today --only drift
step provision envs
step provision rollback
step provision run today -- python -c "import sglang, flashinfer, torch; print('sglang', sglang.__version__, 'flashinfer', flashinfer.__version__, 'torch', torch.__version__)"
