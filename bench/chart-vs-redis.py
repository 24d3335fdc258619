#!/usr/bin/env python3
# Chart the Tessera-vs-Redis table printed by bench/keylookup-vs-redis.sh.
#
# Reads the markdown output of that script (its first line, "N records,
# 100-byte values, ...", then a table with the columns | workload |
# Tessera ops/s | p50 us | Redis | Redis ops/s | p50 us | ops ratio |
# p50 ratio | target |) and writes a PNG with two panels: throughput
# (ops/s) on the left and p50 latency (us) on the right, Tessera next to
# Redis for each workload, both on log scales. Each pair carries its ratio
# and target; a target such as ">= 1.0x ops" or "p50 <= 2x" is also drawn
# as a black tick on the Tessera bar at that multiple of the Redis value.
# Rows whose Tessera cells are empty (Redis SET without persistence) are
# skipped.
#
# usage: python3 bench/chart-vs-redis.py TABLE.md OUT.png
#   e.g. OUT=/tmp/vs-redis.md bench/keylookup-vs-redis.sh 200000 5
#        python3 bench/chart-vs-redis.py /tmp/vs-redis.md /tmp/vs-redis.png
# needs: matplotlib (python3 -m pip install --user matplotlib)
# exit:  0 written, 1 bad input, 2 bad usage or matplotlib missing
import re
import sys

COLUMNS = ["workload", "Tessera ops/s", "p50 us", "Redis", "Redis ops/s",
           "p50 us", "ops ratio", "p50 ratio", "target"]
TESSERA, REDIS = "#1f77b4", "#d62728"


class BadInput(Exception):
    pass


def cells(line):
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|"):
        text = text[:-1]
    return [c.strip() for c in text.split("|")]


def number(text, what, where):
    try:
        return float(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise BadInput(f"{where}: {what} {text!r} is not a number") from None


def parse(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}") from None
    header = next((i for i, l in enumerate(lines)
                   if l.lstrip().startswith("|") and cells(l)[:1] == ["workload"]), None)
    if header is None:
        raise BadInput(f"{path}: no table found (expected a header line "
                       f"'| workload | Tessera ops/s | ...')")
    got = cells(lines[header])
    if got != COLUMNS:
        raise BadInput(f"{path}:{header + 1}: unexpected table header {got}, "
                       f"expected {COLUMNS}")
    title = next((l.strip() for l in lines[:header] if l.strip()), "")
    rows = []
    for n in range(header + 1, len(lines)):
        line, where = lines[n], f"{path}:{n + 1}"
        if not line.strip():
            if rows:
                break
            continue
        if not line.lstrip().startswith("|"):
            break  # end of the table
        c = cells(line)
        if all(re.fullmatch(r":?-+:?", x) for x in c):
            continue  # the |---|---:| line
        if len(c) != len(COLUMNS):
            raise BadInput(f"{where}: {len(c)} cells, expected {len(COLUMNS)}: {line.strip()}")
        label, t_ops, t_p50, r_name, r_ops, r_p50, ops_ratio, p50_ratio, target = c
        if not t_ops and not t_p50:
            continue  # Redis-only row
        if not (t_ops and t_p50 and r_ops and r_p50):
            raise BadInput(f"{where}: row {label!r} lacks a Tessera or Redis number")
        row = {
            "label": label, "redis": r_name, "target": target,
            "t_ops": number(t_ops, "Tessera ops/s", where),
            "t_p50": number(t_p50, "Tessera p50", where),
            "r_ops": number(r_ops, "Redis ops/s", where),
            "r_p50": number(r_p50, "Redis p50", where),
        }
        if min(row["t_ops"], row["t_p50"], row["r_ops"], row["r_p50"]) <= 0:
            raise BadInput(f"{where}: ops/s and p50 must be positive for a log scale")
        row["ops_ratio"] = (number(ops_ratio, "ops ratio", where) if ops_ratio
                            else row["t_ops"] / row["r_ops"])
        row["p50_ratio"] = (number(p50_ratio, "p50 ratio", where) if p50_ratio
                            else row["t_p50"] / row["r_p50"])
        # ">= 1.0x ops" -> ops goal 1.0; "p50 <= 2x" -> p50 goal 2.0
        m = re.fullmatch(r">=\s*([\d.]+)x\s*ops", target)
        row["ops_goal"] = float(m.group(1)) if m else None
        m = re.fullmatch(r"p50\s*<=\s*([\d.]+)x", target)
        row["p50_goal"] = float(m.group(1)) if m else None
        rows.append(row)
    if not rows:
        raise BadInput(f"{path}:{header + 1}: table has no rows with both Tessera and Redis numbers")
    return title, rows


def fmt(v):
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}"


