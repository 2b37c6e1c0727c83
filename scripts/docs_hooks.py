"""MkDocs hooks (mkdocs.yml `hooks:`): pages generated at build time from the project itself.

- `reference/scenario.md` from docs/scenario.schema.json (what `critmem schema` prints): every
  key with its type, unit, default, an example from examples/*.toml, the mechanisms it belongs
  to and its description (the Rust doc comment of the loader's field).
- `reference/cli.md` from the argparse parsers (`critmem.cli.build_parser`).
- `benchmarks.md` from BENCHMARKS.md at the repository root.

Nothing here is written to docs/: the pages exist only in the build.
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "docs" / "scenario.schema.json"
EXAMPLES = ROOT / "examples"

# The mechanisms a key belongs to: by definition, then refined per key. A key the table does
# not name takes its definition's entry, so a key added to the schema appears without edits.
CORE = "core"
MECHANISM_PAGES = {
    CORE: "../scenarios/index.md",
    "MC²": "../reproduce/mc2.md",
    "HiRes": "../reproduce/hires.md",
    "TMEM": "../reproduce/tmem.md",
    "Linux/RK": "../reproduce/shared-pages.md",
    "SARA": "../reproduce/sara.md",
    "Linux": "../linux/index.md",
}
BY_DEF: dict[str, tuple[str, ...]] = {
    "Scenario": (CORE,),
    "Machine": (CORE,),
    "Run": (CORE,),
    "Task": (CORE,),
    "Exec": (CORE,),
    "Suspend": (CORE,),
    "Scheduler": (CORE,),
    "Slot": (CORE, "MC²"),
    "Server": ("HiRes",),
    "ServerSlot": ("HiRes",),
    "ServerReserve": ("HiRes",),
    "Io": ("HiRes",),
    "IoStream": ("HiRes",),
    "IoPort": ("HiRes",),
    "IoTransmit": ("HiRes",),
    "Resource": (CORE, "HiRes"),
    "Action": (CORE,),
    "Components": ("TMEM",),
    "Component": ("TMEM",),
    "Tmem": ("TMEM",),
    "Memory": ("Linux/RK",),
    "SwapDevice": ("Linux/RK",),
    "Access": ("Linux/RK",),
    "Reservation": ("Linux/RK",),
    "Region": ("Linux/RK",),
    "Group": ("SARA",),
    "Control": ("SARA",),
}
BY_KEY: dict[tuple[str, str], tuple[str, ...]] = {
    ("Scenario", "memory"): ("Linux/RK", "MC²"),
    ("Scenario", "reservation"): ("Linux/RK",),
    ("Scenario", "region"): ("Linux/RK",),
    ("Scenario", "control"): ("SARA",),
    ("Scenario", "group"): ("SARA",),
    ("Scenario", "components"): ("TMEM",),
    ("Scenario", "component"): ("TMEM",),
    ("Scenario", "tmem"): ("TMEM",),
    ("Scenario", "io"): ("HiRes",),
    ("Scheduler", "kind"): (CORE, "MC²"),
    ("Scheduler", "major_frame_ms"): (CORE, "MC²"),
    ("Scheduler", "slot"): (CORE, "MC²"),
    ("Scheduler", "server"): ("HiRes",),
    ("Scheduler", "event_cost_us"): ("HiRes",),
    ("Scheduler", "pending_event_check"): ("HiRes",),
    ("Scheduler", "overcommit"): ("HiRes",),
    ("Task", "criticality"): (CORE, "MC²"),
    ("Task", "cpu"): (CORE, "MC²"),
    ("Task", "reservation"): ("Linux/RK",),
    ("Task", "group"): ("SARA",),
    ("Task", "private_mb"): ("Linux/RK",),
    ("Task", "access"): ("Linux/RK",),
    ("Task", "access_order"): ("Linux/RK",),
    ("Task", "server"): ("HiRes",),
    ("Task", "command"): ("Linux",),
    ("Task", "reports_jobs"): ("Linux",),
    ("Task", "program"): (CORE, "HiRes", "TMEM"),
    ("Action", "lock"): (CORE, "HiRes"),
    ("Action", "unlock"): (CORE, "HiRes"),
    ("Action", "units"): (CORE, "HiRes"),
    ("Action", "call"): ("TMEM",),
    ("Action", "probability"): ("TMEM",),
    ("Action", "compute_share"): ("TMEM",),
    ("Action", "compute_rest"): ("TMEM",),
    ("Action", "call_one_of"): ("TMEM",),
    ("Action", "weights"): ("TMEM",),
    ("Action", "pass_cbuf"): ("TMEM",),
    ("Action", "cbuf"): ("TMEM",),
    ("Action", "access"): ("Linux/RK",),
    ("Action", "access_order"): ("Linux/RK",),
    ("Memory", "layout"): ("MC²",),
    ("Component", "private_mb"): ("TMEM", "Linux/RK"),
    ("Component", "reservation"): ("TMEM", "Linux/RK"),
    ("Region", "policy"): ("Linux/RK",),
}
# Units by the key's suffix, longest first.
UNITS = [
    ("_bytes_per_s", "bytes/s"),
    ("_mb_per_s", "MB/s"),
    ("_mib_per_s", "MiB/s"),
    ("_per_s", "1/s"),
    ("_ms", "ms"),
    ("_us", "µs"),
    ("_ns", "ns"),
    ("_mb", "MiB"),
    ("_mib", "MiB"),
    ("_kib", "KiB"),
    ("_bytes", "bytes"),
    ("_percent", "%"),
    ("_pct", "%"),
    ("_pages", "pages"),
    ("_units", "units"),
]
DEFAULT_RE = re.compile(r"(?:^|[;(.] ?)[Dd]efault:? ([^;.()]+(?:\([^)]*\))?[^;.]*)")


def _unit(key: str) -> str:
    for suffix, unit in UNITS:
        if key.endswith(suffix):
            return unit
    return ""


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    return "def-" + name.lower()


def _type(prop: dict[str, Any]) -> str:
    """A short type for the table: `integer`, `"a" \\| "b"`, `array of [Task](#def-task)`."""
    if "$ref" in prop:
        name = _ref_name(prop["$ref"])
        return f"table [{name}](#{_anchor(name)})"
    if "enum" in prop:
        return " \\| ".join(f'`"{v}"`' for v in prop["enum"] if v is not None)
    if "anyOf" in prop:
        parts = [_type(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(parts)
    kinds = prop.get("type", "any")
    kinds = [k for k in ([kinds] if isinstance(kinds, str) else kinds) if k != "null"]
    out = []
    for kind in kinds:
        if kind == "array":
            items = prop.get("items", {})
            out.append("array of " + _type(items) if items else "array")
        else:
            out.append(kind)
    return " or ".join(out) or "any"


def _default(prop: dict[str, Any]) -> str:
    if prop.get("default") is not None:
        return f"`{_toml(prop['default'])}`"
    m = DEFAULT_RE.search(prop.get("description", ""))
    return m.group(1).strip() if m else ""


def _toml(value: Any) -> str:
    """A value as an inline TOML literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return str(value)


