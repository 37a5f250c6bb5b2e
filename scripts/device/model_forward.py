"""The Llama that provision's weight-free model folder describes, built by transformers with random weights on the GPU
(as SGLang's dummy loader builds it from config.json): a prefill of 256 tokens and 32 greedy decode steps, timed; the
median decode throughput written as a JSON line to --result-filename, as SGLang's one-batch benchmark writes it."""

import argparse
import json
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--tp-size", type=int, default=1)
parser.add_argument("--result-filename", required=True)
args = parser.parse_args()
config = AutoConfig.from_pretrained(args.model)
model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16).cuda().eval()
ids = torch.randint(0, config.vocab_size, (1, 256), device="cuda")
latencies = []
with torch.no_grad():
    out = model(ids, use_cache=True)
    past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    for _ in range(32):
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model(token, past_key_values=past, use_cache=True)
        past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        latencies.append(time.perf_counter() - start)
median = statistics.median(latencies[2:])
result = {
    "batch_size": 1,
    "input_len": 256,
    "output_len": 32,
    "tp_size": args.tp_size,
    "median_decode_latency": median,
    "median_decode_throughput": 1 / median,
    "parameters": sum(p.numel() for p in model.parameters()),
    "device": torch.cuda.get_device_name(),
}
with open(args.result_filename, "a") as out_file:
    out_file.write(json.dumps(result) + "\n")
print(json.dumps(result))
