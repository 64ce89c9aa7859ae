"""Typed configuration: frozen keyword-only dataclasses loaded from YAML mappings.

``load_config(cls, mapping, source=...)`` builds ``cls`` from a mapping, rejects unknown keys,
checks types (numbers, bools, strings, lists/tuples of numbers, nested dataclasses) and
non-finite numbers, and reports the offending key path and file in a :class:`ConfigError`.
Range checks belong in the dataclass's ``__post_init__`` and raise ``ConfigError`` naming the key
(so that a config built directly, in a notebook or a test, reports the same error); the loader
re-raises them with the source and the key path attached.

Each field is documented once, in the ``Attributes:`` section of its dataclass's docstring (unit in
brackets); :func:`field_docs` reads it and :func:`commented_yaml` writes a config's values as YAML
under that text (``contactflow config show NODE``, :mod:`contactflow.cli.config`).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import json
import math
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, TypeVar

import yaml

from contactflow.errors import ConfigError

T = TypeVar("T")


#: libyaml's safe loader when PyYAML was built with it: the pure-Python one took seconds to fail on a
#: 10 kB file of nested brackets (RecursionError); libyaml refuses it at once. Same documents, same types.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SAFE_LOADER):
    """The safe loader, refusing a key given twice in one mapping (YAML 1.2 requires unique keys; PyYAML
    keeps the last one silently, so a section appended to a copied file replaced the file's own section)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=deep)
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice in one mapping (first at line {first[key] + 1}): "
                        f"merge the two", key_node.start_mark)
                first[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def near_file_names(path: Path, folders: Iterable[Path] | None = None) -> str:
    """`` (did you mean 'smoke_2s.yaml'?)`` for a missing file when one of ``folders`` (default: its own folder) holds
    a file of the same suffix, a close stem and another name; else ``""`` (also when a folder cannot be listed)."""
    for folder in [path.parent] if folders is None else folders:
        try:  # the names' stems, among the files of the same suffix
            names = {f.stem: f.name for f in folder.iterdir() if f.suffix == path.suffix and f.name != path.name
                     and f.is_file()}
        except OSError:  # not a folder, or not listable
            continue
        close = difflib.get_close_matches(path.stem, names, n=1)
        if close:
            return f" (did you mean {names[close[0]]!r}?)"
    return ""


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file (the safe loader: plain data only).

    Raises:
        ConfigError: the file is missing (a file of a close name in its folder suggested) or unreadable,
            not UTF-8 text, not valid YAML (the line and column), a key given twice in one mapping (both
            lines), or nested too deeply to parse; one line naming the file.
    """
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_UniqueKeyLoader)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found{near_file_names(path)}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError(f"{path}: not valid YAML{where}: {what}") from None
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply to read") from None


def _check_value(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _check_value(a, value, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: unexpected value {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return _build(tp, value, where)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_check_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if origin is tuple and args:
            if len(args) != len(value):
                raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
            return tuple(_check_value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        inner = args[0] if args else Any
        return [_check_value(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        kt, vt = args if args else (Any, Any)
        return {
            _check_value(kt, k, f"{where}"): _check_value(vt, v, f"{where}.{k}") for k, v in value.items()
        }
    if isinstance(tp, type):
        if not isinstance(value, tp):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    return value


def did_you_mean(unknown: Iterable[Any], known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the unknown names close to a known one (:func:`difflib.get_close_matches`),
    else ``""``; several: `` (did you mean 'a' for 'b', 'c' for 'd'?)``."""
    unknown, known = [str(u) for u in unknown], [str(k) for k in known]
    pairs = [(u, m[0]) for u in unknown if (m := difflib.get_close_matches(str(u), known, n=1))]
    if not pairs:
        return ""
    if len(unknown) == 1:
        return f" (did you mean {pairs[0][1]!r}?)"
    return " (did you mean " + ", ".join(f"{k!r} for {u!r}" for u, k in pairs) + "?)"


def load_file_format(cls: type[T], raw: Mapping, source: str, other: type, other_is: str) -> T:
    """:func:`load_config` of a file's top level, whose refusal says that the file is of another format when its
    keys that ``cls`` does not take are all keys of ``other`` (a teleop scenario given as a SEIKO one, and back):
    ``...; the file looks like <other_is>``.

    Raises:
        ConfigError: as :func:`load_config`, with that hint where it applies.
    """
    try:
        return load_config(cls, raw, source=source)
    except ConfigError as exc:
        own = {f.name for f in dataclasses.fields(cls)}
        theirs = {f.name for f in dataclasses.fields(other)} - own
        foreign = {str(k) for k in raw} - own
        if foreign and foreign <= theirs:
            raise ConfigError(f"{exc}; the file looks like {other_is}") from None
        raise


def _build(cls: type[T], mapping: Mapping[str, Any], where: str) -> T:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(mapping) - set(fields), key=str)
    if unknown:
        raise ConfigError(
            f"{where + ': ' if where else ''}unknown key(s) {', '.join(map(repr, unknown))}"
            f"{did_you_mean(unknown, fields)}; expected some of {', '.join(sorted(fields))}"
        )
    kwargs = {}
    for name, f in fields.items():
        key_where = f"{where}.{name}" if where else name
        if name not in mapping:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key_where}: missing required key")
            continue
        kwargs[name] = _check_value(hints[name], mapping[name], key_where)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where + ': ' if where else ''}{exc}") from None


