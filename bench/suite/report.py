"""Summaries, markdown tables, CSV files and plots of the suite's rows, and the rewriting of the
marked sections of docs/benchmarks.md. Rows are hvdsparse-perf's CSV rows plus "scenario" (e.g.
"loopback" or "4x1gbit"), "rep", and for cluster rows "hosts", "rate_bps" (nominal) and
"measured_bps" (one TCP stream between two hosts)."""
import csv
import os
import statistics
import sys

from common import FIELDS, human
from peers import LABELS, RATIO_VARIANTS, VARIANTS


def bound_s(hosts, nbytes, bps):
    """Ring allreduce's link bound: every host sends and receives 2(P-1)/P x bytes."""
    return 2.0 * (hosts - 1) / hosts * nbytes * 8 / bps if hosts > 1 and bps else 0.0


def summarize(raw):
    """{(scenario, np, bytes): {impl: dict(med, lo, hi, n, busbw)}}, times in us."""
    cells = {}
    for r in raw:
        cells.setdefault((r["scenario"], r["np"], r["bytes"]), {}).setdefault(
            r["impl"], []).append(r)
    out = {}
    for key, per in cells.items():
        out[key] = {}
        for impl, rows in per.items():
            t = [x["time_us"] for x in rows]
            out[key][impl] = dict(med=statistics.median(t), lo=min(t), hi=max(t), n=len(t),
                                  busbw=statistics.median(x["busbw_gbs"] for x in rows),
                                  busbw_lo=min(x["busbw_gbs"] for x in rows),
                                  busbw_hi=max(x["busbw_gbs"] for x in rows))
    return out


def _impls(summary, keys, order):
    present = {i for k in keys for i in summary[k]}
    return [i for i in order if i in present]


def _ms(us):
    return f"{us / 1e3:.3g}" if us < 1e5 else f"{us / 1e3:.0f}"


def _cell(c, reps):
    """median (min-max), and the number of runs when some failed."""
    few = f" [{c['n']} runs]" if c["n"] < reps else ""
    return f"{_ms(c['med'])} ({_ms(c['lo'])}-{_ms(c['hi'])}){few}"


def _ratio(cell, a, b):
    if a in cell and b in cell and cell[b]["med"] > 0:
        return f"{cell[a]['med'] / cell[b]['med']:.2f}"
    return "-"


def _table(head, rows):
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] +
                     ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def loopback_tables(summary, order, reps):
    keys = sorted(k for k in summary if k[0] == "loopback")
    impls = _impls(summary, keys, order)
    peers = [i for i in impls if i != "hvdsparse" and i not in VARIANTS]
    times = _table(["np", "size"] + [LABELS[i] for i in impls],
                   [[str(k[1]), human(k[2])] +
                    [_cell(summary[k][i], reps) if i in summary[k] else "-" for i in impls]
                    for k in keys])
    mine = ["hvdsparse"] + [v for v in RATIO_VARIANTS if v in impls]
    pairs = [(m, p) for m in mine for p in peers]
    ratios = _table(["np", "size"] + [f"{LABELS[m]} / {LABELS[p]}" for m, p in pairs],
                    [[str(k[1]), human(k[2])] + [_ratio(summary[k], m, p) for m, p in pairs]
                     for k in keys])
    return times, ratios


def cluster_tables(summary, order, links, reps):
    """links: {scenario: dict(hosts, rate_bps, measured_bps, rate)}."""
    keys = sorted((k for k in summary if k[0] in links),
                  key=lambda k: (links[k[0]]["hosts"], links[k[0]]["rate_bps"], k[2]))
    impls = _impls(summary, keys, order)
    peers = [i for i in impls if i != "hvdsparse" and i not in VARIANTS]
    brow, trow, rrow = [], [], []
    for k in keys:
        ln = links[k[0]]
        bn = bound_s(ln["hosts"], k[2], ln["rate_bps"]) * 1e6
        bm = bound_s(ln["hosts"], k[2], ln["measured_bps"]) * 1e6
        head = [f"{ln['hosts']} x {ln['rate']}", human(k[2])]
        cells = []
        for i in impls:
            c = summary[k].get(i)
            cells.append(f"{c['med'] / bn:.2f} / {c['med'] / bm:.2f}" if c and bn else "-")
        brow.append(head + [f"{_ms(bn)} / {_ms(bm)}"] + cells)
        trow.append(head + [_cell(summary[k][i], reps) if i in summary[k] else "-"
                            for i in impls])
        rrow.append(head + [_ratio(summary[k], "hvdsparse", p) for p in peers])
    bounds = _table(["hosts x rate", "size", "bound ms (nominal / measured rate)"] +
                    [LABELS[i] for i in impls], brow)
    times = _table(["hosts x rate", "size"] + [LABELS[i] for i in impls], trow)
    ratios = _table(["hosts x rate", "size"] + [f"hvdsparse / {LABELS[p]}" for p in peers], rrow)
    return bounds, times, ratios


def write_raw(path, raw, extra):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["scenario", "rep"] + extra + FIELDS,
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(raw)


def write_summary(path, summary, scenarios, links=None):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        head = ["scenario", "np", "bytes", "impl", "runs", "time_median_us", "time_min_us",
                "time_max_us", "busbw_median_gbs"]
        if links:
            head += ["bound_nominal_us", "bound_measured_us", "time_over_bound_nominal",
                     "time_over_bound_measured"]
        w.writerow(head)
        for k in sorted(k for k in summary if k[0] in scenarios):
            for impl, c in sorted(summary[k].items()):
                row = [k[0], k[1], k[2], impl, c["n"], f"{c['med']:.1f}", f"{c['lo']:.1f}",
                       f"{c['hi']:.1f}", f"{c['busbw']:.4f}"]
                if links:
                    ln = links[k[0]]
                    bn = bound_s(ln["hosts"], k[2], ln["rate_bps"]) * 1e6
                    bm = bound_s(ln["hosts"], k[2], ln["measured_bps"]) * 1e6
                    row += [f"{bn:.1f}", f"{bm:.1f}", f"{c['med'] / bn:.4f}",
                            f"{c['med'] / bm:.4f}"]
                w.writerow(row)


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("matplotlib missing (python3 -m pip install matplotlib): no plots", file=sys.stderr)
        return None


