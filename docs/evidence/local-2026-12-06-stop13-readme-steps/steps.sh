set -u
REG=REGISTRY
W=/tmp/readme-steps; rm -rf $W; mkdir -p $W; cd $W
export PROVISION_HOME=$W/home
P=/work/main/.venv/bin/provision
# this sandbox reaches the default registry only (download.pytorch.org and flashinfer.ai do not resolve): the
# profile's named indexes pointed at it, as the README's mirror rule says (PROVISION_INDEX_<NAME>)
export PROVISION_INDEX_DEFAULT=$REG PROVISION_INDEX_PYTORCH=$REG PROVISION_INDEX_SGLANG=$REG PROVISION_INDEX_FLASHINFER=$REG
step() { echo "\$ $*"; "$@"; echo "exit $?"; echo; }
step $P probe
step $P report
step sh -c "$P probe --json > gpu-box.json"
step $P report --machine /work/main/docs/machines/h200.probe.json --markdown
step $P profiles new today --from sglang --cuda 13.0
python3 -m venv $W/sglang-cu128 && $W/sglang-cu128/bin/pip install -q six 2>/dev/null
step $P adopt cu128 $W/sglang-cu128 --profile cu128
step $P lock today.toml --python 3.12
step $P report --lock lockfiles/pylock.today.toml --machine /work/main/docs/machines/h200.probe.json
step $P create today.toml
step $P envs
step $P upgrade today.toml --runs 3 --name today-upgrade
step $P rollback
