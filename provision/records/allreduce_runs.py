"""`provision bench allreduce`'s results, typed: one call (`AllreduceRun`), each NCCL variant it ran (`VariantRun`),
each size's row, the ranks' teardown, and nccl-tests' figures beside them (or why there are none). The payload's answer
and env.json's records become these in their `parse` classmethods; `to_dict()` writes the keys of docs/json.md.

Data only (results.py's reader, the statuses): envs/records.py stores these.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple

from provision.records.results import JSONObject, Reader, written

Kind = Literal["eager", "graph"]
KINDS: tuple[Kind, ...] = ("eager", "graph")
# a row's figures in the order the payload writes them, then nccl-tests' beside them (nccl_tests.join)
FIGURES = (
    "eager_us",
    "graph_us",
    "graph_launch_cpu_us",
    "eager_algbw",
    "eager_busbw",
    "graph_algbw",
    "graph_busbw",
    "nccl_tests_eager_us",
    "nccl_tests_eager_busbw",
    "eager_ratio",
    "torch_overhead_eager_us",
    "nccl_tests_graph_us",
    "nccl_tests_graph_busbw",
    "graph_ratio",
    "torch_overhead_graph_us",
)


class Side(NamedTuple):
    """One kind's figures in a row (eager or graph-captured); nccl-tests' three are None without it."""

    us: float
    busbw: float | None
    nccl_tests_us: float | None
    ratio: float | None
    torch_overhead_us: float | None


@dataclass(frozen=True, kw_only=True)
class AllreduceRow:
    """One size of the sweep: provision's time per op and bandwidths, eager and graph-captured (graph absent on CPUs),
    and, with nccl-tests beside it, its in-place time, their ratio and what torch.distributed adds per op."""

    size: int
    count: int
    wrong: int
    eager_us: float | None = None
    graph_us: float | None = None
    graph_launch_cpu_us: float | None = None
    eager_algbw: float | None = None
    eager_busbw: float | None = None
    graph_algbw: float | None = None
    graph_busbw: float | None = None
    nccl_tests_eager_us: float | None = None
    nccl_tests_eager_busbw: float | None = None
    eager_ratio: float | None = None
    torch_overhead_eager_us: float | None = None
    nccl_tests_graph_us: float | None = None
    nccl_tests_graph_busbw: float | None = None
    graph_ratio: float | None = None
    torch_overhead_graph_us: float | None = None
    extra: JSONObject = field(default_factory=dict)

    def side(self, kind: Kind) -> Side | None:
        """This kind's figures; None where it was not measured."""
        us: float | None = getattr(self, f"{kind}_us")
        if us is None:
            return None
        return Side(
            us,
            getattr(self, f"{kind}_busbw"),
            getattr(self, f"nccl_tests_{kind}_us"),
            getattr(self, f"{kind}_ratio"),
            getattr(self, f"torch_overhead_{kind}_us"),
        )

    @classmethod
    def parse(cls, fields: Reader) -> AllreduceRow:
        figures: dict[str, float | None] = {name: fields.number(name) for name in FIGURES}
        return cls(
            size=fields.integer("size", required=True) or 0,
            count=fields.integer("count", required=True) or 0,
            wrong=fields.integer("wrong", required=True) or 0,
            **figures,
            extra=fields.rest({"size", "count", "wrong", *FIGURES}),
        )

    def to_dict(self) -> JSONObject:
        figures = {name: getattr(self, name) for name in FIGURES if getattr(self, name) is not None}
        return {"size": self.size, "count": self.count, "wrong": self.wrong, **figures, **self.extra}


@dataclass(frozen=True, kw_only=True)
class AnchorRow:
    """One row of nccl-tests' all_reduce_perf: its in-place columns, and the out-of-place time."""

    size: int
    time_us: float  # in-place, as provision's all_reduce is
    algbw: float
    busbw: float
    wrong: int
    out_of_place_us: float

    @classmethod
    def parse(cls, fields: Reader) -> AnchorRow:
        return cls(
            size=fields.integer("size", required=True) or 0,
            time_us=fields.number("time_us", required=True) or 0.0,
            algbw=fields.number("algbw") or 0.0,
            busbw=fields.number("busbw") or 0.0,
            wrong=fields.integer("wrong") or 0,
            out_of_place_us=fields.number("out_of_place_us") or 0.0,
        )

    def to_dict(self) -> JSONObject:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class NcclTestsFigures:
    """nccl-tests run beside a variant: the NCCL it loaded, its eager and -G rows, and the verify-pass pattern."""

    path: str
    nccl_library: str | None
    eager: list[AnchorRow]
    graph: list[AnchorRow]
    pattern: dict[str, float]

    def to_dict(self) -> JSONObject:
        return {
            "path": self.path,
            "nccl_library": self.nccl_library,
            "eager": [r.to_dict() for r in self.eager],
            "graph": [r.to_dict() for r in self.graph],
            "pattern": self.pattern,
        }


@dataclass(frozen=True, kw_only=True)
class NcclTestsFailure:
    """nccl-tests beside a variant hung or failed (or was not run after it did): one line saying so."""

    path: str
    error: str
    hung_size: int | None = None  # bytes: the size whose row never came
    hung_after_s: float | None = None

    def to_dict(self) -> JSONObject:
        document: JSONObject = {"path": self.path, "error": self.error}
        if self.hung_size is not None:
            document.update(hung_size=self.hung_size, hung_after_s=self.hung_after_s)
        return document