def _size_axis(ax, sizes):
    xs = sorted({x / (1 << 20) for x in sizes})
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:g}" for x in xs])
    ax.set_xlabel("allreduce size (MiB, float32)")


def _legend_below(ax):
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)


def plot_loopback(path, summary, order, reps):
    plt = _pyplot()
    keys = [k for k in summary if k[0] == "loopback"]
    if plt is None or not keys:
        return False
    nps = sorted({k[1] for k in keys})
    fig, axes = plt.subplots(1, len(nps), figsize=(6 * len(nps), 6), squeeze=False)
    for ax, np in zip(axes[0], nps):
        sizes = sorted(k[2] for k in keys if k[1] == np)
        for impl in _impls(summary, keys, order):
            pts = [(s, summary[("loopback", np, s)][impl]) for s in sizes
                   if impl in summary[("loopback", np, s)]]
            if pts:
                med = [c["busbw"] for _, c in pts]
                err = [[c["busbw"] - c["busbw_lo"] for _, c in pts],
                       [c["busbw_hi"] - c["busbw"] for _, c in pts]]
                ax.errorbar([s / (1 << 20) for s, _ in pts], med, yerr=err, marker="o",
                            capsize=3, label=LABELS[impl])
        _size_axis(ax, sizes)
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(f"one host, loopback TCP, np {np}\nmedian of {reps} runs, bars min-max")
        ax.grid(True, which="both", alpha=0.3)
        _legend_below(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def plot_cluster(path, summary, order, links, reps):
    """Per scenario: time / link bound (nominal rate) per size; 1.0 is the bound, the dashed line
    the bound at the measured rate, the dotted line 1.15x."""
    plt = _pyplot()
    scen = sorted(links, key=lambda s: (links[s]["hosts"], links[s]["rate_bps"]))
    if plt is None or not scen:
        return False
    fig, axes = plt.subplots(1, len(scen), figsize=(5.5 * len(scen), 6), squeeze=False)
    for ax, s in zip(axes[0], scen):
        ln = links[s]
        keys = sorted(k for k in summary if k[0] == s)
        for impl in _impls(summary, keys, order):
            pts = [(k[2], summary[k][impl]) for k in keys if impl in summary[k]]
            b = [bound_s(ln["hosts"], x, ln["rate_bps"]) * 1e6 for x, _ in pts]
            med = [c["med"] / bb for (_, c), bb in zip(pts, b)]
            err = [[m - c["lo"] / bb for m, (_, c), bb in zip(med, pts, b)],
                   [c["hi"] / bb - m for m, (_, c), bb in zip(med, pts, b)]]
            ax.errorbar([x / (1 << 20) for x, _ in pts], med, yerr=err, marker="o", capsize=3,
                        label=LABELS[impl])
        ax.axhline(1.0, color="black", lw=1, label="link bound, nominal rate")
        ax.axhline(ln["rate_bps"] / ln["measured_bps"], color="black", lw=1, ls="--",
                   label=f"link bound, measured rate ({ln['measured_bps'] / 1e9:.3g} Gbit/s)")
        ax.axhline(1.15, color="grey", lw=1, ls=":", label="1.15x bound")
        _size_axis(ax, [k[2] for k in keys])
        ax.set_ylim(bottom=0.9)
        ax.set_ylabel("time / (2(P-1)/P x bytes / nominal rate)")
        ax.set_title(f"{ln['hosts']} hosts x 1 rank, {ln['rate']} links\n"
                     f"median of {reps} runs, bars min-max")
        ax.grid(True, which="both", alpha=0.3)
        _legend_below(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def update_doc(doc, start, end, section):
    text = open(doc).read()
    a, b = text.find(start), text.find(end)
    if a < 0 or b < a:
        print(f"{doc}: markers {start} ... {end} not found, not updated", file=sys.stderr)
        return False
    with open(doc, "w") as f:
        f.write(text[:a + len(start)] + "\n" + section + text[b:])
    return True


def acceptance(summary, links, scenario="4x1gbit", nbytes=64 << 20, limit=1.15):
    """One line on issue 5's acceptance: hvdsparse within limit x the nominal link bound at
    scenario and nbytes, and at least as fast as every peer there (medians); "" without data."""
    cell, ln = summary.get((scenario, links.get(scenario, {}).get("hosts"), nbytes)), \
        links.get(scenario)
    if not cell or "hvdsparse" not in cell:
        return ""
    b = bound_s(ln["hosts"], nbytes, ln["rate_bps"]) * 1e6
    me = cell["hvdsparse"]["med"]
    peers = {i: c["med"] for i, c in cell.items() if i != "hvdsparse" and i not in VARIANTS}
    slower = [f"{LABELS[i]} ({me / t:.3f}x)" for i, t in sorted(peers.items()) if me > t]
    verdict = "met" if me / b <= limit and not slower else "not met"
    return (f"Acceptance ({ln['hosts']} x {ln['rate']}, {human(nbytes)}): hvdsparse takes "
            f"{me / b:.3f}x the nominal link bound (limit {limit}x) and "
            + (f"is slower than {', '.join(slower)}" if slower else
               "is at least as fast as every peer that ran") + f": {verdict}.\n")
