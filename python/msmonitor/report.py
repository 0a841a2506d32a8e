"""`python -m msmonitor report DIR [-o report.html]`: one self-contained HTML page (inline SVG,
CSS and a tiny self-check script; no network) from the DB / JSONL files, Chrome trace-event JSON
files of a run. A view over msmonitor.analysis, which reads the run and
judges it (docs/design/analysis.md); this module only draws. Drawn points are capped; partial
data becomes a note in the page, never an exception. Every string from the data is escaped
(html.escape, or JSON with `<`, `>`, `&` escaped)."""
import html
import json
import math
import os
import sys
import time

from .analysis import TIMELINE_CAP, Run, median, merge, slow_rule

MAX_POINTS = 2000        # per step-time series (bucket means beyond that)
MAX_SERIES = 64          # step-time lines drawn (slow ranks first)
TOP_N = 25               # kernels/ops listed
KINDS = ("compute", "communication", "memcpy", "idle")
KIND_COLORS = {"compute": "#4878d0", "communication": "#ee854a", "memcpy": "#6acc64", "idle": "#d0d0d0"}
PALETTE = ("#4878d0", "#6acc64", "#956cb4", "#8c613c", "#dc7ec0", "#797979", "#d5bb67", "#82c6e2",
           "#1f77b4", "#2ca02c", "#9467bd", "#17becf")
SLOW_COLOR = "#d62728"


# -------------------------------------------------------------------- rendering
def esc(x):
    return html.escape(str(x), quote=True)


def _json_for_script(obj):
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _fmt_ns(ns):
    ns = float(ns or 0)
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def _fmt_bytes(b):
    b = float(b or 0)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return ""


def _nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    t = math.floor(lo / step) * step
    out = []
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            out.append(t)
        t += step
    return out


def _downsample(points, cap):
    """Bucket means of consecutive points (x = bucket's first step, y = mean)."""
    if len(points) <= cap:
        return points, False
    size = math.ceil(len(points) / cap)
    out = []
    for i in range(0, len(points), size):
        b = points[i:i + size]
        out.append([b[0][0], sum(p[1] for p in b) / len(b)])
    return out, True


