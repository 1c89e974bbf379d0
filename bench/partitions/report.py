"""Formats bench/partitions/results.jsonl as the RESULTS.md table.

Usage: python report.py RESULTS.jsonl COMMAND COMMIT
"""
import json
import sys

WHAT = {
    "A": "primary + client-1 cut from replicas, sentinels, client-2 (Jepsen's shape)",
    "B": "client-1 cut from every sentinel during a planned SENTINEL FAILOVER",
    "C": "primary cut from sentinels and replicas, clients still reach it",
}


def main(path, command, commit):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    print("# Partitions: acknowledged writes lost, sentinel-recovery (default mode, each option, "
          "both) vs redis-py\n")
    print(f"Command: `{command}` at {commit} (as root; real network namespaces, "
          "1 primary + 2 replicas + 3 sentinels, quorum 2, down-after 1000 ms; one writer on "
          "each of two client hosts, SADD of unique ids every 10 ms; the cut is healed 2 s "
          "after the sentinels report the new primary; one final SMEMBERS after resync).\n")
    for s, what in WHAT.items():
        print(f"- **{s}**: {what}")
    print("\nClients: `sentinel-recovery` (default mode), `sr-wait` (`wait_replicas=2`: both "
          "replicas), `sr-majority` (`sentinel_majority_ms=1000`), `sr-both` (both options), "
          "`redis-py` (`redis.sentinel.Sentinel(...).master_for(...)`). With `wait_replicas` a "
          "write the replicas did not confirm fails as `not_replicated` and counts as "
          "indeterminate, never as acknowledged.")
    print("\n| scenario | round | client | acknowledged | lost | % lost | indeterminate | "
          "lost by client-1 / client-2 | longest wait for an ack after the cut (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["run"]["scenario"], r["round"], r["client"])):
        run, t = r["run"], r["run"]["total"]
        w = run["writers"]
        print(f"| {run['scenario']} | {r['round']} | {r['client']} | {t['acknowledged']} | "
              f"{t['lost']} | {run['lost_percent']:.1f} | {t['indeterminate']} | "
              f"{w.get('w1', {}).get('lost', '-')} / {w.get('w2', {}).get('lost', '-')} | "
              f"{t['max_unavailable_ms']} |")
    print("\nSums per scenario and client:\n")
    print("| scenario | client | acknowledged | lost | % lost | indeterminate |")
    print("|---|---|---|---|---|---|")
    sums = {}
    for r in rows:
        k = (r["run"]["scenario"], r["client"])
        a = sums.setdefault(k, [0, 0, 0])
        t = r["run"]["total"]
        a[0] += t["acknowledged"]
        a[1] += t["lost"]
        a[2] += t["indeterminate"]
    for (s, c), (ack, lost, ind) in sorted(sums.items()):
        pct = 100.0 * lost / ack if ack else 0.0
        print(f"| {s} | {c} | {ack} | {lost} | {pct:.1f} | {ind} |")
    print("\nEvery acknowledged write counted here was acknowledged by some server; `lost` ones "
          "are missing from the final set. Per-run detail (windows, events): results.jsonl.")


if __name__ == "__main__":
    main(*sys.argv[1:4])
