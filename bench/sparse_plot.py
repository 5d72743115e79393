"""Plots a sparse sweep (bench/sparse_sweep.py's CSV): time against density, one panel per
support shape, one colour per algorithm; measured medians solid, the cost model's predictions
dashed, the selector's pick circled.

    python3 bench/sparse_plot.py SWEEP.csv --out PLOT.png [--title TEXT]

Each value is the median over the sweep's rounds. Needs matplotlib.
"""
import argparse
import csv
import statistics
import sys

SHOWN = ["dense", "allgather", "ssar_recursive_doubling", "ssar_split_allgather",
         "dsar_split_allgather", "zen"]
LABELS = {"dense": "dense", "allgather": "allgather", "ssar_recursive_doubling": "SSAR rec. doubling",
          "ssar_split_allgather": "SSAR split-allgather", "dsar_split_allgather": "DSAR",
          "zen": "ZEN"}


def medians(rows):
    """{(generator, n, density, algorithm): (measured ms, model ms)} and
    {(generator, n, density): the pick most rounds made}."""
    times, models, picks = {}, {}, {}
    for r in rows:
        n = r["n"] if r.get("row", "1") in ("", "1") else "%s x %s" % (r["n"], r["row"])
        key = (r["generator"], n, float(r["density"]))
        if r["algorithm"] == "auto":
            picks.setdefault(key, []).append(r["pick"])
        elif r["algorithm"] in SHOWN:
            times.setdefault(key + (r["algorithm"],), []).append(float(r["time_ms"]))
            if float(r["model_ms"]) > 0:
                models.setdefault(key + (r["algorithm"],), []).append(float(r["model_ms"]))
    out = {k: (statistics.median(v), statistics.median(models[k]) if k in models else None)
           for k, v in times.items()}
    pick = {k: max(reversed(v), key=v.count) for k, v in picks.items()}
    return out, pick


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data, pick = medians(rows)
    sizes = sorted({k[1] for k in data}, key=lambda n: (len(n), n))
    gens = sorted({k[0] for k in data})
    fig, axes = plt.subplots(len(sizes), len(gens), figsize=(5.2 * len(gens), 4.2 * len(sizes)),
                             squeeze=False)
    colors = dict(zip(SHOWN, plt.get_cmap("tab10").colors))
    for ax, (n, gen) in zip(axes.flat, [(n, g) for n in sizes for g in gens]):
        if not any(k[:2] == (gen, n) for k in data):
            ax.set_visible(False)
            continue
        for algo in SHOWN:
            pts = sorted((k[2], v) for k, v in data.items() if k[:2] == (gen, n) and k[3] == algo)
            if not pts:
                continue
            xs = [d * 100 for d, _ in pts]
            ax.plot(xs, [v[0] for _, v in pts], "-o", ms=3, color=colors[algo],
                    label=LABELS[algo])
            model = [(d * 100, v[1]) for d, v in pts if v[1] is not None]
            if model:
                ax.plot([m[0] for m in model], [m[1] for m in model], "--", lw=1,
                        color=colors[algo])
        for (g, nn, d), algo in pick.items():
            if (g, nn) == (gen, n) and (g, nn, d, algo) in data:
                ax.plot(d * 100, data[(g, nn, d, algo)][0], "o", ms=11, mfc="none", mec="black")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("density (% of N per rank)")
        ax.set_ylabel("ms (slowest rank, median)")
        ax.set_title("%s, N = %s" % (gen, n))
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=7, title="solid: measured, dashed: model; o: pick",
                      title_fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="sparse allreduce: every algorithm and the selector's pick")
    args = p.parse_args()
    rows = []
    for name in args.csv:
        with open(name, newline="") as f:
            rows.extend(csv.DictReader(f))
    if not rows:
        sys.exit("no rows in %s" % ", ".join(args.csv))
    plot(rows, args.out, args.title)
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
