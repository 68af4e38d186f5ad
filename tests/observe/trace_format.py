"""The trace-event format's rules, as the tests check them (written from the
Trace Event Format document that chrome://tracing and Perfetto read): a JSON
object with a "traceEvents" array; every event an object with a string
"name" and "ph", integer "pid" and "tid"; timed phases with a numeric "ts";
"X" with a numeric "dur" >= 0; "b"/"e" with an "id" and a "cat", every "b"
closed by one "e" of the same cat, id and pid, not before it; "i" with a
scope "s" of g, p or t; "M" naming a process or thread; "args" an object."""

import json
import numbers

PHASES = {"X", "b", "e", "i", "M"}


def check(doc, where="trace"):
    """Return a list of problems (empty when the document is well formed)."""
    bad = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return [f"{where}: not an object with a traceEvents array"]
    open_spans = {}
    for k, e in enumerate(doc["traceEvents"]):
        at = f"{where}: event {k}"
        if not isinstance(e, dict):
            bad.append(f"{at}: not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            bad.append(f"{at}: phase {ph!r} is not one gx writes ({sorted(PHASES)})")
            continue
        if not isinstance(e.get("name"), str) or not e["name"]:
            bad.append(f"{at}: no name")
        for f in ("pid", "tid"):
            if not isinstance(e.get(f), int) or isinstance(e.get(f), bool):
                bad.append(f"{at}: {f} is not an integer")
        if "args" in e and not isinstance(e["args"], dict):
            bad.append(f"{at}: args is not an object")
        if ph == "M":
            if e.get("name") not in ("process_name", "thread_name", "process_sort_index",
                                     "thread_sort_index"):
                bad.append(f"{at}: metadata {e.get('name')!r}")
            continue
        if not isinstance(e.get("ts"), numbers.Real):
            bad.append(f"{at}: ts is not a number")
            continue
        if ph == "X" and (not isinstance(e.get("dur"), numbers.Real) or e["dur"] < 0):
            bad.append(f"{at}: a complete event without a duration >= 0")
        if ph == "i" and e.get("s") not in ("g", "p", "t"):
            bad.append(f"{at}: instant scope {e.get('s')!r}")
        if ph in ("b", "e"):
            if not isinstance(e.get("id"), (str, int)) or not isinstance(e.get("cat"), str):
                bad.append(f"{at}: async event without id or cat")
                continue
            key = (e["pid"], e["cat"], e["id"])
            if ph == "b":
                if key in open_spans:
                    bad.append(f"{at}: async id {e['id']} opened twice")
                open_spans[key] = e
            else:
                b = open_spans.pop(key, None)
                if b is None:
                    bad.append(f"{at}: async end {e['id']} without a begin")
                elif e["ts"] < b["ts"]:
                    bad.append(f"{at}: async span {e['id']} ends before it begins")
    for key in open_spans:
        bad.append(f"{where}: async span {key} never ends")
    return bad


def load(path):
    with open(path) as f:
        return json.load(f)
