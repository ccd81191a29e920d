// pem's in-page helper, called by the rod adapter as fn(op, arg, limit).
// ops: "elements" (arg = CSS selector or ""), "labelled", "blocks", "exists"
// (arg = CSS selector), "settle" (arg = {quiet, cap, fresh}).
function (op, arg, limit) {
  const esc = (v) => String(v).replace(/\\/g, "\\\\").replace(/"/g, '\\"');
  // Whether sel matches el and nothing else, as document.querySelectorAll
  // would say, without scanning the document once per selector tried (that
  // made listing a big page quadratic: Flask's api.html, 1,127 elements,
  // 7,413 scans, 88% of the time). Every selector selectorFor builds can
  // match only a known set of candidates, and only those are tested with
  // Element.matches: for "#id" and 'tag[attr="v"]' the elements with that
  // attribute value (an index built once per attribute: matching requires
  // the exact value, and an id only a case-insensitive one in quirks mode,
  // so the index keys ids lowercased and others by element name and value);
  // for a path "p1 > … > pk" the elements the path's tail "p2 > … > pk"
  // matches whose ancestor at the top matches p1 (paths are memoized, so
  // elements that share a tail share the work).
  const index = new Map();
  const bucket = (attr, key) => {
    let m = index.get(attr);
    if (!m) {
      m = new Map();
      for (const e of document.querySelectorAll("[" + attr + "]")) {
        const v = e.getAttribute(attr);
        const k = attr === "id" ? v.toLowerCase() : e.localName.toLowerCase() + "\u0000" + v;
        const l = m.get(k);
        if (l) l.push(e);
        else m.set(k, [e]);
      }
      index.set(attr, m);
    }
    return m.get(key) || [];
  };
  const onlyAmong = (sel, el, cands) => {
    try {
      let hit = null;
      for (const c of cands) {
        if (!c.matches(sel)) continue;
        if (hit) return false;
        hit = c;
      }
      return hit === el;
    } catch (e) {
      return false;
    }
  };
  const uniqueId = (el) => onlyAmong("#" + CSS.escape(el.id), el, bucket("id", el.id.toLowerCase()));
  const uniqueAttr = (sel, el, tag, attr, v) => onlyAmong(sel, el, bucket(attr, tag + "\u0000" + v));
  // paths: selector → [[element, its ancestor the selector's first part matched], …]
  const paths = new Map();
  const uniquePath = (parts, el) => {
    const sel = parts.join(" > ");
    let m = paths.get(sel);
    if (!m) {
      try {
        if (parts.length === 1) {
          m = Array.from(document.querySelectorAll(sel), (x) => [x, x]);
        } else {
          const top = parts[0];
          m = [];
          for (const [x, a] of paths.get(parts.slice(1).join(" > ")) || []) {
            const up = a.parentElement;
            if (up && up.matches(top)) m.push([x, up]);
          }
        }
      } catch (e) {
        m = [];
      }
      paths.set(sel, m);
    }
    return m.length === 1 && m[0][0] === el;
  };
  const text = (el) => (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim();
  // raw is the element's text before whitespace is collapsed: a newline in it
  // means the element lays out several blocks (a container, not a label/value).
  const raw = (el) => el.innerText || el.textContent || "";
  // visible: what a reader of the page can see. Besides display, visibility
  // and opacity (of the element or, through checkVisibility, of any
  // ancestor), text planted for machines is not: moved off the page
  // ("left: -9999px"), in a zero-size font, or in a transparent colour.
  const visible = (el) => {
    if (!el.getClientRects().length) return false;
    if (el.checkVisibility && !el.checkVisibility({ opacityProperty: true, visibilityProperty: true, checkOpacity: true, checkVisibilityCSS: true })) return false;
    const s = getComputedStyle(el);
    if (s.visibility === "hidden" || s.display === "none" || s.opacity === "0") return false;
    const r = el.getBoundingClientRect();
    if (r.right + scrollX <= 0 || r.bottom + scrollY <= 0) return false;
    if (parseFloat(s.fontSize) < 1) return false;
    return !/^rgba\(.*,\s*0\)$|^transparent$/.test(s.color);
  };
  const selectorFor = (el) => {
    const tag = el.tagName.toLowerCase();
    if (el.id) {
      const s = "#" + CSS.escape(el.id);
      if (uniqueId(el)) return s;
    }
    const name = el.getAttribute("name");
    if (name) {
      const s = tag + '[name="' + esc(name) + '"]';
      if (uniqueAttr(s, el, tag, "name", name)) return s;
    }
    for (const a of ["data-testid", "data-test", "data-qa", "aria-label", "placeholder", "title"]) {
      const v = el.getAttribute(a);
      if (v) {
        const s = tag + "[" + a + '="' + esc(v) + '"]';
        if (uniqueAttr(s, el, tag, a, v)) return s;
      }
    }
    if (tag === "a" && el.getAttribute("href")) {
      const s = 'a[href="' + esc(el.getAttribute("href")) + '"]';
      if (uniqueAttr(s, el, "a", "href", el.getAttribute("href"))) return s;
    }
    const path = [];
    let cur = el;
    while (cur && cur.nodeType === 1 && cur !== document.documentElement) {
      if (cur !== el && cur.id && uniqueId(cur)) {
        path.unshift("#" + CSS.escape(cur.id));
        if (uniquePath(path, el)) return path.join(" > ");
        break;
      }
      let part = cur.tagName.toLowerCase();
      const parent = cur.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((c) => c.tagName === cur.tagName);
        if (same.length > 1) part += ":nth-of-type(" + (same.indexOf(cur) + 1) + ")";
      }
      path.unshift(part);
      if (uniquePath(path, el)) return path.join(" > ");
      cur = parent;
    }
    return path.join(" > ");
  };
  // region says where an element sits, from semantic markup only (tags and
  // ARIA roles, never a site's classes): "main" content, "nav" chrome
  // (navigation, header, footer, sidebars, search), or "" when unmarked.
  const region = (el) => {
    if (el.closest("nav, header, footer, aside, [role=navigation], [role=banner], [role=contentinfo], [role=complementary], [role=search]")) return "nav";
    if (el.closest("main, article, [role=main]")) return "main";
    return "";
  };
  const labelOf = (el) => {
    const a = el.getAttribute("aria-label");
    if (a) return a.trim();
    if (el.labels && el.labels.length) return text(el.labels[0]);
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const l = document.getElementById(by);
      if (l) return text(l);
    }
    return (el.getAttribute("title") || "").trim();
  };

  if (op === "elements") {
    const all = arg === "";
    const sel = all ? 'a[href], button, input:not([type=hidden]), select, textarea, [role=button], [onclick]' : arg;
    const out = [];
    for (const el of document.querySelectorAll(sel)) {
      const vis = visible(el);
      if (all && !vis) continue;
      const tag = el.tagName.toLowerCase();
      let t = text(el);
      if (!t && (tag === "input" || tag === "textarea")) t = (el.value || "").slice(0, 80);
      if (el.type === "password") t = "";
      out.push({
        Selector: selectorFor(el), Tag: tag, Text: t.slice(0, 200),
        Href: el.getAttribute("href") || "", Type: el.getAttribute("type") || "",
        Name: el.getAttribute("name") || "", Placeholder: el.getAttribute("placeholder") || "",
        Label: labelOf(el), Role: el.getAttribute("role") || "", Visible: vis, Region: region(el),
      });
      if (limit > 0 && out.length >= limit) break;
    }
    return out;
  }

  if (op === "labelled") {
    const out = [];
    const seen = new Set();
    const claimed = [];
    // The place of a value: the heading path it sits under (as blocks
    // report it), and the terms of the definitions it is inside: which
    // item's "Default" it is on a page of many ("fs.createReadStream" or
    // "fs.createWriteStream").
    const clean = (s) => s.replace(/\u00b6/g, "").replace(/\s+/g, " ").trim();
    const heads = [];
    const chains = [];
    {
      const stack = [];
      for (const h of document.body ? document.body.querySelectorAll("h1, h2, h3, h4, h5, h6") : []) {
        const lv = Number(h.tagName[1]);
        while (stack.length && stack[stack.length - 1][0] >= lv) stack.pop();
        stack.push([lv, clean(text(h))]);
        heads.push(h);
        chains.push(stack.map((x) => x[1]).join(" \u203a "));
      }
    }
    const underOf = (el) => {
      let lo = 0, hi = heads.length - 1, at = -1;
      while (lo <= hi) {
        const mid = (lo + hi) >> 1;
        if (heads[mid] === el || heads[mid].compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) {
          at = mid;
          lo = mid + 1;
        } else {
          hi = mid - 1;
        }
      }
      const terms = [];
      for (let dd = el.parentElement && el.parentElement.closest("dd"); dd; dd = dd.parentElement && dd.parentElement.closest("dd")) {
        const dt = dd.previousElementSibling;
        if (dt && dt.tagName === "DT") terms.unshift(clean(text(dt)));
      }
      return [at >= 0 ? chains[at] : "", ...terms].filter(Boolean).join(" \u203a ").slice(0, 1000);
    };
    const add = (label, value, el) => {
      label = String(label).replace(/\s+/g, " ").trim().replace(/:$/, "").trim();
      value = String(value).replace(/\s+/g, " ").trim();
      if (!label || !value || label.length > 80 || value.length > 300 || label === value) return;
      const k = label + "\u0000" + value;
      if (seen.has(k)) return;
      seen.add(k);
      out.push({ Label: label, Value: value, Selector: selectorFor(el), Under: underOf(el) });
    };
    // dl dt/dd
    for (const dt of document.querySelectorAll("dt")) {
      let dd = dt.nextElementSibling;
      while (dd && dd.tagName === "DD") {
        if (visible(dd)) add(text(dt), text(dd), dd);
        claimed.push(dd);
        dd = dd.nextElementSibling;
      }
    }
    // table rows: th + td, or header row + body rows
    for (const table of document.querySelectorAll("table")) {
      let headers = [];
      const head = table.querySelector("thead tr") || (table.rows[0] && table.rows[0].querySelector("td") == null ? table.rows[0] : null);
      if (head) headers = Array.from(head.cells).map(text);
      for (const row of table.rows) {
        if (row === head) continue;
        const cells = Array.from(row.cells);
        if (cells.length < 2 || !visible(row)) continue;
        claimed.push(...cells);
        const key = text(cells[0]);
        if (cells.length === 2) {
          add(key, text(cells[1]), cells[1]);
        } else {
          for (let i = 1; i < cells.length; i++) {
            add(headers[i] ? key + " " + headers[i] : key, text(cells[i]), cells[i]);
          }
        }
      }
    }
    // a code block under a heading: "Installation" → "go install …"
    for (const pre of document.querySelectorAll("pre")) {
      let h = pre.previousElementSibling;
      for (let i = 0; h && i < 3 && !/^H[1-6]$/.test(h.tagName); i++) h = h.previousElementSibling;
      const v = text(pre);
      if (h && /^H[1-6]$/.test(h.tagName) && v.length <= 300 && visible(pre)) {
        add(text(h), v, pre);
        claimed.push(pre);
      }
    }
    const leafy = (el, t) => !Array.from(el.children).some((c) => text(c) === t);
    const num = /^([0-9][0-9,.]*\s*[kKmM]?)$/;
    // The rules below read an element's own text, so a container would yield
    // its children's text run together ("3 Open issues matching … Clear
    // search"). Elements are visited deepest first (reverse document order)
    // and an element is skipped when a descendant already yielded a pair or
    // holds a value read above (a dd, a table cell).
    const covered = new Set();
    const cover = (el) => {
      for (let a = el; a && a !== document.body && !covered.has(a); a = a.parentElement) covered.add(a);
    };
    for (const v of claimed) cover(v);
    // "Label: <el>value</el>": the label is the element's leading text and
    // the value its first child element (what follows it, if anything, is
    // set off by a separator). Pairs read inside such a value ("// Getting
    // started: …" inside "First line: <code>…</code>") give way to it.
    const labelChild = (el) => {
      let lead = "";
      let n = el.firstChild;
      for (; n && (n.nodeType === 3 || n.nodeType === 8); n = n.nextSibling) if (n.nodeType === 3) lead += n.textContent;
      if (!n || n.nodeType !== 1) return null;
      const m = lead.replace(/\s+/g, " ").trim().match(/^([^:]{1,60}):$/);
      const vt = text(n);
      if (!m || !vt) return null;
      const t = text(el);
      const after = t.slice(t.indexOf(":") + 1).trim();
      if (!after.startsWith(vt)) return null;
      if (after !== vt && !/^\s*[·•|;,—–(]/.test(after.slice(vt.length))) return null;
      return [m[1], vt, n];
    };
    const found = [];
    const body = document.body ? Array.from(document.body.querySelectorAll("*")).slice(0, 5000) : [];
    for (let i = body.length - 1; i >= 0; i--) {
      const el = body[i];
      const tag = el.tagName;
      if (tag === "SCRIPT" || tag === "STYLE" || tag === "NOSCRIPT" || tag === "TEMPLATE") continue;
      if (covered.has(el)) {
        const lc = labelChild(el);
        if (!lc || claimed.some((c) => el.contains(c)) || !visible(el) || raw(el).trim().indexOf("\n") >= 0) continue;
        const inner = found.filter((f) => el.contains(f[2]));
        if (inner.some((f) => !lc[2].contains(f[2]))) continue; // a container of other pairs
        for (const f of inner) f[1] = [];
        found.push([i, [lc], el]);
        continue;
      }
      const pairs = [];
      // aria-label / title + a value inside or next to it
      const al = el.getAttribute("aria-label") || el.getAttribute("title");
      if (al && tag !== "INPUT" && tag !== "TEXTAREA" && tag !== "SELECT" && visible(el)) {
        const own = text(el);
        if (own && own !== al.trim() && own.length <= 60 && raw(el).trim().indexOf("\n") < 0) pairs.push([al, own, el]);
        else if (!own && el.nextElementSibling) pairs.push([al, text(el.nextElementSibling), el.nextElementSibling]);
      }
      const r = raw(el).trim();
      const t = text(el);
      if (t && t.length <= 160 && r.indexOf("\n") < 0 && leafy(el, t) && visible(el)) {
        // "Label: value"; a child element that starts the value and is
        // followed by a separator is the value ("Open issues: <span>13</span> · Sort: …")
        let m = t.match(/^([^:]{1,60}?):\s+(.{1,200})$/);
        if (m && !/^https?$/i.test(m[1])) {
          let v = Array.from(el.children).find((c) => text(c) === m[2].trim());
          let value = m[2];
          if (!v) {
            const c = Array.from(el.children).find((c) => {
              const ct = text(c);
              return ct && m[2].startsWith(ct) && /^\s*[·•|;,—–(]/.test(m[2].slice(ct.length));
            });
            if (c) { v = c; value = text(c); }
          }
          pairs.push([m[1], value, v || el]);
        } else if ((m = t.match(/^(.*[^\d\s,.])\s+([0-9][0-9,.]*\s*[kKmM]?)$/)) && t.length <= 60) {
          // counters: "Issues 12", "Stars 1,234", "1,234 stars"
          const v = Array.from(el.children).find((c) => num.test(text(c)));
          pairs.push([m[1], m[2], v || el]);
        } else if ((m = t.match(/^([0-9](?:[0-9,.]*[0-9])?[kKmM]?)\s+([A-Za-z][A-Za-z ]{0,40})$/))) {
          // "1,234 stars"; a number that ends in a dot is a section's
          // numbering ("4.3.2. The locale module"), not a count
          pairs.push([m[2], m[1], el]);
        }
      }
      if (pairs.length) {
        cover(el);
        found.push([i, pairs, el]);
      }
    }
    found.sort((a, b) => a[0] - b[0]);
    for (const [, pairs] of found) for (const [l, v, e] of pairs) add(l, v, e);
    return out.slice(0, limit > 0 ? limit : 300);
  }

  if (op === "blocks") {
    // The page's readable blocks in document order: headings, definition
    // terms, paragraphs, code blocks, list items, table cells. Each carries
    // the heading it sits under (the nearest heading before it, or the term
    // of the definition it belongs to) and its region.
    const sel = "h1, h2, h3, h4, h5, h6, dt, p, pre, li, td, th, dd, caption, blockquote";
    const blockish = "p, pre, ul, ol, dl, table, div, blockquote";
    const clean = (s) => s.replace(/\u00b6/g, "").replace(/\s+/g, " ").trim();
    const out = [];
    let level = 0;
    const stack = [];
    const chain = () => stack.map((x) => x[1]).join(" \u203a ");
    // A block that is nothing but links is navigation (a table of
    // contents), not content.
    const linkOnly = (el) => {
      const links = Array.from(el.querySelectorAll("a[href]")).map(text).join(" ").replace(/\s+/g, "");
      return links.length > 0 && links === text(el).replace(/\s+/g, "");
    };
    for (const el of document.body ? document.body.querySelectorAll(sel) : []) {
      const tag = el.tagName.toLowerCase();
      const isHead = /^h[1-6]$/.test(tag);
      if ((tag === "li" || tag === "dd" || tag === "td" || tag === "th" || tag === "blockquote") && el.querySelector(blockish)) continue;
      if (!visible(el)) continue;
      let t = tag === "pre" ? (el.innerText || el.textContent || "").replace(/\u00b6/g, "").trim() : clean(text(el));
      if (!t) continue;
      let under = "";
      if (isHead) {
        const lv = Number(tag[1]);
        while (stack.length && stack[stack.length - 1][0] >= lv) stack.pop();
        under = chain();
        stack.push([lv, t]);
        level = lv;
      } else {
        // The heading path; a definition's term last.
        const dd = el.closest("dd");
        const dt = dd && dd.previousElementSibling && dd.previousElementSibling.tagName === "DT" ? dd.previousElementSibling : null;
        under = chain();
        if (dt && tag !== "dt") under = (under ? under + " \u203a " : "") + clean(text(dt));
      }
      out.push({ Selector: selectorFor(el), Tag: tag, Text: t.slice(0, 1000), Under: under, Level: isHead ? level : 0,
        Region: region(el), Link: !isHead && tag !== "dt" && linkOnly(el) });
      if (limit > 0 && out.length >= limit) break;
    }
    return out;
  }

  if (op === "exists") {
    // One query, no waiting: 0 absent, 1 present but hidden, 2 visible.
    const el = document.querySelector(arg);
    return el ? (visible(el) ? 2 : 1) : 0;
  }

  if (op === "settle") {
    // arg = {quiet, cap, quietCap, fresh}. Resolve once the document has
    // loaded (waiting at most cap ms after the call) and has had no DOM
    // mutation for quiet ms (waiting at most quietCap ms after the load).
    // The hook installed at document start (hookJS in page.go) records the
    // last mutation, so on a new document the quiet time that passed before
    // the call counts; after an action in the same document (fresh) the
    // window starts no earlier than the call, so that changes the action
    // schedules on timers are waited for.
    const quiet = Number(arg.quiet) || 0;
    const cap = arg.cap > 0 ? arg.cap : 2000;
    const quietCap = arg.quietCap > 0 ? arg.quietCap : 1000;
    let loaded = 0;
    const t0 = performance.now();
    let st = window[Symbol.for("pem.settle")];
    let mo = null;
    if (!st) {
      st = { last: t0 };
      mo = new MutationObserver(() => { st.last = performance.now(); });
      mo.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    }
    // The load event's end (0 while it runs): the quiet window counts from
    // no earlier than it, so that what the page's load handlers render on
    // timers is waited for.
    const loadEnd = () => {
      const n = performance.getEntriesByType("navigation")[0];
      return n ? n.loadEventEnd : -1;
    };
    const since = () => Math.max(arg.fresh ? Math.max(st.last, t0) : st.last, loadEnd());
    return new Promise((resolve) => {
      let done = false, timer = 0;
      const tick = () => {
        if (done) return;
        clearTimeout(timer);
        const now = performance.now();
        const complete = document.readyState === "complete" && loadEnd() !== 0;
        if (complete && !loaded) loaded = now;
        let wait = 0, left = cap - (now - t0);
        if (complete) left = Math.min(left, quietCap - (now - loaded));
        if (left <= 0) wait = -1;
        else if (!complete) wait = left + 1; // the load listener wakes it
        else if (now - since() < quiet) wait = quiet - (now - since()) + 1;
        if (wait <= 0) {
          done = true;
          window.removeEventListener("load", onLoad);
          if (mo) mo.disconnect();
          resolve(wait === 0);
          return;
        }
        timer = setTimeout(tick, Math.min(wait, left + 1));
      };
      // Woken right after the load event (its handlers have run) rather
      // than by polling for it.
      const onLoad = () => setTimeout(tick, 0);
      window.addEventListener("load", onLoad);
      tick();
    });
  }
  throw new Error("pem: unknown op " + op);
}
