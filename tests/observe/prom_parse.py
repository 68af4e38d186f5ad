"""A parser for the Prometheus text exposition format (version 0.0.4, the
format node exporter's textfile collector reads), written from its
description, strict where gx must be: lines end with \\n; "# HELP name text"
and "# TYPE name counter|gauge|histogram|summary|untyped" come before a
metric's samples, at most once each; a sample is
  name{label="value",...} value [timestamp]
with name [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*,
label values with \\\\, \\" and \\n escaped, a float value (or NaN, +Inf,
-Inf) and an optional integer timestamp; one metric's samples are
contiguous, and no two samples share a name and label set."""

import re

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


class ParseError(Exception):
    pass


def _value(text, where):
    if text in ("NaN", "+Inf", "-Inf", "Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{where}: value {text!r} is not a number")


def _labels(text, i, where):
    labels = {}
    i += 1  # past {
    while True:
        if text[i] == "}":
            return labels, i + 1
        m = LABEL.match(text, i)
        if not m:
            raise ParseError(f"{where}: bad label name at column {i}")
        name = m.group(0)
        i = m.end()
        if text[i:i + 2] != '="':
            raise ParseError(f"{where}: label {name} without =\"")
        i += 2
        out = []
        while True:
            if i >= len(text):
                raise ParseError(f"{where}: label {name}'s value never ends")
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ParseError(f"{where}: bad escape \\{nxt} in label {name}")
                out.append("\n" if nxt == "n" else nxt)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ParseError(f"{where}: newline inside label {name}")
            else:
                out.append(c)
                i += 1
        if name in labels:
            raise ParseError(f"{where}: label {name} twice")
        labels[name] = "".join(out)
        if text[i] == ",":
            i += 1
        elif text[i] != "}":
            raise ParseError(f"{where}: expected , or }} after label {name}")


def parse(text):
    """Return {metric: {"type": str, "help": str, "samples": [(labels, value)]}}."""
    if text and not text.endswith("\n"):
        raise ParseError("the file does not end with a newline")
    metrics, seen, current = {}, set(), None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {n}"
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.fullmatch(name):
                    raise ParseError(f"{where}: bad metric name {name!r}")
                m = metrics.setdefault(name, {"type": "untyped", "help": None, "samples": []})
                key = parts[1].lower()
                if key == "type":
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ParseError(f"{where}: bad TYPE line")
                    if m["samples"] or m.get("typed"):
                        raise ParseError(f"{where}: TYPE of {name} after its samples or twice")
                    m["type"], m["typed"] = parts[3], True
                else:
                    if m["help"] is not None:
                        raise ParseError(f"{where}: HELP of {name} twice")
                    m["help"] = parts[3] if len(parts) == 4 else ""
            continue
        if not line.strip():
            continue
        m = NAME.match(line)
        if not m:
            raise ParseError(f"{where}: no metric name")
        name, i = m.group(0), m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = _labels(line, i, where)
        rest = line[i:].split()
        if line[i:i + 1] != " " or not 1 <= len(rest) <= 2:
            raise ParseError(f"{where}: expected ' value [timestamp]' after {name}")
        value = _value(rest[0], where)
        if len(rest) == 2 and not re.fullmatch(r"-?[0-9]+", rest[1]):
            raise ParseError(f"{where}: bad timestamp {rest[1]!r}")
        if current != name:
            if name in seen:
                raise ParseError(f"{where}: samples of {name} are not contiguous")
            seen.add(name)
            current = name
        entry = metrics.setdefault(name, {"type": "untyped", "help": None, "samples": []})
        key = tuple(sorted(labels.items()))
        if any(tuple(sorted(lb.items())) == key for lb, _ in entry["samples"]):
            raise ParseError(f"{where}: {name}{labels} twice")
        entry["samples"].append((labels, value))
    for name, m in metrics.items():
        m.pop("typed", None)
        if m["type"] == "counter" and not name.endswith("_total"):
            raise ParseError(f"counter {name} does not end in _total")
    return metrics
