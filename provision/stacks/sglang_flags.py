"""What an SGLang release accepts, read from its source with `ast` (nothing imported, torch need not load): the flags of
its server-argument parser and of its benchmarks, and the variables of its environment table. Pure functions over
parsed modules: an installed SGLang's files and a remote wheel's members (read by range requests) go through them alike.

The parser's flags are where the release declares them: `parser.add_argument("--flag", ...)` calls (every flag up to
0.5.1x, and the benchmarks' own), and from 0.5.2x also the annotated fields of the records under
sglang/srt/arg_groups/ (`cuda_graph_max_bs_decode: A[Optional[int], "help"]` is `--cuda-graph-max-bs-decode`;
`Arg(cli_name=..., aliases=[...], no_cli=True)` as add_cli_args_from_dataclass reads them). The variables are the
class attributes of `Envs` in sglang/srt/environ.py (`SGLANG_ENABLE_PCIE_IPC_ALLREDUCE = EnvBool(False)`)."""

from __future__ import annotations

import ast

SERVER_ARGS = "sglang/srt/server_args.py"
ARG_GROUPS = "sglang/srt/arg_groups/"
ENVIRON = "sglang/srt/environ.py"


# SGLang 0.5.23's largest file read here is 131 KB. Python's parser takes about 900 bytes of memory for each byte of
# the densest source ("a\n" repeated: 8 MB took 5 GB and 16 s): a larger file is no Python this reads.
MAX_SOURCE = 1 << 20
# what Python's parser raises on source nested too deep (100,000 unary minus signs: MemoryError, not RecursionError)
UNPARSED = (SyntaxError, ValueError, RecursionError, MemoryError)


def parse(source: bytes) -> ast.Module | None:
    """The module, parsed; None for what is no Python this reads (or larger than MAX_SOURCE)."""
    if len(source) > MAX_SOURCE:
        return None
    try:
        return ast.parse(source)
    except UNPARSED:
        return None


def parser_flags(tree: ast.Module) -> set[str]:
    """Every flag an `add_argument` call names, and every annotated field's flag."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            found |= {
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
            }
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found |= _field_flags(item.target.id, item.annotation)
    return found


def _field_flags(name: str, annotation: ast.expr) -> set[str]:
    """`A[T, "help"]` or `A[T, Arg(...)]` (A is typing.Annotated): the flags add_cli_args_from_dataclass makes of it."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # a quoted annotation
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except UNPARSED:
            return set()
    if not (isinstance(annotation, ast.Subscript) and _name(annotation.value) in ("A", "Annotated")):
        return set()
    elements = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
    for meta in elements[1:]:
        if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
            return {"--" + name.replace("_", "-")}
        if isinstance(meta, ast.Call) and _name(meta.func) == "Arg":
            keywords = {k.arg: k.value for k in meta.keywords if k.arg}
            if _literal(keywords.get("no_cli")) is True:
                return set()
            cli_name = _literal(keywords.get("cli_name"))
            aliases = _literal(keywords.get("aliases"))
            return {
                cli_name if isinstance(cli_name, str) else "--" + name.replace("_", "-"),
                *(a for a in (aliases if isinstance(aliases, list) else []) if isinstance(a, str)),
            }
    return set()


def table_variables(tree: ast.Module) -> set[str]:
    """The variables of `class Envs`: each attribute assigned an Env* field (EnvBool, EnvInt, EnvStr, ...)."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Envs":
            for item in node.body:
                value = item.value if isinstance(item, (ast.Assign, ast.AnnAssign)) else None
                targets = (
                    item.targets
                    if isinstance(item, ast.Assign)
                    else [item.target]
                    if isinstance(item, ast.AnnAssign)
                    else []
                )
                if isinstance(value, ast.Call) and _name(value.func).startswith("Env"):
                    found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _literal(node: ast.expr | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
