#!/usr/bin/env python3
# Chart commits per 100 ms around a data node's kill, from the JSON that
# `tessera bench failover --json` prints (bench/failover.sh keeps the last
# run of each kind as failover-{master,other}-SIGNAL.json).
#
# usage: python3 bench/chart-failover.py OUT.png LABEL=FILE.json [LABEL=FILE.json ...]
#   TITLE (env): the chart's title, instead of the failover bench's.
#   A file without "failover_ms" (bench/failover-keylookup.sh's) is
#   labelled as given.
#   e.g. python3 bench/chart-failover.py docs/failover.png \
#          "master killed=/tmp/tessera-failover-bench/failover-master-KILL.json" \
#          "other node killed=/tmp/tessera-failover-bench/failover-other-KILL.json"
# needs: matplotlib (python3 -m pip install --user matplotlib)
# exit:  0 written, 1 bad input, 2 bad usage or matplotlib missing
import json
import sys


def main(argv):
    if len(argv) < 3 or any("=" not in arg for arg in argv[2:]):
        print(__doc__ or "usage: chart-failover.py OUT.png LABEL=FILE.json ...", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("needs matplotlib: python3 -m pip install --user matplotlib", file=sys.stderr)
        return 2
    runs = []
    report_keys = {}
    for arg in argv[2:]:
        label, path = arg.split("=", 1)
        try:
            with open(path) as file:
                report = json.load(file)
            series = [int(n) for n in report["commits_per_100ms"]]
            kill_ms = float(report["kill_at_ms"])
            failover = report.get("failover_ms")
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 1
        runs.append((label, series, kill_ms, failover))
        report_keys[label] = set(report)
    figure, axis = plt.subplots(figsize=(9, 4))
    for label, series, kill_ms, failover in runs:
        # Bucket i covers [i*100, (i+1)*100) ms; times relative to the kill.
        # The last bucket is cut short by the end of the load: left out.
        xs = [(i * 100 + 50 - kill_ms) / 1000 for i in range(len(series) - 1)]
        if failover is not None:
            text = f"{label} (first new commit {failover:.0f} ms after)"
        elif "failover_ms" in report_keys[label]:
            text = f"{label} (no commit after the kill)"
        else:
            text = label
        axis.plot(xs, [n * 10 for n in series[:-1]], label=text, drawstyle="steps-mid")
    axis.axvline(0, color="black", linewidth=1, linestyle="--")
    axis.text(0.02, axis.get_ylim()[1] * 0.95, "signal sent", va="top")
    axis.set_xlabel("seconds from the signal")
    axis.set_ylabel("commits per second (per 100 ms x 10)")
    import os
    axis.set_title(os.environ.get(
        "TITLE", "Two data nodes, replicas = 2: one is killed or stopped under one-row writes"))
    axis.legend(loc="lower right")
    axis.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(argv[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
