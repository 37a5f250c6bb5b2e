"""The [baseline] `profiles new` writes for an SGLang release: the release's own one-batch benchmark on a model built
from its config alone with random weights (`--load-format dummy`), its figure read from the JSON lines the benchmark
writes to `--result-filename`. The module path and every flag are read from that release's wheel (range requests:
the benchmark's module, server_args.py and the arg_groups records), never guessed: 0.5.23 moved
`sglang.bench_one_batch` to `sglang.benchmark.one_batch`, and older releases spell `--batch` for `--batch-size`."""

from __future__ import annotations

from dataclasses import dataclass

from provision.stacks import sglang_flags, wheelmeta

MODULES = ("sglang/benchmark/one_batch.py", "sglang/bench_one_batch.py")  # newest first
FIGURE = "median_decode_throughput"  # tokens a second in decode, the figure serving is judged by
SHAPE = {"--input-len": "256", "--output-len": "32"}


@dataclass(frozen=True, kw_only=True)
class Bench:
    """The baseline written, or why none was."""

    command: tuple[str, ...] = ()
    json_key: str = FIGURE
    read_from: str = ""  # the wheel's members the module and flags were read from
    reason: str = ""  # why no baseline was written (empty when one was)

    @property
    def written(self) -> bool:
        return bool(self.command)


def wanted(name: str) -> bool:
    return (
        name in MODULES
        or name == sglang_flags.SERVER_ARGS
        or (name.startswith(sglang_flags.ARG_GROUPS) and name.endswith(".py"))
    )


def from_sources(sources: dict[str, bytes], model_path: str | None) -> Bench:
    """The one-batch benchmark of the release whose files are `sources`, on `model_path` (None: provision's own
    weight-free folder, `{model}`), TP from the GPUs (`{tp_size}`), its JSON result read from `{result}`."""
    module = next((m for m in MODULES if m in sources), None)
    if module is None:
        return Bench(
            reason="the release has no one-batch benchmark (sglang/benchmark/one_batch.py or sglang/bench_one_batch.py)"
        )
    flags: set[str] = set()
    for source in sources.values():
        tree = sglang_flags.parse(source)
        if tree is not None:
            flags |= sglang_flags.parser_flags(tree)
    batch = next((f for f in ("--batch-size", "--batch") if f in flags), "")
    needed = [
        "--model-path",
        "--load-format",
        "--tp-size",
        "--input-len",
        "--output-len",
        "--result-filename",
    ]
    missing = [f for f in needed if f not in flags] + ([] if batch else ["--batch-size"])
    if missing:
        return Bench(reason=f"{module} accepts no {', '.join(missing)}")
    if FIGURE.encode() not in sources[module]:
        return Bench(reason=f"{module} writes no {FIGURE}")
    command = (
        "python",
        "-m",
        module.removesuffix(".py").replace("/", "."),
        "--model-path",
        model_path or "{model}",
        "--load-format",
        "dummy",
        "--tp-size",
        "{tp_size}",
        batch,
        "1",
        *(part for flag, value in SHAPE.items() for part in (flag, value)),
        "--result-filename",
        "{result}",
    )
    return Bench(
        command=command, read_from=f"{module}, {sglang_flags.SERVER_ARGS} and {sglang_flags.ARG_GROUPS}"
    )


def read(url: str, model_path: str | None) -> Bench:
    """The baseline for the wheel at `url`, its files read by range requests."""
    sources = wheelmeta.sources(url, wanted)
    if sources is None:
        return Bench(
            reason="the index answers no range requests for the wheel, so its benchmark's flags were not read"
        )
    return from_sources(sources, model_path)