def load_config(cls: type[T], mapping: Mapping[str, Any] | None, source: str = "") -> T:
    """Build the config dataclass ``cls`` from ``mapping``.

    Args:
        cls: a (frozen, keyword-only) dataclass type.
        mapping: the parsed YAML mapping; ``None`` means all defaults.
        source: a label for error messages, usually ``"file.yaml:section"``.

    Raises:
        ConfigError: unknown key, missing required key, wrong type, non-finite number or a
            value rejected by the dataclass's own validation, with ``source`` and the key path.
    """
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"{source}: expected a mapping, got {type(mapping).__name__}")
    try:
        return _build(cls, mapping, "")
    except ConfigError as exc:
        msg = str(exc)
        raise ConfigError(f"{source}: {msg}" if source else msg) from None


def merge(base: Mapping[str, Any] | None, override: Mapping[str, Any] | None) -> dict:
    """Recursive dict merge: ``override`` wins; nested mappings are merged key by key."""
    out = dict(base or {})
    for k, v in (override or {}).items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def read_layered(default: str | Path, path: str | Path | None, what: str) -> tuple[dict, str]:
    """A shipped config file's mapping with ``path``'s keys layered over it (:func:`merge`), and the
    source label for errors: a user's file needs only the keys it changes (a complete copy, such as
    a run's own ``config.yaml``, gives itself).

    Args:
        default: the shipped file. path: the user's file (None, or the shipped file itself: that
            file alone). what: what the mapping holds, for the error (``"TrainConfig keys"``).

    Returns:
        (mapping, source): source is ``"PATH (over DEFAULT_NAME)"`` when layered, else the default.

    Raises:
        ConfigError: a file is unreadable or not a mapping (the file named).
    """
    default = Path(default)

    def mapping(p: Path) -> dict:
        raw = read_yaml(p)
        if raw is not None and not isinstance(raw, Mapping):
            raise ConfigError(f"{p}: expected a mapping of {what}, got {type(raw).__name__}")
        return dict(raw or {})

    raw, source = mapping(default), str(default)
    if path is not None and Path(path).resolve() != default.resolve():
        raw = merge(raw, mapping(Path(path)))
        source = f"{path} (over {default.name})"
    return raw, source


def to_dict(cfg: Any) -> Any:
    """A config dataclass as plain YAML-able data (for manifests)."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, (list, tuple)):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, dict):
        return {k: to_dict(v) for k, v in cfg.items()}
    return cfg


def json_digest(data: Any, default=str) -> str:
    """16 hex digits of the SHA-256 of ``data``'s canonical JSON (sorted keys; values JSON cannot write
    go through ``default``): a short, stable fingerprint of a configuration (dataset manifests, validation
    tables)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=default).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Documented defaults (``contactflow config show``)