def _collect_examples(schema: dict[str, Any]) -> dict[tuple[str, str], tuple[str, str]]:
    """(definition, key) -> (the value in TOML, the example file) over examples/*.toml, the first
    file in name order that sets the key."""
    defs = schema["$defs"]
    found: dict[tuple[str, str], tuple[str, str]] = {}

    def resolve(prop: dict[str, Any]) -> str | None:
        if "$ref" in prop:
            return _ref_name(prop["$ref"])
        for alt in prop.get("anyOf", []):
            if "$ref" in alt:
                return _ref_name(alt["$ref"])
        items = prop.get("items")
        if isinstance(items, dict) and "$ref" in items:
            return _ref_name(items["$ref"])
        return None

    def walk(defname: str, node: dict[str, Any], source: str) -> None:
        props = (schema if defname == "Scenario" else defs[defname]).get("properties", {})
        for key, value in node.items():
            prop = props.get(key)
            if prop is None:
                continue
            sub = resolve(prop)
            values = value if isinstance(value, list) else [value]
            if sub is not None and values and all(isinstance(v, dict) for v in values):
                for v in values:
                    walk(sub, v, source)
                continue
            text = _toml(value)
            if len(text) > 70:
                text = text[:66] + " ..."
            found.setdefault((defname, key), (text, source))

    for path in sorted(EXAMPLES.glob("*.toml")):
        with path.open("rb") as f:
            walk("Scenario", tomllib.load(f), path.name)
    return found


