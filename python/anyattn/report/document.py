"""A small document model the report is written in once and rendered twice: as Markdown
(report.md, images linked from plots/) and as one self-contained HTML page (report.html, images
inlined as base64), so the two always say the same.
"""

import base64
import html
import os
import re

CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:90%}th,td{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
img{max-width:100%}code{background:#f3f3f3;padding:0 3px}pre{background:#f6f6f6;padding:8px;overflow-x:auto}"""


class Doc:
    def __init__(self, title):
        self.title = title
        self.blocks = [("h", 1, title)]

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text):
        self.blocks.append(("p", text))

    def bullets(self, items):
        if items:
            self.blocks.append(("ul", list(items)))

    def table(self, head, rows):
        self.blocks.append(("table", list(head), [list(r) for r in rows]))

    def image(self, path, alt):
        """path relative to the report's folder."""
        if path:
            self.blocks.append(("img", path, alt))

    def code(self, text):
        self.blocks.append(("pre", text))

    def markdown(self):
        out = []
        for b in self.blocks:
            out += _md_block(b) + [""]
        return "\n".join(out).rstrip() + "\n"

    def html(self, folder):
        body = "\n".join(_html_block(b, folder) for b in self.blocks)
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
                "</head><body>\n%s\n</body></html>\n" % (html.escape(self.title), CSS, body))


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_block(b):
    kind = b[0]
    if kind == "h":
        return ["#" * b[1] + " " + b[2]]
    if kind == "p":
        return [b[1]]
    if kind == "ul":
        return ["- " + x for x in b[1]]
    if kind == "table":
        rows = ["| " + " | ".join(_cell(x) for x in b[1]) + " |", "|" + " --- |" * len(b[1])]
        return rows + ["| " + " | ".join(_cell(x) for x in r) + " |" for r in b[2]]
    if kind == "img":
        return ["![%s](%s)" % (b[2], b[1])]
    return ["```", b[1], "```"]


def inline(text):
    """Markdown's `code` spans and [text](link) as HTML; everything else escaped."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append("<code>%s</code>" % html.escape(part[1:-1]))
        else:
            esc = html.escape(part)
            out.append(re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', esc))
    return "".join(out)


def _html_block(b, folder):
    kind = b[0]
    if kind == "h":
        return "<h%d>%s</h%d>" % (b[1], inline(b[2]), b[1])
    if kind == "p":
        return "<p>%s</p>" % inline(b[1])
    if kind == "ul":
        return "<ul>%s</ul>" % "".join("<li>%s</li>" % inline(x) for x in b[1])
    if kind == "table":
        head = "".join("<th>%s</th>" % inline(str(x)) for x in b[1])
        rows = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % inline(str(x)) for x in r) for r in b[2])
        return "<table><tr>%s</tr>%s</table>" % (head, rows)
    if kind == "img":
        with open(os.path.join(folder, b[1]), "rb") as f:
            data = base64.b64encode(f.read()).decode()
        return '<p><img alt="%s" src="data:image/png;base64,%s"></p>' % (html.escape(b[2]), data)
    return "<pre>%s</pre>" % html.escape(b[1])
