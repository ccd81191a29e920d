// pem's in-page helper, called by the rod adapter as fn(op, arg, limit).
// ops: "elements" (arg = CSS selector or ""), "labelled", "settle" (arg = quiet ms).
function (op, arg, limit) {
  const esc = (v) => String(v).replace(/\\/g, "\\\\").replace(/"/g, '\\"');
  const unique = (sel, el) => {
    try {
      const m = document.querySelectorAll(sel);
      return m.length === 1 && m[0] === el;
    } catch (e) {
      return false;
    }
  };
  const text = (el) => (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim();
  const visible = (el) => {
    if (!el.getClientRects().length) return false;
    const s = getComputedStyle(el);
    return s.visibility !== "hidden" && s.display !== "none" && s.opacity !== "0";
  };
  const selectorFor = (el) => {
    const tag = el.tagName.toLowerCase();
    if (el.id) {
      const s = "#" + CSS.escape(el.id);
      if (unique(s, el)) return s;
    }
    const name = el.getAttribute("name");
    if (name) {
      const s = tag + '[name="' + esc(name) + '"]';
      if (unique(s, el)) return s;
    }
    for (const a of ["data-testid", "data-test", "data-qa", "aria-label", "placeholder", "title"]) {
      const v = el.getAttribute(a);
      if (v) {
        const s = tag + "[" + a + '="' + esc(v) + '"]';
        if (unique(s, el)) return s;
      }
    }
    if (tag === "a" && el.getAttribute("href")) {
      const s = 'a[href="' + esc(el.getAttribute("href")) + '"]';
      if (unique(s, el)) return s;
    }
    const path = [];
    let cur = el;
    while (cur && cur.nodeType === 1 && cur !== document.documentElement) {
      if (cur !== el && cur.id && unique("#" + CSS.escape(cur.id), cur)) {
        path.unshift("#" + CSS.escape(cur.id));
        const s = path.join(" > ");
        if (unique(s, el)) return s;
        break;
      }
      let part = cur.tagName.toLowerCase();
      const parent = cur.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((c) => c.tagName === cur.tagName);
        if (same.length > 1) part += ":nth-of-type(" + (same.indexOf(cur) + 1) + ")";
      }
      path.unshift(part);
      const s = path.join(" > ");
      if (unique(s, el)) return s;
      cur = parent;
    }
    return path.join(" > ");
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
        Label: labelOf(el), Role: el.getAttribute("role") || "", Visible: vis,
      });
      if (limit > 0 && out.length >= limit) break;
    }
    return out;
  }

  if (op === "labelled") {
    const out = [];
    const seen = new Set();
    const add = (label, value, el) => {
      label = String(label).replace(/\s+/g, " ").trim().replace(/:$/, "").trim();
      value = String(value).replace(/\s+/g, " ").trim();
      if (!label || !value || label.length > 80 || value.length > 300 || label === value) return;
      const k = label + "\u0000" + value;
      if (seen.has(k)) return;
      seen.add(k);
      out.push({ Label: label, Value: value, Selector: selectorFor(el) });
    };
    // dl dt/dd
    for (const dt of document.querySelectorAll("dt")) {
      let dd = dt.nextElementSibling;
      while (dd && dd.tagName === "DD") {
        if (visible(dd)) add(text(dt), text(dd), dd);
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
      if (h && /^H[1-6]$/.test(h.tagName) && v.length <= 300 && visible(pre)) add(text(h), v, pre);
    }
    const leafy = (el, t) => !Array.from(el.children).some((c) => text(c) === t);
    const num = /^([0-9][0-9,.]*\s*[kKmM]?)$/;
    const body = document.body ? document.body.querySelectorAll("*") : [];
    let n = 0;
    for (const el of body) {
      if (++n > 5000) break;
      const tag = el.tagName;
      if (tag === "SCRIPT" || tag === "STYLE" || tag === "NOSCRIPT" || tag === "TEMPLATE") continue;
      // aria-label / title + a value inside or next to it
      const al = el.getAttribute("aria-label") || el.getAttribute("title");
      if (al && tag !== "INPUT" && tag !== "TEXTAREA" && tag !== "SELECT" && visible(el)) {
        const own = text(el);
        if (own && own !== al.trim() && own.length <= 60) add(al, own, el);
        else if (!own && el.nextElementSibling) add(al, text(el.nextElementSibling), el.nextElementSibling);
      }
      const t = text(el);
      if (!t || t.length > 160 || t.indexOf("\n") >= 0 || !leafy(el, t) || !visible(el)) continue;
      // "Label: value"
      let m = t.match(/^([^:]{1,60}?):\s+(.{1,200})$/);
      if (m && !/^https?$/i.test(m[1])) {
        const v = Array.from(el.children).find((c) => text(c) === m[2].trim());
        add(m[1], m[2], v || el);
        continue;
      }
      // counters: "Issues 12", "Stars 1,234", "1,234 stars"
      m = t.match(/^(.*[^\d\s,.])\s+([0-9][0-9,.]*\s*[kKmM]?)$/);
      if (m && t.length <= 60) {
        const v = Array.from(el.children).find((c) => num.test(text(c)));
        add(m[1], m[2], v || el);
        continue;
      }
      m = t.match(/^([0-9][0-9,.]*[kKmM]?)\s+([A-Za-z][A-Za-z ]{0,40})$/);
      if (m) add(m[2], m[1], el);
    }
    return out.slice(0, limit > 0 ? limit : 300);
  }

  if (op === "settle") {
    // Resolve after arg ms without DOM mutations, at most 1.5 s.
    return new Promise((resolve) => {
      let quiet;
      const done = () => { mo.disconnect(); clearTimeout(quiet); clearTimeout(cap); resolve(true); };
      const mo = new MutationObserver(() => { clearTimeout(quiet); quiet = setTimeout(done, arg); });
      const cap = setTimeout(done, 1500);
      quiet = setTimeout(done, arg);
      mo.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    });
  }
  throw new Error("pem: unknown op " + op);
}
