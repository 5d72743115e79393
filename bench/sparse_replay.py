"""Prices recorded sparse sweeps again with the cost model as built now.

bench/sparse_sweep.py writes every job's rows, each with what the model was given (the agreed
counts, the overlap, the input steps, the range imbalance, the network and the local work
measured at init). This script hands the `auto` rows' inputs to the built library's
hvds__sparse_cost, takes the cheapest algorithm as the pick (as the selector does), and reports
how that pick's measured time compares with the best measured at each point: the sweep's verdict
for a changed model without measuring again.

    python3 bench/sparse_replay.py docs/benchmarks/sparse_sweep_wide_8x10gbit.csv [...]
    python3 bench/sparse_replay.py --detail FILE.csv    (measured / model per algorithm)

Only rows written with the model's inputs (the columns input_steps ... round_s) can be replayed.
"""
import argparse
import csv
import ctypes
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# hvds_sparse_algo_t ids (ops/sparse/cost_model.h) by the names the sweep records.
ALGOS = {"dense": 1, "allgather": 2, "ssar_recursive_doubling": 3, "ssar_split_allgather": 4,
         "dsar_split_allgather": 5, "zen": 6}
SHORT = {"dense": "dense", "allgather": "ag", "ssar_recursive_doubling": "rd",
         "ssar_split_allgather": "sag", "dsar_split_allgather": "dsar", "zen": "zen"}


class Net(ctypes.Structure):  # hvds_sparse_net_t
    _fields_ = [(f, ctypes.c_double) for f in
                ("alpha", "beta", "gamma", "hash", "qenc", "qdec", "round")]


class Problem(ctypes.Structure):  # hvds_sparse_problem_t
    _fields_ = [("ranks", ctypes.c_int), ("dim", ctypes.c_double), ("row", ctypes.c_double),
                ("val_bytes", ctypes.c_double), ("idx_bytes", ctypes.c_double),
                ("nnz", ctypes.c_double), ("overlap", ctypes.c_double),
                ("quant_bits", ctypes.c_int), ("input", ctypes.c_double),
                ("imbalance", ctypes.c_double), ("pack_indices", ctypes.c_int),
                ("dense_input", ctypes.c_int), ("input_dense", ctypes.c_double)]


def load(path):
    """The runtime library at path (BUILD/lib/libhvdsparse.so), its cost model declared."""
    lib = ctypes.CDLL(path)
    lib.hvds__sparse_cost.restype = ctypes.c_double
    lib.hvds__sparse_cost.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.POINTER(Net)]
    return lib


def inputs(r):
    """(problem, net) of a recorded row."""
    x = Problem(int(r["np"]), float(r["n"]), float(r["row"]), float(r["val_bytes"]),
                float(r["idx_bytes"]), float(r["max_nnz"]), float(r["overlap"]),
                int(r["quant_bits"]), float(r["input_steps"]), float(r["imbalance"]),
                int(r["pack_indices"]), int(r.get("dense_input") or 0),
                float(r.get("input_dense") or 0))
    net = Net(*(float(r[k]) for k in
                ("alpha_s", "beta_s", "gamma_s", "hash_s", "qenc_s", "qdec_s", "round_s")))
    return x, net


def price(lib, r):
    """The model's seconds per algorithm name for the row's inputs."""
    x, net = inputs(r)
    return {a: lib.hvds__sparse_cost(i, ctypes.byref(x), ctypes.byref(net))
            for a, i in ALGOS.items()}


def pick_of(costs):
    """The cheapest, ties to the lower id (hvds__sparse_select)."""
    return min(ALGOS, key=lambda a: (costs[a], ALGOS[a]))


def points(rows):
    """Rows grouped by point, in the order the sweep ran them."""
    out = {}
    for r in rows:
        out.setdefault((r["np"], r["n"], r["row"], r["density"], r["generator"]), []).append(r)
    return out


def replay(lib, path, detail):
    rows = list(csv.DictReader(open(path)))
    if rows and "round_s" not in rows[0]:
        raise SystemExit("%s: recorded without the model's inputs; run the sweep again" % path)
    over, worst, best_picks, n, ratios = 0, 0.0, 0, 0, []
    print("== %s" % path)
    for key, rs in points(rows).items():
        times = {}
        for r in rs:
            if r["algorithm"] in ALGOS:
                times.setdefault(r["algorithm"], []).append(float(r["time_ms"]))
        measured = {a: statistics.median(t) for a, t in times.items()}
        autos = [r for r in rs if r["algorithm"] == "auto"]
        picks = [pick_of(price(lib, r)) for r in autos]
        pick = max(reversed(picks), key=picks.count)  # most rounds', ties the last round's
        best = min(measured, key=measured.get)
        ratio = measured[pick] / measured[best]
        n += 1
        over += ratio > 1.10
        worst = max(worst, ratio)
        ratios.append(ratio)
        best_picks += pick == best
        line = "%s %s%% %-8s pick %-24s %.2f (best %s %.2f ms)" % (
            key[1], float(key[3]) * 100, key[4], pick, ratio, best, measured[best])
        if detail:
            costs = price(lib, autos[-1])
            line += "  " + " ".join("%s %.1f/%.1f" % (SHORT[a], measured[a], costs[a] * 1e3)
                                    for a in ALGOS if a in measured)
        print(line + ("  <<" if ratio > 1.10 else ""))
    print("# %d of %d points above 1.10, worst %.2f, %d pick the best, mean pick / best %.3f" % (
        over, n, worst, best_picks, statistics.mean(ratios) if ratios else 1.0))
    return over, worst, ratios


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="+", help="sparse_sweep.csv files")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--detail", action="store_true",
                   help="per point, every algorithm's measured / model milliseconds")
    args = p.parse_args()
    lib = load(os.path.join(args.build, "lib", "libhvdsparse.so"))
    total = [replay(lib, f, args.detail) for f in args.csv]
    if len(total) > 1:
        every = [r for _, _, rs in total for r in rs]
        print("# all: %d points above 1.10, worst %.2f, mean pick / best %.3f" % (
            sum(o for o, _, _ in total), max(w for _, w, _ in total), statistics.mean(every)))


if __name__ == "__main__":
    main()