def svg_line_chart(series, width=920, height=320, ylabel="ms"):
    """series: [{label, points [[x, y_ns]], slow, color}]"""
    ml, mr, mt, mb = 64, 16, 12, 36
    xs = [p[0] for s in series for p in s["points"]]
    ys = [p[1] / 1e6 for s in series for p in s["points"]]
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="step time per rank">']
    if not xs:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no steps</text></svg>')
        return "".join(out)
    x0, x1 = min(xs), max(xs)
    y0, y1 = 0.0, max(ys) * 1.05 or 1.0
    if x1 == x0:
        x1 = x0 + 1
    pw, ph = width - ml - mr, height - mt - mb

    def X(x):
        return ml + (x - x0) / (x1 - x0) * pw

    def Y(y):
        return mt + ph - (y - y0) / (y1 - y0) * ph

    for t in _nice_ticks(y0, y1):
        out.append(f'<line class="grid" x1="{ml}" x2="{width - mr}" y1="{Y(t):.1f}" y2="{Y(t):.1f}"/>'
                   f'<text class="tick" x="{ml - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in _nice_ticks(x0, x1, 8):
        out.append(f'<text class="tick" x="{X(t):.1f}" y="{height - mb + 16}" text-anchor="middle">{t:g}</text>')
    out.append(f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>'
               f'<line class="axis" x1="{ml}" x2="{width - mr}" y1="{mt + ph}" y2="{mt + ph}"/>'
               f'<text class="tick" x="{ml + pw / 2}" y="{height - 4}" text-anchor="middle">step</text>'
               f'<text class="tick" x="12" y="{mt + ph / 2}" transform="rotate(-90 12 {mt + ph / 2})" '
               f'text-anchor="middle">{esc(ylabel)}</text>')
    for s in sorted(series, key=lambda s: s["slow"]):
        pts = " ".join(f"{X(p[0]):.1f},{Y(p[1] / 1e6):.1f}" for p in s["points"])
        w = 2.5 if s["slow"] else 1.2
        out.append(f'<polyline fill="none" stroke="{s["color"]}" stroke-width="{w}" points="{pts}">'
                   f'<title>{esc(s["label"])}</title></polyline>')
        if len(s["points"]) == 1:
            p = s["points"][0]
            out.append(f'<circle cx="{X(p[0]):.1f}" cy="{Y(p[1] / 1e6):.1f}" r="3" fill="{s["color"]}"/>')
    out.append("</svg>")
    return "".join(out)


def svg_bars(rows, width=920, bar_h=16, color="#4878d0"):
    """rows: [(label, value, text)] horizontal bars scaled to the largest value."""
    if not rows:
        return ""
    ml, mr = 300, 170
    height = len(rows) * (bar_h + 4) + 8
    vmax = max(r[1] for r in rows) or 1
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for i, (label, v, text) in enumerate(rows):
        y = 4 + i * (bar_h + 4)
        w = max((width - ml - mr) * v / vmax, 1)
        short = label if len(label) <= 44 else label[:42] + "…"
        out.append(f'<text class="lbl" x="{ml - 6}" y="{y + bar_h - 4}" text-anchor="end">{esc(short)}'
                   f'<title>{esc(label)}</title></text>'
                   f'<rect x="{ml}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                   f'<title>{esc(label)}: {esc(text)}</title></rect>'
                   f'<text class="val" x="{ml + w + 6:.1f}" y="{y + bar_h - 4}">{esc(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def svg_shares(shares, width=920, bar_h=20):
    ranks = list(shares)            # drawn in the caller's order
    ml, mr = 90, 16
    height = len(ranks) * (bar_h + 6) + 30
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    pw = width - ml - mr
    for i, r in enumerate(ranks):
        sh = shares[r]
        total = sum(sh[k + "_ns"] for k in KINDS) or 1
        y = 4 + i * (bar_h + 6)
        x = ml
        out.append(f'<text class="lbl" x="{ml - 6}" y="{y + bar_h - 5}" text-anchor="end">rank {esc(r)}</text>')
        for k in KINDS:
            w = pw * sh[k + "_ns"] / total
            if w <= 0:
                continue
            pct = 100.0 * sh[k + "_ns"] / total
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{KIND_COLORS[k]}">'
                       f'<title>rank {esc(r)} {k}: {pct:.1f}% ({esc(_fmt_ns(sh[k + "_ns"]))})</title></rect>')
            label = f"{k} {pct:.0f}%" if w > 130 else f"{pct:.0f}%" if w > 34 else ""
            if label:
                out.append(f'<text class="in" x="{x + 4:.1f}" y="{y + bar_h - 6}">{label}</text>')
            x += w
    ly = height - 12
    for j, k in enumerate(KINDS):
        out.append(f'<rect x="{ml + j * 140}" y="{ly - 10}" width="12" height="12" fill="{KIND_COLORS[k]}"/>'
                   f'<text class="tick" x="{ml + j * 140 + 16}" y="{ly}">{k}</text>')
    out.append("</svg>")
    return "".join(out)


TL_COLORS = {"compute": "#4878d0", "communication": "#ee854a", "memcpy": "#6acc64", "api": "#956cb4",
             "marker": "#bbbbbb"}


def svg_timeline(tl, width=1100, lane_h=18):
    lanes = tl["lanes"]
    ml, mr, mt = 230, 34, 22
    height = mt + len(lanes) * (lane_h + 4) + 8
    lo, hi = tl["window"]
    span = max(hi - lo, 1)
    pw = width - ml - mr
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for t in _nice_ticks(0, span / 1e6, 8):
        x = ml + t * 1e6 / span * pw
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{mt - 4}" y2="{height - 4}"/>'
                   f'<text class="tick" x="{x:.1f}" y="{mt - 8}" text-anchor="middle">{t:g} ms</text>')
    for i, name in enumerate(lanes):
        y = mt + i * (lane_h + 4)
        out.append(f'<text class="lbl" x="{ml - 6}" y="{y + lane_h - 5}" text-anchor="end">{esc(name)}</text>')
    for lane, st, dur, name, cat in tl["events"]:
        a = max(st, lo)
        b = min(st + dur, hi)
        x = ml + (a - lo) / span * pw
        w = max((b - a) / span * pw, 0.5)
        y = mt + lane * (lane_h + 4)
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{lane_h}" fill="{TL_COLORS.get(cat, "#888")}">'
                   f'<title>{esc(name)} · {esc(_fmt_ns(dur))}</title></rect>')
    out.append("</svg>")
    return "".join(out)


CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1160px;
color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 10px;margin:6px 0}
.muted{color:#777} .slow{color:#d62728;font-weight:600}
svg.chart{display:block;background:#fff;border:1px solid #eee;margin:6px 0}
svg .grid{stroke:#eee} svg .axis{stroke:#999} svg .tick{font-size:11px;fill:#555} svg .lbl{font-size:11px;fill:#333}
svg .val{font-size:11px;fill:#333} svg .in{font-size:11px;fill:#fff}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:18px;height:4px;vertical-align:middle;margin-right:4px}
#selfcheck{float:right;font-size:12px;padding:2px 8px;border-radius:4px;background:#eee}
"""

SELF_CHECK = """
(function(){
  var el=document.getElementById('selfcheck'), bad=[];
  try{
    var data=JSON.parse(document.getElementById('report-data').textContent);
    var svgs=document.querySelectorAll('svg');
    for(var i=0;i<svgs.length;i++){
      var r=svgs[i].getBoundingClientRect(); if(!(r.width>0&&r.height>0)) bad.push('svg#'+i);
    }
    if(svgs.length!==data.svg_count) bad.push('svg count '+svgs.length+'!='+data.svg_count);
  }catch(e){bad.push(String(e));}
  var ok=bad.length===0;
  document.documentElement.setAttribute('data-selfcheck', ok?'ok':'fail: '+bad.join(', '));
  if(el){
    el.textContent=ok?'self-check ok':'self-check FAILED: '+bad.join(', ');
    el.style.background=ok?'#dff0d8':'#f2dede';
  }
  if(ok) document.title='[ok] '+document.title;
})();
"""


def _table(headers, rows, numeric=()):
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="n">{esc(c)}</td>' if i in numeric else f"<td>{esc(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


class _Page:
    """What the sections build: HTML parts, the JSON blob of every drawn number, the SVG count
    the self-check expects, and the list of caps applied."""

    def __init__(self, rep):
        self.rep = rep
        self.data = {"version": 1, "notes": rep.notes, "caps": {"max_points": MAX_POINTS, "max_series": MAX_SERIES,
                                                                 "top_n": TOP_N, "timeline_events": TIMELINE_CAP}}
        self.parts = []
        self.svg_count = 0
        self.capped = []


def _section_header(pg):
    """What was collected: kinds, filter, duration, hosts, ranks, sources, files."""
    root = pg.rep.root
    all_kinds = sorted(set().union(*(rk.kinds for rk in pg.rep.ranks.values())) if pg.rep.ranks else [])
    hosts = sorted(set().union(*(rk.hosts for rk in pg.rep.ranks.values())) if pg.rep.ranks else [])
    sess = [rk.session for rk in pg.rep.ranks.values() if rk.session[0] is not None and rk.session[1] is not None]
    windows = [rk.window for rk in pg.rep.ranks.values() if rk.window[0] is not None]
    if sess:
        dur_ns = max(s[1] for s in sess) - min(s[0] for s in sess)
        dur_text = f"{_fmt_ns(dur_ns)} (SESSION_TIME_INFO, earliest start to latest stop)"
    elif windows:
        dur_ns = max(w[1] for w in windows) - min(w[0] for w in windows)
        dur_text = f"{_fmt_ns(dur_ns)} (first to last device record; no SESSION_TIME_INFO)"
    else:
        dur_ns, dur_text = None, "not recorded"
    filt = sorted(pg.rep.meta.get("filter", set()) | pg.rep.meta.get("FILTER", set()))
    pg.data["header"] = {"kinds": all_kinds, "hosts": hosts, "ranks": sorted(pg.rep.ranks), "duration_ns": dur_ns,
                         "files": [f[0] for f in pg.rep.files], "filter": filt or None}
    hdr = [("Directory", root), ("Kinds collected", ", ".join(all_kinds) or "none found"),
           ("Filter", ", ".join(filt) if filt else "not recorded (no session end in the DB/JSONL files: killed, or not stopped)"),
           ("Duration", dur_text), ("Hosts", ", ".join(hosts) or "not recorded (JSONL has no host table)"),
           ("Ranks", ", ".join(str(r) for r in sorted(pg.rep.ranks)) or "none"),
           ("Sources", ", ".join(sorted(set().union(*(rk.sources for rk in pg.rep.ranks.values()))))
            if pg.rep.ranks else "none" + (" (traces only)" if pg.rep.traces else "")),
           ("Files", f"{len(pg.rep.files)} (listed at the end)")]
    if pg.rep.parallel:
        hdr.append(("parallel_group_info", "; ".join(sorted(pg.rep.parallel))[:2000]))
    pg.parts.append(_table(["", ""], hdr))


def _section_steps(pg):
    """Step time per rank: the series (capped), the slow-rank verdict and its table."""
    slow, detail, res = pg.rep.slow_ranks()
    steps = {}
    series = []
    ranked = sorted((r for r, rk in pg.rep.ranks.items() if rk.steps), key=lambda r: (r not in slow, r))
    for i, r in enumerate(ranked):
        rk = pg.rep.ranks[r]
        pts = pg.rep.points(rk)
        drawn, cap = _downsample(pts, MAX_POINTS)
        host = [rk.steps[n][0] for n in rk.steps]
        dev = [rk.steps[n][1] for n in rk.steps if rk.steps[n][1] is not None]
        steps[str(r)] = {"n": len(pts), "points": drawn, "capped": cap, "median_ns": median([p[1] for p in pts]),
                         "host_median_ns": median(host), "device_median_ns": median(dev) if dev else None,
                         "slow": r in slow, "drawn": i < MAX_SERIES}
        if cap:
            pg.capped.append(f"rank {r}: {len(pts)} steps drawn as {len(drawn)} bucket means")
        if i < MAX_SERIES:
            series.append({"label": f"rank {r}" + (" (slow)" if r in slow else ""), "points": drawn,
                           "slow": r in slow, "color": SLOW_COLOR if r in slow else PALETTE[i % len(PALETTE)]})
    if len(ranked) > MAX_SERIES:
        pg.capped.append(f"{len(ranked)} ranks have steps; {MAX_SERIES} lines drawn (slow ranks first)")
    pg.data["steps"] = steps
    pg.data["step_basis"] = pg.rep.basis
    pg.data["slow_ranks"] = slow
    rule = (res or {}).get("rule") or slow_rule()
    pg.data["slow_rule"] = dict(rule, detail={str(r): v for r, v in detail.items()},
                                judged_steps=res["judged_steps"] if res else 0)

    pg.parts.append("<h2>Step time per rank</h2>")
    if series:
        pg.parts.append(svg_line_chart(series))
        pg.svg_count += 1
        leg = "".join(f'<span><i style="background:{s["color"]}"></i>{esc(s["label"])}</span>' for s in series)
        pg.parts.append(f'<div class="legend">{leg}</div>')
        rows = []
        for r in ranked:
            st = steps[str(r)]
            dm = st["device_median_ns"]
            d = detail.get(r)
            verdict = (f"{d['cause']} since step {d['since_step']}, costs the job {d['cost_ms']:.2f} ms/step"
                       if d else "—")
            pods = ", ".join(sorted(pg.rep.ranks[r].pods)) or "—"   # docs/deploy.md#attribution
            rows.append((f"rank {r}" + (" — SLOW" if r in slow else ""), pods, st["n"], _fmt_ns(st["host_median_ns"]),
                         _fmt_ns(dm) if dm is not None else "—", verdict))
        pg.parts.append(_table(["rank", "pod", "steps", "median step (host)", "median step (device)", "slow: cause"],
                               rows, numeric=(2, 3, 4)))
        basis = ("device span of the <code>step N</code> marker (device start to device end of the range)"
                 if pg.rep.basis == "device" else "host duration of the <code>step N</code> marker range "
                 "(not every step has a device part)")
        how = (f'per step judged when ≥ {rule["min_ranks"]} ranks have it, a rank\'s wall time, or its compute, '
               f'host or transfer time, above the ranks\' median by more than {rule["threshold"]:.0%} of the step '
               f'and {rule["mad_k"]:g}·1.4826·MAD, on the newest {rule["min_steps"]}+ consecutive judged steps, at a '
               f'cost to the job.' if rule else "not available (the IPCMonitor_C extension is missing).")
        pg.parts.append(f'<p class="muted">Step time drawn = {basis}. '
                        f'Slow rule: the one of <code>dyno steps</code> (docs/cluster.md §4): {how}'
                        + (f' <span class="slow">Slow: {esc(", ".join("rank " + str(r) for r in slow))}.</span>'
                           if slow else " No slow rank.") + "</p>")
    else:
        pg.parts.append('<p class="note">No <code>step N</code> marker ranges found (collect the Marker kind and call '
                        'step() each iteration to get per-step times).</p>')


def _section_kernels(pg):
    """Top kernels by total device time over all ranks."""
    kern = merge(pg.rep.ranks.values(), "kernels")
    top = sorted(kern.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_N]
    pg.data["kernels"] = [{"name": n, "count": v[0], "total_ns": v[1], "avg_ns": v[1] / v[0] if v[0] else 0,
                           "min_ns": v[2], "max_ns": v[3]} for n, v in top]
    pg.data["kernels_distinct"] = len(kern)
    pg.parts.append("<h2>Top kernels by total device time (all ranks)</h2>")
    if top:
        pg.parts.append(svg_bars([(n, v[1], f"{_fmt_ns(v[1])} · {v[0]}×") for n, v in top]))
        pg.svg_count += 1
        pg.parts.append(_table(["kernel", "count", "total", "avg", "min", "max"],
                               [(n, v[0], _fmt_ns(v[1]), _fmt_ns(v[1] / v[0]), _fmt_ns(v[2]), _fmt_ns(v[3]))
                             for n, v in top], numeric=(1, 2, 3, 4, 5)))
        if len(kern) > TOP_N:
            pg.capped.append(f"kernels: top {TOP_N} of {len(kern)} distinct names shown")
    else:
        pg.parts.append('<p class="note">No kernel records (Kernel kind not collected, or filtered out).</p>')


def _section_comm(pg):
    """Communication ops with sizes, Hccl, memory copies, host APIs."""
    comm, hccl, copies = (merge(pg.rep.ranks.values(), a) for a in ("comm", "hccl", "copies"))
    crow = sorted(comm.items(), key=lambda kv: (-kv[1][1], kv[0]))
    pg.data["comm"] = [{"name": k[0], "group": k[1], "dataType": k[2], "count": v[0], "total_ns": v[1],
                        "elements": v[2], "bytes": v[3]} for k, v in crow]
    pg.data["hccl"] = [{"name": k[0], "comm": k[1], "count": v[0], "total_ns": v[1],
                        "avg_bandwidth": v[2] / v[0] if v[0] else 0} for k, v in sorted(hccl.items())]
    pg.data["copies"] = [{"name": k, "count": v[0], "total_ns": v[1], "bytes": v[2]} for k, v in sorted(copies.items())]
    pg.parts.append("<h2>Communication and memory copies</h2>")
    if crow:
        bars = [(f"{k[0]} [{k[1]}]", v[1], f"{_fmt_ns(v[1])} · {_fmt_bytes(v[3])}") for k, v in crow[:TOP_N]]
        pg.parts.append(svg_bars(bars, color=KIND_COLORS["communication"]))
        pg.svg_count += 1
        pg.parts.append(_table(["op", "group", "dataType", "count", "total", "avg", "elements", "bytes", "avg size"],
                               [(k[0], k[1], k[2], v[0], _fmt_ns(v[1]), _fmt_ns(v[1] / v[0]), v[2], v[3],
                              _fmt_bytes(v[3] / v[0])) for k, v in crow], numeric=(3, 4, 5, 6, 7, 8)))
    else:
        pg.parts.append('<p class="note">No Communication records.</p>')
    if hccl:
        pg.parts.append(_table(["Hccl op", "comm", "count", "total", "avg bandwidth"],
                               [(d["name"], d["comm"], d["count"], _fmt_ns(d["total_ns"]), f'{d["avg_bandwidth"]:.3f}')
                             for d in pg.data["hccl"]], numeric=(2, 3, 4)))
    if copies:
        pg.parts.append(_table(["copy", "count", "total", "bytes"],
                               [(d["name"], d["count"], _fmt_ns(d["total_ns"]), _fmt_bytes(d["bytes"]))
                                for d in pg.data["copies"]],
                               numeric=(1, 2, 3)))
    api = merge(pg.rep.ranks.values(), "api")
    if api:
        arow = sorted(api.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_N]
        pg.data["api"] = [{"name": k[0], "type": k[1], "count": v[0], "total_ns": v[1]} for k, v in arow]
        pg.parts.append("<h3>Top host APIs</h3>")
        pg.parts.append(_table(["API", "kind", "count", "total", "avg"],
                               [(k[0], k[1], v[0], _fmt_ns(v[1]), _fmt_ns(v[1] / v[0])) for k, v in arow],
                               numeric=(2, 3, 4)))


def _section_shares(pg):
    """Device time by kind (compute, communication, memcpy, idle) per rank."""
    shares = {}
    for r, rk in sorted(pg.rep.ranks.items()):
        if rk.window[0] is None:
            continue
        win = rk.window[1] - rk.window[0]
        busy = sum(rk.busy.values())
        shares[str(r)] = {"compute_ns": rk.busy["compute"], "communication_ns": rk.busy["communication"],
                          "memcpy_ns": rk.busy["memcpy"], "idle_ns": max(win - busy, 0), "window_ns": win}
    pg.data["shares"] = shares
    pg.parts.append("<h2>Device time by kind per rank</h2>")
    if shares:
        slow = set(pg.data.get("slow_ranks", []))
        drawn = sorted(shares, key=lambda r: (int(r) not in slow, int(r)))[:MAX_SERIES]
        if len(shares) > MAX_SERIES:
            pg.capped.append(f"device time by kind: {MAX_SERIES} of {len(shares)} ranks drawn (slow ranks first)")
        pg.parts.append(svg_shares({r: shares[r] for r in drawn}))
        pg.svg_count += 1
        pg.parts.append('<p class="muted">Window = first to last device record of the rank. Kind times are sums of '
                        'record durations over all streams; idle = window − their sum (0 when streams overlap by '
                        'more than the idle time).</p>')
    else:
        pg.parts.append('<p class="note">No device records (Kernel, Communication, MemCpy, MemSet) to split.</p>')


def _section_timeline(pg):
    """The timeline of one step of one rank (trace file, else DB/JSONL rows)."""
    rank, step = pg.rep.pick_rank_step()
    tl = pg.rep.timeline(rank, step)
    pg.parts.append("<h2>Timeline of one step</h2>")
    if tl and tl["events"]:
        if "step" in tl:
            step = tl["step"]
        pg.data["timeline"] = {"rank": rank, "step": step, "source": tl["source"], "window": tl["window"],
                               "lanes": tl["lanes"], "events": tl["events"], "capped": tl["capped"]}
        span = _fmt_ns(tl["window"][1] - tl["window"][0])
        pg.parts.append(f'<p>Rank {esc("unknown" if rank is None else rank)}, step {esc(step)} ({esc(span)}), '
                        f'from {esc(tl["source"])}; {len(tl["events"])} events. Use <code>--rank R --step N</code> '
                        f'to choose another (default: the median-length step of rank 0, or of the first rank).</p>')
        pg.parts.append(svg_timeline(tl))
        pg.svg_count += 1
        leg = "".join(f'<span><i style="background:{c}"></i>{k}</span>' for k, c in TL_COLORS.items())
        pg.parts.append(f'<div class="legend">{leg}</div>')
        zoom = _device_zoom(tl)
        if zoom:
            pg.data["timeline"]["zoom_window"] = zoom["window"]
            pg.parts.append(f'<p>Zoomed to the device activity of the step '
                            f'({esc(_fmt_ns(zoom["window"][1] - zoom["window"][0]))}, '
                            f'{len(zoom["events"])} events):</p>')
            pg.parts.append(svg_timeline(zoom))
            pg.svg_count += 1
        if tl["capped"]:
            pg.capped.append(f"timeline: first {TIMELINE_CAP} events of the step drawn")
    else:
        pg.data["timeline"] = None
        why = ("rank %s has no step %s" % (rank, step)) if rank is not None and step is not None else "no steps"
        pg.parts.append(f'<p class="note">No timeline: {esc(why)} (neither a trace file nor DB/JSONL rows for it).</p>')


def _device_zoom(tl):
    """The step's timeline cut to its device activity when that covers under 30 % of the step
    (a step mostly spent waiting on the host), else None."""
    dev = [e for e in tl["events"] if e[4] in ("compute", "communication", "memcpy")]
    if not dev:
        return None
    lo, hi = tl["window"]
    a = max(min(e[1] for e in dev), lo)
    b = min(max(e[1] + e[2] for e in dev), hi)
    if b <= a or (b - a) >= 0.3 * (hi - lo):
        return None
    pad = (b - a) // 50
    a, b = max(a - pad, lo), min(b + pad, hi)
    events = [e for e in tl["events"] if e[1] < b and e[1] + e[2] > a]
    used = sorted({e[0] for e in events})
    remap = {old: i for i, old in enumerate(used)}
    return {"window": [a, b], "lanes": [tl["lanes"][i] for i in used],
            "events": [[remap[e[0]]] + e[1:] for e in events]}


def _section_counters(pg):
    """The session counters, or a note that they were not recorded."""
    counters = {str(r): rk.counters for r, rk in sorted(pg.rep.ranks.items()) if rk.counters}
    pg.data["counters"] = counters
    pg.parts.append("<h2>Session counters</h2>")
    if counters:
        # The stop line's counters as columns (one row per session), anything else as text.
        stats = [(r, src, kv) for r, srcs in counters.items() for src, kv in srcs.items()
                 if "kept" in kv or "consumed" in kv]
        cols = [k for k in STATS_COLUMNS if any(k in kv for _, _, kv in stats)]
        cols += sorted({k for _, _, kv in stats for k in kv} - set(cols))
        if stats:
            pg.parts.append(_table(["rank", "source"] + [c.replace("_", " ") for c in cols],
                                   [(_rank_label(r), src, *(_fmt_counter(c, kv.get(c)) for c in cols))
                                    for r, src, kv in stats], numeric=tuple(range(2, 2 + len(cols)))))
        other = [(_rank_label(r), src, " ".join(f"{k}={v}" for k, v in kv.items()))
                 for r, srcs in counters.items() for src, kv in srcs.items()
                 if "kept" not in kv and "consumed" not in kv]
        if other:
            pg.parts.append(_table(["rank", "source", "counters"], other))
        pg.parts.append('<p class="muted">Records: consumed = read from msPTI; kept / filtered = passed / rejected '
                        'by the filter; before start = ended before the session started; dropped * = lost (queue '
                        'full, buffers declined, write failures); cpu ns = the consumer threads\' CPU time.</p>')
    else:
        pg.parts.append('<p class="note">Session counters (records kept, filtered, dropped, consumer CPU) were not '
                        'recorded: no DB/JSONL file under this directory has a session end (its ranks were killed, '
                        'or the session never stopped).</p>')


def _rank_label(r):
    return "rank unknown" if str(r) == "-1" else f"rank {r}"


STATS_COLUMNS = ("consumed", "kept", "filtered", "before_start", "dropped_queue", "dropped_declined",
                 "dropped_write", "written", "bytes", "cpu_ns")


def _fmt_counter(key, v):
    if v is None:
        return "—"
    if key == "cpu_ns" and str(v).isdigit():
        return _fmt_ns(int(v))
    if key == "bytes" and str(v).isdigit():
        return _fmt_bytes(int(v))
    return v


def _section_files(pg):
    """The files read, each with its note."""
    pg.parts.append("<h2>Files</h2>")
    pg.parts.append(_table(["file", "type", "bytes", "note"], [(f[0], f[1], f[2], f[3]) for f in pg.rep.files],
                           numeric=(2,)) if pg.rep.files else '<p class="note">No files.</p>')


def build(root, want_rank=None, want_step=None):
    """Returns (html_text, data_dict)."""
    t0 = time.monotonic()
    rep = Run(root, want_rank, want_step)
    rep.scan()
    rep.slow_ranks()           # sets the step basis the header and sections use
    pg = _Page(rep)
    for section in (_section_header, _section_steps, _section_kernels, _section_comm, _section_shares,
                    _section_timeline, _section_counters, _section_files):
        section(pg)
    data, capped_notes = pg.data, pg.capped
    data["capped"] = capped_notes
    data["svg_count"] = pg.svg_count
    data["generated_s"] = round(time.monotonic() - t0, 3)
    notes_html = "".join(f'<p class="note">{esc(n)}</p>' for n in rep.notes)
    caps_html = ('<p class="muted">Capped for drawing: ' + esc("; ".join(capped_notes)) + ".</p>") if capped_notes \
        else '<p class="muted">Nothing was capped: every step and event is drawn.</p>'
    title = f"msmonitor report — {os.path.basename(os.path.abspath(root))}"
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f'<span id="selfcheck">self-check pending</span><h1>{esc(title)}</h1>'
            f'<p class="muted">Generated by <code>python -m msmonitor report</code> in {data["generated_s"]} s; '
            f'opens offline (no network).</p>'
            + notes_html + caps_html + "".join(pg.parts)
            + f'<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
            + f"<script>{SELF_CHECK}</script></body></html>\n")
    return page, data


def write(root, out_path, want_rank=None, want_step=None):
    page, data = build(root, want_rank, want_step)
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, out_path)
    return data


def main(args):
    if not os.path.isdir(args.dir):
        print(f"report: {args.dir}: not a directory (give the --log-file directory of the run)", file=sys.stderr)
        return 2
    out = args.output or os.path.join(args.dir, "report.html")
    try:
        data = write(args.dir, out, args.rank, args.step)
    except OSError as e:
        print(f"report: cannot write {out}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"report: {out} ({len(data['header']['ranks'])} rank(s), {len(data['header']['files'])} file(s), "
          f"{data['generated_s']} s)")
    for n in data["notes"]:
        print(f"report: note: {n}")
    return 0
