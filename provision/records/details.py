"""Each check's own findings (its `details`), typed: the keys provision reads are attributes, checked once where a
payload's answer or a stored result is read (records/results.py); every other key is kept as it came, in its order, so
that `to_json()` writes back what was read, key for key. The shapes: docs/json.md ("Check ids") and docs/checks.md.

Only what provision reads is typed (the report's gates read symmetric-memory's and nccl-allreduce's, the runner
FlashInfer's target build); the rest (each rank's answer, torch's devices, the libraries mapped) is passed through to
`--json` and env.json as it came.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from provision.records.reader import JSONValue, MalformedResult, Reader, drift_counts
from provision.status import Status

D = TypeVar("D", bound="Details")


@dataclass(frozen=True, kw_only=True)
class Details:
    """A check's details that provision reads nothing of (imports, torch-cuda, cuda-libs, ...): kept as they came."""

    # the keys this version does not read, as they were
    rest: dict[str, JSONValue] = field(default_factory=dict)
    # every key as the answer gave them: written in that order (how it is written, not what it says)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    # the typed keys (attributes of the same name), in the order a payload writes them
    READ: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parse(cls, fields: Reader) -> Details:
        return cls(rest=_rest(cls, fields), order=tuple(fields.data))

    def to_json(self) -> dict[str, JSONValue]:
        """The JSON that --json and env.json carry: a typed key read as null (or set) is written, one absent is not."""
        typed = {
            k: _json(getattr(self, k)) for k in self.READ if getattr(self, k) is not None or k in self.order
        }
        merged = {**typed, **self.rest}
        keys = [k for k in self.order if k in merged] + [k for k in merged if k not in self.order]
        return {k: merged[k] for k in keys}


def _json(value: object) -> JSONValue:
    if isinstance(value, Details):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    # as json_text writes it
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


@dataclass(frozen=True, kw_only=True)
class DriftDetails(Details):
    """The drift check's findings (envs/drift.py): its verdict and counts typed, the findings and figures kept."""

    status: Status | None = None
    counts: dict[str, int] | None = None
    READ: ClassVar[tuple[str, ...]] = ("status", "counts")

    @classmethod
    def parse(cls, fields: Reader) -> DriftDetails:
        return cls(
            status=fields.status() if "status" in fields.data else None,
            counts=drift_counts(fields),
            rest=_rest(cls, fields),
            order=tuple(fields.data),
        )


@dataclass(frozen=True, kw_only=True)
class SymmetricMemoryDetails(Details):
    """What the symmetric-memory check saw: the world size, and whether multicast was there (the report's gate)."""

    world_size: int | None = None
    multicast: bool | None = None
    multicast_disabled_by_env: str | None = None  # TORCH_SYMM_MEM_DISABLE_MULTICAST as the payload saw it
    READ: ClassVar[tuple[str, ...]] = ("world_size", "multicast", "multicast_disabled_by_env")

    @classmethod
    def parse(cls, fields: Reader) -> SymmetricMemoryDetails:
        return cls(
            world_size=fields.integer("world_size"),
            multicast=fields.flag("multicast"),
            multicast_disabled_by_env=fields.text("multicast_disabled_by_env"),
            rest=_rest(cls, fields),
            order=tuple(fields.data),
        )


@dataclass(frozen=True, kw_only=True)
class NcclAllreduceDetails(Details):
    """What the NCCL check saw: the world size and torch's peer-access matrix (the report's p2p gate)."""

    world_size: int | None = None
    peer_access: list[list[bool]] | None = None
    READ: ClassVar[tuple[str, ...]] = ("world_size", "peer_access")

    @classmethod
    def parse(cls, fields: Reader) -> NcclAllreduceDetails:
        matrix = fields.data.get("peer_access")
        rows = (
            [[ok for ok in row if isinstance(ok, bool)] for row in matrix if isinstance(row, list)]
            if isinstance(matrix, list)
            else None
        )
        # a row that is no list, or a value in one that is not a bool
        if matrix is not None and rows != matrix:
            raise MalformedResult(
                f"key {fields.name('peer_access')!r} is not a list of lists of true or false"
            )
        return cls(
            world_size=fields.integer("world_size"),
            peer_access=rows,
            rest=_rest(cls, fields),
            order=tuple(fields.data),
        )


@dataclass(frozen=True, kw_only=True)
class FlashinferTarget(Details):
    """FlashInfer's JIT build for an absent SM (`check --target-sm`): the modules it built."""

    built: list[str] | None = None
    READ: ClassVar[tuple[str, ...]] = ("built",)

    @classmethod
    def parse(cls, fields: Reader) -> FlashinferTarget:
        return cls(built=fields.strings("built"), rest=_rest(cls, fields), order=tuple(fields.data))


@dataclass(frozen=True, kw_only=True)
class FlashinferJitDetails(Details):
    """The FlashInfer JIT check: its workspace, the build for an absent SM and the cubins provision found in it."""

    workspace: str | None = None
    target: FlashinferTarget | None = None
    target_cubins: dict[str, int] | None = None  # added by the runner (checks/staleness.py), label -> count
    READ: ClassVar[tuple[str, ...]] = ("workspace", "target", "target_cubins")

    @classmethod
    def parse(cls, fields: Reader) -> FlashinferJitDetails:
        target = fields.mapping("target")
        return cls(
            workspace=fields.text("workspace"),
            target_cubins=fields.integers("target_cubins"),
            target=FlashinferTarget.parse(Reader(target, fields.name("target")))
            if target is not None
            else None,
            rest=_rest(cls, fields),
            order=tuple(fields.data),
        )


def _rest(cls: type[Details], fields: Reader) -> dict[str, JSONValue]:
    """The keys `cls` does not read, as they were."""
    return fields.rest(set(cls.READ))


BY_CHECK: dict[str, type[Details]] = {
    "drift": DriftDetails,
    "symmetric-memory": SymmetricMemoryDetails,
    "nccl-allreduce": NcclAllreduceDetails,
    "flashinfer-jit": FlashinferJitDetails,
}


def parse(check_id: str, fields: Reader) -> Details:
    """Check `check_id`'s details (an unknown id's, from a newer provision, kept as they are)."""
    return BY_CHECK.get(check_id, Details).parse(fields)


def of(kind: type[D], details: Details | None) -> D | None:
    """`details` as the check's own kind, None when the result carries none (or another check's)."""
    return details if isinstance(details, kind) else None
