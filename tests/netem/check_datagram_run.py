#!/usr/bin/python3
"""Checks what a datagram_under_loss.sh job left in its work directory: the library's report
(every rank made its engines without failure, over the expected transport, with traffic in the
transport's counters), the emulator's counters (the loss hit the job) and, with --stranger, the
strangers' counts and the rejections they caused on every rank.

    check_datagram_run.py --work DIR --permille P --ranks N --hosts H --transport-prefix TEXT [--stranger] [--fec] [--resends | --no-resends]
"""
import argparse
import glob
import json
import os
import sys


def bounded_transports(described):
    """What carried bounded calls: an engine with both paths reads 'exact: UCX; bounded: DATAGRAMS'."""
    parts = [t.strip() for t in described.split(";")]
    return [t.removeprefix("bounded: ") for t in parts if t and not t.startswith("exact: ")] or [""]


def load(work, name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)


def check_ranks(report, args, bad):
    ranks = report["ranks"]
    if len(ranks) != args.ranks:
        bad.append(f"the report has {len(ranks)} ranks, expected {args.ranks}")
    hosts = sorted({r["host"] for r in ranks})
    if args.hosts > 1 and len(hosts) != args.hosts:
        bad.append(f"ranks on hosts {hosts}, expected {args.hosts} distinct hosts")
    for r in ranks:
        where = f"rank {r['rank']} on {r['host']}"
        c = r.get("transport_counters", {})
        reasons = r.get("rejected_by_reason", {})
        print(f"{where}: dropped fraction {r['dropped_fraction']}, transports {r['transports']!r}, "
              f"rejected {r['rejected_messages']} {reasons}, counters {c}")
        if r["engine_failures"] or r["engines_created"] < 1:
            bad.append(f"{where}: {r['engines_created']} engines, {r['engine_failures']} failures")
        if not all(t.startswith(args.transport_prefix) for t in bounded_transports(r["transports"])):
            bad.append(f"{where}: transports {r['transports']!r}, expected {args.transport_prefix!r}...")
        # Datagrams moved both ways through the transport's own system calls.
        for field in ("messages_sent", "messages_received", "send_calls", "receive_calls"):
            if c.get(field, 0) <= 0:
                bad.append(f"{where}: transport counter {field} is {c.get(field)}")
        if args.fec and (c.get("fec_parity_sent", 0) == 0 or c.get("fec_repaired", 0) == 0):
            bad.append(f"{where}: with FEC, {c.get('fec_parity_sent', 0)} parity datagrams sent, {c.get('fec_repaired', 0)} repaired")
        asked = r.get("resends", {}).get("requests", 0)
        if args.resends and args.permille > 0 and asked == 0:
            bad.append(f"{where}: resends on under loss, but this rank never asked for a lost chunk again")
        if args.no_resends and asked:
            bad.append(f"{where}: OPTIREDUCE_RESEND_ROUNDS=0, but this rank asked {asked} times")
        if args.stranger and reasons.get("unauthenticated", 0) + reasons.get("malformed", 0) == 0:
            bad.append(f"{where}: the stranger's datagrams do not show among the rejected ones: {reasons}")


def check_network(args, bad):
    if args.hosts == 1:
        netem = load(args.work, "netem.json")
        dropped, packets = netem["lo_input_dropped"], netem["lo_input_packets"]
        print(f"loopback: {packets} packets, {dropped} dropped ({netem['measured_drop_fraction']:.4f}, "
              f"configured {args.permille / 1000:g})")
    else:
        links = load(args.work, "links.json")["links"]
        dropped = sum(l["up_dropped"] + l["down_dropped"] for l in links)
        packets = sum(l["up_packets"] + l["down_packets"] for l in links)
        for l in links:
            print(f"link {l['host']}: up {l['up_packets']} packets, {l['up_dropped']} dropped; "
                  f"down {l['down_packets']} packets, {l['down_dropped']} dropped")
            if min(l["eth0_rx_bytes"], l["eth0_tx_bytes"]) == 0:
                bad.append(f"link {l['host']}: no traffic: the job did not cross it")
    if args.permille > 0 and dropped == 0:
        bad.append(f"no packet of {packets} was dropped: the job did not cross the lossy network")


def check_strangers(args, bad):
    counts = {}
    for path in sorted(glob.glob(os.path.join(args.work, "stranger.*"))):
        with open(path) as f:
            counts[os.path.basename(path)] = int(f.read())
    print(f"strangers: {counts} datagrams sent")
    if len(counts) != args.hosts or min(counts.values(), default=0) == 0:
        bad.append(f"expected a stranger on each of {args.hosts} hosts that found a socket to send to: {counts}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--permille", type=float, required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--hosts", type=int, default=1)
    p.add_argument("--transport-prefix", required=True)
    p.add_argument("--stranger", action="store_true")
    p.add_argument("--resends", action="store_true", help="lost chunks are asked for again: every rank under loss asked")
    p.add_argument("--no-resends", action="store_true", help="OPTIREDUCE_RESEND_ROUNDS=0: no rank asked")
    p.add_argument("--fec", action="store_true", help="the transport sent parity: every rank must have repaired some")
    args = p.parse_args()
    bad = []
    check_ranks(load(args.work, "report.json"), args, bad)
    check_network(args, bad)
    if args.stranger:
        check_strangers(args, bad)
    for b in bad:
        print("FAIL:", b)
    print("PASS" if not bad else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
