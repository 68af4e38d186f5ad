#!/usr/bin/env python3
"""Render gx-accept's HTML report in headless chromium and check the heatmap.

    check_report.py CHROMIUM REPORT.html SHOT.png NODES

- the DOM chromium rendered holds one heatmap <svg id="heatmap"> with
  NODES x NODES cells and the busbw plot's <svg id="busbw"> with its series;
- the screenshot shows heatmap cells in an outlier colour (orange or red) and
  in a normal colour (green), each over at least a few hundred pixels (more
  than the legend's swatches alone).
The PNG is decoded here with zlib (no PIL), 8-bit RGB or RGBA, not interlaced.
"""
import re
import struct
import subprocess
import sys
import tempfile
import zlib

OUTLIER = [(0xfc, 0x8d, 0x59), (0xd7, 0x30, 0x27)]
NORMAL = [(0x1a, 0x98, 0x50), (0x91, 0xcf, 0x60)]


def chromium(binary, args, timeout=120):
    with tempfile.TemporaryDirectory(prefix="gxac-chromium.") as profile:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--user-data-dir=" + profile] + args
        return subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError("PNG depth %d colour type %d interlace %d not handled"
                                 % (depth, ctype, interlace))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def count_colours(rows, bpp, colours, tol=6):
    n = 0
    for row in rows:
        for x in range(0, len(row), bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            for cr, cg, cb in colours:
                if abs(r - cr) <= tol and abs(g - cg) <= tol and abs(b - cb) <= tol:
                    n += 1
                    break
    return n


def main():
    binary, report, shot, nodes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    url = "file://" + report
    dom = chromium(binary, ["--dump-dom", url])
    html = dom.stdout.decode("utf-8", "replace")
    if dom.returncode != 0 or "<svg" not in html:
        print("chromium --dump-dom failed (%d): %s" % (dom.returncode, dom.stderr[-800:]))
        return 1
    heatmaps = re.findall(r'<svg id="heatmap".*?</svg>', html, re.S)
    if len(heatmaps) != 1:
        print("want one heatmap <svg>, the rendered DOM has %d" % len(heatmaps))
        return 1
    cells = len(re.findall(r'<rect class="cell"', heatmaps[0]))
    series = len(re.findall(r'<polyline class="series"', html))
    print("rendered DOM: %d svg elements, %d heatmap cells, %d busbw series"
          % (html.count("<svg"), cells, series))
    if cells != nodes * nodes or series < 1:
        print("want %d heatmap cells and at least one busbw series" % (nodes * nodes))
        return 1
    shot_run = chromium(binary, ["--screenshot=" + shot, "--window-size=1100,2600", url])
    if shot_run.returncode != 0:
        print("chromium --screenshot failed (%d): %s" % (shot_run.returncode,
                                                        shot_run.stderr[-800:]))
        return 1
    width, height, bpp, rows = read_png(shot)
    bad, good = count_colours(rows, bpp, OUTLIER), count_colours(rows, bpp, NORMAL)
    print("screenshot %dx%d: %d outlier-coloured pixels, %d normal-coloured pixels"
          % (width, height, bad, good))
    if bad < 1000 or good < 1000:
        print("the heatmap did not render its outlier and normal cells")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