# --------------------------------------------------------------------------------------------
_ENTRY = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*:(?:\s+(.*))?$")


def _attribute_docs(doc: str | None, fields: tuple[str, ...] = ()) -> dict[str, str]:
    """``name -> text`` of the ``Attributes:`` section of one Google-style docstring.

    An entry is ``name: text`` (or ``a, b: text`` for fields documented together) at the
    section's indentation; more-indented lines continue it. The section ends at the first
    non-blank line indented less than its entries. An entry's text that goes on with
    ``. other: text`` for another name of ``fields`` is split there.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "Attributes:") + 1
    except StopIteration:
        return {}
    out: dict[str, list[str]] = {}
    names: list[str] = []
    indent = None
    for ln in lines[start:]:
        if not ln.strip():
            continue
        ind = len(ln) - len(ln.lstrip())
        if indent is None:
            indent = ind
        if ind < indent:
            break
        m = _ENTRY.match(ln.strip()) if ind == indent else None
        if m:
            names = [n.strip() for n in m.group(1).split(",")]
            for n in names:
                out[n] = [m.group(2) or ""]
        elif names:
            for n in names:
                out[n].append(ln.strip())
    docs = {k: " ".join(t for t in v if t) for k, v in out.items()}
    if not fields:
        return docs
    # compact entries document several fields in one line: "mass_kg: M. inertia_kgm2: I."
    split = re.compile(r"(?<=\.)\s+(" + "|".join(map(re.escape, sorted(fields))) + r"):\s+")
    for name, text in list(docs.items()):
        parts = split.split(text)
        if len(parts) > 1:
            docs[name] = parts[0]
            for other, rest in zip(parts[1::2], parts[2::2]):
                docs[other] = rest
    return docs


def field_docs(cls: type) -> dict[str, str]:
    """The documentation of each field of the config dataclass ``cls``.

    Read from the ``Attributes:`` sections of the docstrings of ``cls`` and its dataclass bases
    (a subclass's entry wins), so each field is documented once, next to its definition.

    Returns:
        field name -> one-paragraph text; fields without an entry are absent.
    """
    names = tuple(f.name for f in dataclasses.fields(cls))
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_attribute_docs(klass.__dict__.get("__doc__"), names))
    return {k: v for k, v in docs.items() if k in names}


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "").replace("NoneType", "None")


def _scalar_yaml(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, sort_keys=False).strip()
    return text[:-3].rstrip() if text.endswith("\n...") else text


def _wrap_comment(text: str, pad: str, width: int = 100) -> list[str]:
    return [pad + "# " + ln for ln in textwrap.wrap(text, max(40, width - len(pad) - 2))]


def commented_yaml(cfg: Any, indent: int = 0, width: int = 100) -> str:
    """The fields of the config dataclass instance ``cfg`` as YAML, each under its documentation.

    Every field is written (nested dataclasses as nested mappings, tuples as lists), preceded by
    its ``Attributes:`` text (:func:`field_docs`) as ``#`` comments and followed by its type;
    ``yaml.safe_load`` of the text gives :func:`to_dict` of ``cfg`` (tuples as lists), which
    :func:`load_config` turns back into ``cfg``.

    Args:
        cfg: a config dataclass instance (usually the defaults, ``Cls()``).
        indent: spaces before each line (the keys of a node section are indented by 2).
        width: target line width of the comments.
    """
    pad = " " * indent
    hints = typing.get_type_hints(type(cfg))
    docs = field_docs(type(cfg))
    out: list[str] = []
    for f in dataclasses.fields(cfg):
        if not f.init:
            continue
        value = getattr(cfg, f.name)
        out += _wrap_comment(docs.get(f.name, "(undocumented)"), pad, width)
        if dataclasses.is_dataclass(value):
            out.append(f"{pad}{f.name}:  # {type(value).__name__}")
            out.append(commented_yaml(value, indent + 2, width))
        else:
            out.append(f"{pad}{f.name}: {_scalar_yaml(to_dict(value))}  # {_type_name(hints[f.name])}")
    return "\n".join(out)
