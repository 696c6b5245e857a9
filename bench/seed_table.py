#!/usr/bin/env python3
"""The tables of docs/results.md from bench/ablation.sh's per-clip JSON lines (standard library only).

Each line: {"comparison", "attention", "seed", "final_loss", "caption", <megaslide eval's metrics>}. For each
comparison, one row per attention type: the mean over seeds of each seed's mean over its clips, +- the half-width of
a 95 % Student-t interval over the seeds (the seeds are the independent units; clips of one model are not). Then the
same metrics at matched motion: within each seed, each clip of an attention type is paired with a clip of the first
type (the reference) whose dynamic degree is within CALIPER px/frame, nearest pairs first, each clip used once; the
row is the mean over seeds of the per-seed mean difference (type - reference) over the pairs, +- its interval.

    bench/seed_table.py RESULTS.jsonl [--caliper 0.1]
"""
import argparse
import json
import math
from collections import OrderedDict

METRICS = ["colour_accuracy", "motion_direction_accuracy", "one_shape", "temporal_flickering",
           "subject_consistency_ssim", "warping_error", "dynamic_degree_score"]
MOTION = ["temporal_flickering", "subject_consistency_ssim", "warping_error", "dynamic_degree_score"]
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def interval(values):
    """(mean, 95 % half-width) over independent values; the half-width is nan for a single value."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T95.get(n - 1, 1.96) * sd / math.sqrt(n)


def cell(values, digits):
    mean, half = interval(values)
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def digits_of(key):
    return 4 if key in ("final_loss", "temporal_flickering", "warping_error") else 3


def matched_pairs(clips, reference, caliper):
    """Greedy nearest-first pairs (clip, reference clip) of dynamic degree within the caliper, each clip used once."""
    candidates = sorted((abs(a["dynamic_degree_score"] - b["dynamic_degree_score"]), i, j)
                        for i, a in enumerate(clips) for j, b in enumerate(reference))
    used_a, used_b, pairs = set(), set(), []
    for gap, i, j in candidates:
        if gap > caliper:
            break
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((clips[i], reference[j]))
    return pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results")
    parser.add_argument("--caliper", type=float, default=0.1, help="px/frame of dynamic degree (default 0.1)")
    args = parser.parse_args()
    # comparison -> attention -> seed -> clips
    runs = OrderedDict()
    with open(args.results) as f:
        for line in f:
            r = json.loads(line)
            seeds = runs.setdefault(r["comparison"], OrderedDict()).setdefault(r["attention"], OrderedDict())
            seeds.setdefault(r["seed"], []).append(r)
    for comparison, types in runs.items():
        print(f"### {comparison}\n")
        print("| attention | seeds | clips | final loss | " + " | ".join(METRICS) + " |")
        print("|---" * (4 + len(METRICS)) + "|")
        for attention, seeds in types.items():
            per_seed = {k: [sum((c.get(k) or 0.0) for c in clips) / len(clips) for clips in seeds.values()]
                        for k in METRICS}
            losses = [clips[0]["final_loss"] for clips in seeds.values()]
            clips = sum(len(c) for c in seeds.values())
            print(f"| {attention} | {len(seeds)} | {clips} | {cell(losses, 4)} | "
                  + " | ".join(cell(per_seed[k], digits_of(k)) for k in METRICS) + " |")
        reference, *others = types
        if not others:
            continue
        print(f"\nAt matched motion (pairs within {args.caliper} px/frame of dynamic degree, per seed), "
              f"difference against {reference}:\n")
        print("| attention - " + reference + " | pairs | " + " | ".join(MOTION) + " |")
        print("|---" * (2 + len(MOTION)) + "|")
        for attention in others:
            diffs = {k: [] for k in MOTION}
            count = []
            for seed, clips in types[attention].items():
                pairs = matched_pairs(clips, types[reference].get(seed, []), args.caliper)
                count.append(len(pairs))
                if not pairs:
                    continue
                for k in MOTION:
                    diffs[k].append(sum(a[k] - b[k] for a, b in pairs) / len(pairs))
            print(f"| {attention} | {'/'.join(map(str, count))} | "
                  + " | ".join(cell(diffs[k], digits_of(k)) if diffs[k] else "-" for k in MOTION) + " |")
        print()


if __name__ == "__main__":
    main()