NcclTests = NcclTestsFigures | NcclTestsFailure


def parse_nccl_tests(fields: Reader) -> NcclTests:
    path = fields.text("path") or ""
    error = fields.text("error")
    if error is not None:
        return NcclTestsFailure(
            path=path,
            error=error,
            hung_size=fields.integer("hung_size"),
            hung_after_s=fields.number("hung_after_s"),
        )
    return NcclTestsFigures(
        path=path,
        nccl_library=fields.text("nccl_library"),
        eager=[AnchorRow.parse(row) for row in fields.objects("eager")],
        graph=[AnchorRow.parse(row) for row in fields.objects("graph")],
        pattern=fields.numbers("pattern") or {},
    )


@dataclass(frozen=True, kw_only=True)
class Teardown:
    """How one rank's process group ended: `clean` (None: the rank wrote nothing), `how` ("exit"), or the step it was
    at and what went wrong."""

    clean: bool | None
    how: str | None = None
    seconds: float | None = None
    step: str | None = None
    note: str | None = None
    error: str | None = None

    @classmethod
    def parse(cls, fields: Reader) -> Teardown:
        return cls(
            clean=fields.flag("clean"),
            how=fields.text("how"),
            seconds=fields.number("seconds"),
            step=fields.text("step"),
            note=fields.text("note"),
            error=fields.text("error"),
        )

    def to_dict(self) -> JSONObject:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k == "clean"}


@dataclass(frozen=True, kw_only=True)
class VariantRun:
    """One NCCL variant of a call: its variables as shown (secrets ****), its rows, the verify-pass pattern, each
    rank's teardown, and nccl-tests beside it with what its figures say to try."""

    variant: dict[str, str]
    world_size: int | None = None
    rows: list[AllreduceRow] = field(default_factory=list)
    pattern: dict[str, float] | None = None  # None on CPUs (gloo): no graphs
    teardown: list[Teardown] = field(default_factory=list)
    nccl_nvls_enable: str | None = None
    nccl_tests: NcclTests | None = None
    notes: list[str] | None = None  # written once nccl-tests' figures are beside the rows
    extra: JSONObject = field(default_factory=dict)
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    # a record lacking one is written back without
    ALWAYS: ClassVar[tuple[str, ...]] = (
        "world_size",
        "pattern",
        "teardown",
        "nccl_nvls_enable",
    )

    @classmethod
    def parse(cls, fields: Reader) -> VariantRun:
        """A stored run (env.json), or the payload's details with the variant put in front."""
        anchor = fields.mapping("nccl_tests")
        return cls(
            variant=fields.text_mapping("variant") or {},
            world_size=fields.integer("world_size"),
            rows=[AllreduceRow.parse(row) for row in fields.objects("rows")],
            pattern=fields.numbers("pattern"),
            teardown=[Teardown.parse(t) for t in fields.objects("teardown")],
            nccl_nvls_enable=fields.text("nccl_nvls_enable"),
            nccl_tests=parse_nccl_tests(Reader(anchor, fields.name("nccl_tests")))
            if anchor is not None
            else None,
            notes=fields.strings("notes"),
            extra=fields.rest({f.name for f in dataclasses.fields(cls)}),
            absent=fields.absent(cls.ALWAYS),
        )

    @property
    def anchor_error(self) -> str | None:
        """Why nccl-tests has no figures beside this variant (it hung, failed, or was not run); None when it has."""
        return self.nccl_tests.error if isinstance(self.nccl_tests, NcclTestsFailure) else None

    def to_dict(self) -> JSONObject:
        document: JSONObject = {
            "variant": self.variant,
            "world_size": self.world_size,
            "rows": [r.to_dict() for r in self.rows],
            "pattern": self.pattern,
            "teardown": [t.to_dict() for t in self.teardown],
            "nccl_nvls_enable": self.nccl_nvls_enable,
        }
        if self.nccl_tests is not None:
            document["nccl_tests"] = self.nccl_tests.to_dict()
        if self.notes is not None:
            document["notes"] = self.notes
        return written({**document, **self.extra}, self.absent)


@dataclass(frozen=True, kw_only=True)
class AllreduceRun:
    """One `provision bench allreduce`: every variant's run (docs/json.md)."""

    at: str
    backend: str
    world_size: int
    runs: list[VariantRun]

    @classmethod
    def parse(cls, fields: Reader) -> AllreduceRun:
        return cls(
            at=fields.text("at") or "",
            backend=fields.text("backend") or "nccl",
            world_size=fields.integer("world_size") or 0,
            runs=[VariantRun.parse(run) for run in fields.objects("runs")],
        )

    def anchor_failures(self) -> list[str]:
        """What went wrong with nccl-tests beside the runs (a hang, a crash): the call then exits 1, its figures kept."""
        return [error for run in self.runs if (error := run.anchor_error) is not None]

    def to_dict(self) -> JSONObject:
        return {
            "at": self.at,
            "backend": self.backend,
            "world_size": self.world_size,
            "runs": [r.to_dict() for r in self.runs],
        }