def _def_order(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """Definitions in the order a reader meets them, each with the TOML path of its first use."""
    order: list[tuple[str, str]] = []
    seen: set[str] = set()

    def visit(defname: str, path: str) -> None:
        if defname in seen:
            return
        seen.add(defname)
        order.append((defname, path))
        node = schema if defname == "Scenario" else schema["$defs"][defname]
        for key, prop in node.get("properties", {}).items():
            refs = [prop.get("$ref"), (prop.get("items") or {}).get("$ref")]
            refs += [alt.get("$ref") for alt in prop.get("anyOf", [])]
            for ref in refs:
                if ref:
                    visit(_ref_name(ref), f"{path}.{key}" if path else key)

    visit("Scenario", "")
    for name in schema["$defs"]:
        visit(name, name)
    return order


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def scenario_reference(schema: dict[str, Any]) -> str:
    examples = _collect_examples(schema)
    out = [
        "# Scenario reference",
        "",
        "Every key a scenario file may hold, generated from the JSON Schema that `critmem schema`",
        "prints (also at `docs/scenario.schema.json`). Times are decimal milliseconds unless the",
        "unit says otherwise; sizes are MiB. *Example* is a value taken from a bundled example",
        "(`critmem examples`), *Mechanisms* the systems the key belongs to ([core](../scenarios/index.md)",
        "is the scheduling engine every scenario uses). Rules across keys (a task needs a period or",
        "a minimum inter-arrival time, names must exist, reservations must fit) are checked when a",
        "file is loaded and described in the [scenario guide](../scenarios/index.md).",
        "",
    ]
    for defname, path in _def_order(schema):
        node = schema if defname == "Scenario" else schema["$defs"][defname]
        title = "Top level" if defname == "Scenario" else f"`{path}`"
        out += [f"## {title} {{ #{_anchor(defname)} }}", ""]
        if node.get("description"):
            out += [node["description"], ""]
        required = set(node.get("required", []))
        out += [
            "| key | type | unit | default | example | mechanisms | description |",
            "|---|---|---|---|---|---|---|",
        ]
        for key, prop in node.get("properties", {}).items():
            mechanisms = BY_KEY.get((defname, key), BY_DEF.get(defname, (CORE,)))
            mech = ", ".join(f"[{m}]({MECHANISM_PAGES[m]})" for m in mechanisms)
            example = examples.get((defname, key))
            ex = f"`{_cell(example[0])}` ({example[1]})" if example else ""
            name = f"`{key}`" + (" (required)" if key in required else "")
            row = [name, _type(prop), _unit(key), _cell(_default(prop)), ex, mech, _cell(prop.get("description", ""))]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


# CLI ---------------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser, prog: str) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(command line, parser, one-line help) for the parser and every subcommand, depth first."""
    out: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                line = f"{prog} {name}"
                out.append((line, sub, helps.get(name, "")))
                out += _subcommands(sub, line)
    return out


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(f"`{o}`" for o in action.option_strings)
            value = formatter._format_args(action, action.dest.upper()) if action.nargs != 0 else ""
        else:
            name = f"`{action.metavar or action.dest}`"
            value = ""
        help_text = formatter._expand_help(action) if action.help else ""
        if action.choices and not isinstance(action.choices, dict):
            value = value or " | ".join(map(str, action.choices))
        rows.append(f"| {name} | {_cell(f'`{value}`' if value else '')} | {_cell(help_text)} |")
    return rows


def cli_reference() -> str:
    import os

    from critmem.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps usage and help to the terminal's width
    parser = build_parser()
    out = [
        "# CLI reference",
        "",
        "Generated from the `critmem` command's own argument parsers; `critmem COMMAND --help`",
        "prints the same. A tour of what the commands are for is in [Getting started](../getting-started.md#a-tour-of-the-commands).",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    for line, sub, help_line in _subcommands(parser, "critmem"):
        out += [f"## `{line}`", ""]
        if sub.description or help_line:
            out += [_cell(sub.description or help_line), ""]
        out += ["```text", sub.format_usage().rstrip(), "```", ""]
        rows = _argument_rows(sub)
        if rows:
            out += ["| argument | value | meaning |", "|---|---|---|", *rows, ""]
        if sub.epilog:
            out += ["```text", sub.epilog.strip(), "```", ""]
    return "\n".join(out)


def benchmarks_page() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    return text.replace("](docs/", "](").replace(
        '(README, "Studies on a cluster")', "([Studies on a cluster](python.md#studies-on-a-cluster))"
    )


def on_files(files: Files, config: MkDocsConfig) -> Files:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    for uri, content in [
        ("reference/scenario.md", scenario_reference(schema)),
        ("reference/cli.md", cli_reference()),
        ("benchmarks.md", benchmarks_page()),
    ]:
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_markdown(markdown: str, page: Any, config: MkDocsConfig, files: Files) -> str:
    """Links to BENCHMARKS.md at the repository root (right when a page is read in the
    repository) point at the site's benchmarks page instead."""
    depth = page.file.src_uri.count("/")
    return markdown.replace("](" + "../" * (depth + 1) + "BENCHMARKS.md", "](" + "../" * depth + "benchmarks.md")
