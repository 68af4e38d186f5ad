#!/usr/bin/env python3
"""GX_METRICS_FILE against gx_comm_stats: each rank's gx-<rank>.prom parses
with prom_parse (the textfile format), every metric has HELP and TYPE, and
its samples say what observe_check read from gx_comm_stats at the end
(stats-r<rank>.txt). The parser is first shown broken files it must refuse.

usage: prom_check.py DIR RANKS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prom_parse  # noqa: E402

BROKEN = [
    'gx_x_total{rank="0"} 1',                              # no final newline
    'gx_x_total{rank="0} 1\n',                             # label value never ends
    'gx_x_total{rank="0"} one\n',                          # not a number
    '# TYPE gx_x_total counter\n# TYPE gx_x_total counter\ngx_x_total 1\n',  # TYPE twice
    'gx_x_total 1\ngx_y 2\ngx_x_total{a="b"} 3\n',          # not contiguous
    'gx_x_total{a="b"} 1\ngx_x_total{a="b"} 2\n',           # same sample twice
    'gx_x{a="\\q"} 1\n',                                    # bad escape
    '# TYPE gx_x counter\ngx_x 1\n',                        # counter without _total
]


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    for text in BROKEN:
        try:
            prom_parse.parse(text)
        except prom_parse.ParseError:
            continue
        print(f"the parser accepted a broken file: {text!r}")
        return 1
    for r in range(n):
        path = os.path.join(d, f"gx-{r}.prom")
        with open(path) as f:
            text = f.read()
        try:
            metrics = prom_parse.parse(text)
        except prom_parse.ParseError as e:
            print(f"{path}: {e}")
            return 1
        for name, m in metrics.items():
            if not m["help"] or m["type"] == "untyped":
                print(f"{path}: {name} has no HELP or TYPE")
                return 1
            for labels, _ in m["samples"]:
                if labels.get("rank") != str(r) or "comm" not in labels:
                    print(f"{path}: {name}{labels}: wrong rank or no comm label")
                    return 1
        with open(os.path.join(d, f"stats-r{r}.txt")) as f:
            for line in f:
                name, cls, want = line.split()
                got = [v for lb, v in metrics[name]["samples"]
                       if lb["comm"] == "world" and (cls == "-" or lb.get("peer_class") == cls)]
                if got != [float(want)]:
                    print(f"{path}: {name} peer_class={cls} is {got}, gx_comm_stats said {want}")
                    return 1
        print(f"{path}: {len(metrics)} metrics parse and match gx_comm_stats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
