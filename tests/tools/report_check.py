"""Checks explain report's page against the run directory it was made from.

  report_check.py page RUN PAGE.html   the page's content against the run's own files
  report_check.py png SHOT.png         a headless Chromium screenshot: the curves drawn

The page: one self-contained HTML document (no script, nothing fetched: no src= or href=, no
URL but SVG's namespace), every inline SVG well-formed XML; the loss curve has a point per step
line of the --metrics file; the step timeline has each rank's compute lane; the memory table
is the final JSON's "memory.per_rank" and the bytes table its "comm_per_step"; the settings
table holds every scalar of the final JSON; command.txt is shown.
"""
import html.parser
import json
import os
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

SVG = "{http://www.w3.org/2000/svg}"


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.rows, self.pre = [], [], [], []
        self._row, self._cell, self._in_pre = None, None, False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, k, v) for k, v in attrs)
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "pre":
            self._in_pre = True
            self.pre.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell)
            self._cell = None
        elif tag == "tr":
            self.rows.append(self._row)
            self._row = None
        elif tag == "pre":
            self._in_pre = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_pre:
            self.pre[-1] += data


def summary_line(run):
    last = None
    for name in sorted(os.listdir(run)):
        for line in open(os.path.join(run, name), errors="replace"):
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                if {"model", "strategy", "world_size"} <= set(j):
                    last = j
    return last


def check_page(run, page_path):
    text = open(page_path).read()
    if not text.startswith("<!DOCTYPE html>"):
        fail("not an HTML document")
    page = Page()
    page.feed(text)
    if "script" in page.tags or "link" in page.tags or "img" in page.tags or "iframe" in page.tags:
        fail("the page is not self-contained: %s" % sorted(set(page.tags)))
    for tag, key, value in page.attrs:
        if key in ("src", "href") or (value and "://" in value and value != "http://www.w3.org/2000/svg"):
            fail("an external reference: <%s %s=%s>" % (tag, key, value))
    svgs = [ET.fromstring(s) for s in re.findall(r"<svg .*?</svg>", text, re.S)]
    if len(svgs) != 4:
        fail("expected 4 pictures (curves, timeline, memory, bytes), got %d" % len(svgs))
    # The loss curve: a point per step line of the metrics file.
    metrics = [f for f in os.listdir(run) if f.endswith(".jsonl")]
    steps = [json.loads(l) for l in open(os.path.join(run, metrics[0])) if '"kind": "step"' in l]
    lines = [p for p in svgs[0].iter(SVG + "polyline")]
    if not lines or len(lines[0].get("points").split()) != len(steps):
        fail("the loss curve has %s points for %d step lines" % (
            lines and len(lines[0].get("points").split()), len(steps)))
    epochs = [json.loads(l) for l in open(os.path.join(run, metrics[0])) if '"kind": "epoch"' in l]
    if len(lines) < 2 or len(lines[1].get("points").split()) != len(epochs):
        fail("the accuracy curve has no point per epoch line (%d)" % len(epochs))
    lanes = ["".join(t.itertext()) for t in svgs[1].iter(SVG + "text")]
    for r in (0, 1):
        if "rank %d compute" % r not in lanes:
            fail("the timeline has no lane 'rank %d compute': %s" % (r, lanes[:8]))
    s = summary_line(run)
    rows = {tuple(r) for r in page.rows if r}
    mem = s["memory"]
    for r in mem["per_rank"]:
        want = (str(r["rank"]),) + tuple("%.3f MB" % (r[k] / 1e6) for k in ("params", "grads", "optimizer", "model_state")) + (
            "%.3f MB" % (mem["model_state_predicted"] / 1e6), "%.3f MB" % (r["peak"] / 1e6))
        if want not in rows:
            fail("no memory row %s" % (want,))
    for c in s["comm_per_step"]:
        want = (c["collective"], "%.3g" % c["calls"], "%.0f" % c["bytes"])
        if want not in rows:
            fail("no bytes row %s" % (want,))
    for k, v in s.items():
        if isinstance(v, (dict, list)) or v is None:
            continue
        shown = v if isinstance(v, str) else json.dumps(v)
        if (k, shown) not in rows:
            fail("the settings table lacks %s = %s" % (k, shown))
    command = open(os.path.join(run, "command.txt")).read()
    if command not in page.pre:
        fail("command.txt is not shown")
    print("page ok: %d pictures, %d step points, %d ranks, %d collectives" % (
        len(svgs), len(steps), len(mem["per_rank"]), len(s["comm_per_step"])))


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    at, idat, width = 8, b"", 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                fail("unexpected PNG format: depth %d colour %d" % (depth, colour))
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def check_png(path):
    width, height, bpp, rows = png_pixels(path)
    # The curves' colour (#4e79a7) in the page's top 600 pixels: the loss curve is drawn.
    curve = sum(1 for y in range(min(600, height)) for x in range(width)
                if tuple(rows[y][x * bpp:x * bpp + 3]) == (0x4e, 0x79, 0xa7))
    white = sum(1 for y in range(0, height, 4) for x in range(0, width, 4)
                if tuple(rows[y][x * bpp:x * bpp + 3]) == (255, 255, 255))
    if curve < 300:
        fail("only %d pixels of the curves' colour in the top of the screenshot" % curve)
    if white > 0.99 * (height // 4) * (width // 4):
        fail("the screenshot is blank")
    print("screenshot ok: %dx%d, %d curve pixels" % (width, height, curve))


if __name__ == "__main__":
    if sys.argv[1] == "page":
        check_page(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "png":
        check_png(sys.argv[2])
    else:
        fail("usage: report_check.py page RUN PAGE | png SHOT")
