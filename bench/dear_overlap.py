#!/usr/bin/env python3
"""Where DeAR's two halves ran: the runtime's timeline beside the step phases of rank 0.

    HVDSPARSE_TIMELINE=tl.json python3 bench/dear_compare.py --configs dear --bucket-mb 1 \\
        --phases phases.jsonl ...
    python3 bench/dear_overlap.py tl.json phases.jsonl

For every reduce-scatter and all-gather of the timed steps, the time its transfer ran (the
timeline's GLOO_REDUCESCATTER / GLOO_ALLGATHER activity) is split by the phase of the training
step it fell in: forward (loss included), backward, step(), or between steps. DeAR is doing what
it should when the reduce-scatters run in backward and the all-gathers in forward."""
import argparse
import json

PHASES = ("forward", "backward", "step()", "between")
KINDS = {"GLOO_REDUCESCATTER": "reduce-scatter", "GLOO_ALLGATHER": "all-gather"}


def load_timeline(path):
    text = open(path).read().rstrip()
    if not text.endswith("]"):        # a timeline still being written
        text = text.rstrip(",") + "]"
    return json.loads(text)


def transfer_spans(events):
    """[(kind, begin_us, end_us)] in microseconds since the epoch, for the DeAR operations."""
    names, start, open_, spans = {}, 0, {}, []
    for e in events:
        if e.get("ph") == "M":
            args = e.get("args", {})
            if "start_time_since_epoch_in_micros" in args:
                start = args["start_time_since_epoch_in_micros"]
            if e.get("name") == "process_name" and "name" in args:
                names[e["pid"]] = args["name"]
            continue
        if ".dear." not in names.get(e.get("pid"), ""):
            continue
        if e.get("ph") == "B":
            open_.setdefault(e["pid"], []).append((e["name"], e["ts"]))
        elif e.get("ph") == "E" and open_.get(e["pid"]):
            name, ts = open_[e["pid"]].pop()
            if name in KINDS:
                spans.append((KINDS[name], start + ts, start + e["ts"]))
    return spans


def windows(steps):
    """[(phase, begin, end)] of the timed steps; marks are forward start, forward end,
    backward end, step() end."""
    out = []
    for i, (f0, f1, b1, s1) in enumerate(steps):
        out += [("forward", f0, f1), ("backward", f1, b1), ("step()", b1, s1)]
        if i + 1 < len(steps):
            out.append(("between", s1, steps[i + 1][0]))
    return out


def split(spans, wins, lo, hi):
    """{kind: {phase: microseconds}} of the spans' time inside [lo, hi]."""
    out = {k: dict.fromkeys(PHASES, 0.0) for k in KINDS.values()}
    for kind, b, e in spans:
        b, e = max(b, lo), min(e, hi)
        for phase, wb, we in wins:
            overlap = min(e, we) - max(b, wb)
            if overlap > 0:
                out[kind][phase] += overlap
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("timeline")
    p.add_argument("phases")
    args = p.parse_args()
    spans = transfer_spans(load_timeline(args.timeline))
    for line in open(args.phases):
        run = json.loads(line)
        steps = run["timed"]
        wins = windows(steps)
        lo, hi = steps[0][0], steps[-1][3]
        n = len(steps)
        print("%s %s %s MB, %d steps, %.0f ms a step on rank 0" % (
            run["model"], run["config"], run["bucket_mb"], n, (hi - lo) / 1e3 / n))
        phase_ms = {ph: sum(we - wb for p_, wb, we in wins if p_ == ph) / 1e3 / n
                    for ph in PHASES}
        print("  phase lengths (ms a step): " + ", ".join(
            "%s %.0f" % (ph, phase_ms[ph]) for ph in PHASES))
        for kind, by_phase in split(spans, wins, lo, hi).items():
            total = sum(by_phase.values())
            if total == 0:
                print("  %-14s none in the timed steps" % kind)
                continue
            print("  %-14s %6.0f ms a step; " % (kind, total / 1e3 / n) + ", ".join(
                "%s %.0f%%" % (ph, 100 * by_phase[ph] / total) for ph in PHASES))


if __name__ == "__main__":
    main()
