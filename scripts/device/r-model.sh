#!/usr/bin/env bash
# Issue 40 on the GPU machine, what fits there (no SGLang stack: no registry, 64 MiB a call): provision's weight-free
# model folder, written by provision, loads offline with the image's transformers (tokenizer and config), and torch
# builds the Llama it describes with random weights on the GPU and runs a forward pass and 8 greedy decode steps: the
# shapes SGLang's dummy loader builds. The sglang-serve check SKIPs with its reason where sglang is not installed, and a
# baseline naming {model}, {tp_size} and {result} runs (a stand-in for SGLang's one-batch benchmark: the same forward
# pass, writing its JSON line to --result-filename).
#   Run: bash scripts/device/r-model.sh
EVIDENCE=r-model
. scripts/device/common.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
MODEL=/tmp/dummy-model
step 01-write python3 -c "from pathlib import Path; from provision.checks import dummy_model; p = dummy_model.write(Path('$MODEL')); import os; print(sorted((f, os.path.getsize(p / f)) for f in os.listdir(p)))"
step 02-transformers python3 -c "import transformers; from transformers import AutoConfig, AutoTokenizer; t = AutoTokenizer.from_pretrained('$MODEL'); c = AutoConfig.from_pretrained('$MODEL'); ids = t.encode('Hello, world', add_special_tokens=False); print(transformers.__version__, type(t).__name__, len(t), ids, t.decode(ids), c.model_type, c.vocab_size, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size)"
step 03-forward python3 scripts/device/model_forward.py $MODEL --result-filename "$E/result.jsonl"
printf 'schema = 1\nname = "img"\ncuda = "13.0"\n[packages]\ntorch = ">=2.9"\n[checks]\nrequired = ["driver", "torch-cuda", "sglang-serve"]\n[baseline]\ncommand = ["python", "%s/scripts/device/model_forward.py", "{model}", "--tp-size", "{tp_size}", "--result-filename", "{result}"]\njson_key = "median_decode_throughput"\nunit = "tok/s"\n' "$PWD" > /tmp/img.toml
step 04-adopt $P adopt img $VENV --profile /tmp/img.toml --no-lock
step 05-check $P check img --json
step 06-baseline $P baseline img --runs 3 --json
echo; cat "$E/steps.txt"; echo
cat "$E/01-write.out" "$E/02-transformers.out" "$E/02-transformers.err" | tail -n 8; cat "$E/03-forward.out"; tail -n 5 "$E/03-forward.err"
python3 -c "import json; d=json.load(open('$E/05-check.out')); [print(c['id'], c['status'], c['reason']) for c in d['checks']]"
head -c 900 "$E/06-baseline.out"; tail -n 3 "$E/06-baseline.err"