def panel(ax, rows, key_t, key_r, ratio_key, goal_key, ratio_word, goal_op, xlabel):
    h = 0.38
    n = len(rows)
    ys = range(n)
    vmin = min(min(r[key_t], r[key_r]) for r in rows)
    vmax = max(max(r[key_t], r[key_r]) for r in rows)
    for i, r in zip(ys, rows):
        yt, yr = i - h / 2, i + h / 2  # Tessera on top (axis is inverted)
        ax.barh(yt, r[key_t], h, color=TESSERA, label="Tessera" if i == 0 else None)
        ax.barh(yr, r[key_r], h, color=REDIS, label="Redis" if i == 0 else None)
        goal = r[goal_key]
        mark = r[key_r] * goal if goal is not None else 0
        # value labels just past the bar (and past the target tick, if any)
        for x, y, v in ((max(r[key_t], mark), yt, r[key_t]), (r[key_r], yr, r[key_r])):
            ax.annotate(fmt(v), (x, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7.5)
        text = f"{r[ratio_key]:.2f}x {ratio_word}"
        color = "dimgray"
        if goal is not None:
            ax.plot([mark, mark], [yt - h / 2, yt + h / 2], color="black", lw=2.2,
                    label="target" if not panel_has_target(ax) else None)
            ok = r[ratio_key] >= goal if goal_op == ">=" else r[ratio_key] <= goal
            text += f"\ntarget {goal_op} {goal:g}x: {'met' if ok else 'missed'}"
            color = "green" if ok else "firebrick"
            vmin = min(vmin, mark)
            vmax = max(vmax, mark)
        # ratio (and target) beyond the longer bar of the pair and its value label
        ax.annotate(text, (max(r[key_t], r[key_r], mark), i), xytext=(26, 0),
                    textcoords="offset points", va="center", fontsize=7.5, color=color,
                    fontweight="bold" if goal is not None else "normal")
    ax.set_xscale("log")
    ax.set_xlim(vmin / 2, vmax * 16)  # room on the right for the ratio text
    ax.set_yticks(list(ys))
    ax.set_ylim(n - 0.45, -0.55)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.set_axisbelow(True)
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)


def panel_has_target(ax):
    return any(l.get_label() == "target" for l in ax.get_lines())


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print("usage: python3 bench/chart-vs-redis.py TABLE.md OUT.png\n"
              "  TABLE.md: output of bench/keylookup-vs-redis.sh (OUT=TABLE.md)",
              file=sys.stderr)
        return 2
    try:
        title, rows = parse(argv[1])
    except BadInput as e:
        print(f"chart-vs-redis: {e}", file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("chart-vs-redis: matplotlib is not installed; install it with\n"
              "  pip install matplotlib\n"
              "or\n"
              "  python3 -m pip install --user matplotlib",
              file=sys.stderr)
        return 2

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), dpi=110, sharey=True)
    panel(left, rows, "t_ops", "r_ops", "ops_ratio", "ops_goal", "ops", ">=",
          "throughput, ops/s (log scale, higher is better)")
    panel(right, rows, "t_p50", "r_p50", "p50_ratio", "p50_goal", "p50", "<=",
          "p50 latency, \u00b5s (log scale, lower is better)")
    left.set_yticklabels([f"{r['label']}\nvs Redis {r['redis']}" for r in rows], fontsize=8)
    right.tick_params(axis="y", left=False)
    left.set_title("Throughput", fontsize=10)
    right.set_title("p50 latency", fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    for h, l in zip(*right.get_legend_handles_labels()):
        if l not in labels:
            handles.append(h)
            labels.append(l)
    fig.legend(handles, [("target (x Redis)" if l == "target" else l) for l in labels],
               loc="upper right", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Tessera vs Redis key lookups\n{title}", fontsize=10.5, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.99))
    try:
        fig.savefig(argv[2], dpi=110)
    except OSError as e:
        print(f"chart-vs-redis: cannot write {argv[2]}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {argv[2]}: {len(rows)} workloads")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
