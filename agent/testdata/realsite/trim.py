#!/usr/bin/env python3
"""Rebuild the real-site fixture from Debian's documentation packages.

    apt-get install -y python-flask-doc python-jinja2-doc
    python3 agent/testdata/realsite/trim.py

Pages are copied as Sphinx built them, minus <script> elements and images;
a long changelog keeps its first versions only. Text is unchanged.
"""
import os, re, shutil

HERE = os.path.dirname(os.path.abspath(__file__))
SITES = {
    "flask": ("/usr/share/doc/python-flask-doc", ["index.html", "installation.html", "changes.html",
              "config.html", "server.html"], ["basic.css", "pocoo.css", "flask.css", "pygments.css", "tabs.css"]),
    "jinja": ("/usr/share/doc/python-jinja2-doc", ["index.html", "intro.html", "changes.html", "faq.html"],
              ["basic.css", "pocoo.css", "jinja.css", "pygments.css"]),
}
KEEP_VERSIONS = 8

def trim(html, name):
    html = re.sub(r"<script\b.*?</script>\s*", "", html, flags=re.S)
    html = re.sub(r"<img\b[^>]*>", "", html)
    html = re.sub(r'<link rel="shortcut icon"[^>]*>\s*', "", html)
    if name == "changes.html":
        secs = [m.start() for m in re.finditer(r'<section id="version-', html)]
        if len(secs) > KEEP_VERSIONS:
            # Drop the older version sections, up to the end of the last one.
            last = html.index("</section>", secs[-1]) + len("</section>")
            html = html[: secs[KEEP_VERSIONS]] + html[last:]
        # The sidebar's table of contents lists every version: keep the first ones.
        def toc(m):
            items = re.findall(r"<li><a class=\"reference internal\" href=\"#version-[^\n]*</li>\n", m.group(0))
            return m.group(0).replace("".join(items[KEEP_VERSIONS:]), "")
        html = re.sub(r"<ul>\n<li><a class=\"reference internal\" href=\"#version-.*?</ul>", toc, html, count=1, flags=re.S)
    return html

for site, (root, pages, css) in SITES.items():
    out = os.path.join(HERE, site)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "_static"))
    for p in pages:
        with open(os.path.join(root, "html", p), encoding="utf-8") as f:
            html = trim(f.read(), p)
        with open(os.path.join(out, p), "w", encoding="utf-8") as f:
            f.write(html)
    for c in css:
        shutil.copy(os.path.join(root, "html", "_static", c), os.path.join(out, "_static", c))
    shutil.copy(os.path.join(root, "copyright"), os.path.join(out, "COPYRIGHT"))
