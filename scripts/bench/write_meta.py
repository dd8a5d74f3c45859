#!/usr/bin/python3
"""meta.json of one network of a scripts/bench.sh run: its settings (from the BM_* environment that
bench.sh sets), the commit, and the machine's load average at the start and, once complete, at the
end.

    BM_STATE=partial|complete BM_...=... /usr/bin/python3 scripts/bench/write_meta.py OUT_DIR/meta.json
"""
import json, os, sys
e = os.environ
defs = dict(l.split("=", 1) for l in e["BM_DEFS"].splitlines() if l)
json.dump({"state": e["BM_STATE"], "command": e["BM_CMD"], "net": e["BM_NET"], "mode": e["BM_MODE"],
           "list": e["BM_LIST"], "scale": e["BM_SCALE"], "warmup_calls": int(e["BM_WARMUP_CALLS"]), "in_place": e["BM_INPLACE"] == "1", "barrier": e["BM_BARRIER"], "warmup": int(e["BM_WARMUP"]),
           "iters": int(e["BM_ITERS"]), "rounds": int(e["BM_ROUNDS"]), "ranks": int(e["BM_RANKS"]),
           "order": e["BM_ORDER"], "baseline": e["BM_BASELINE"], "contenders": e["BM_CONTENDERS"].split(),
           "definitions": defs, "tolerance": float(e["BM_TOL"]), "syscalls": e["BM_SYSCALLS"] == "1", "build_dir": e["BM_BUILD"],
           "commit": e["BM_COMMIT"], "uncommitted_changes": int(e["BM_DIRTY"] or 0), "started": e["BM_START"],
           "host_cpus": os.cpu_count(), "loadavg_start": e["BM_LOAD0"], "uptime_start": e["BM_UPTIME0"],
           "loadavg_end": open("/proc/loadavg").read().split()[:3] if e["BM_STATE"] == "complete" else None,
           "uptime_end": os.popen("uptime").read().strip() if e["BM_STATE"] == "complete" else None},
          open(sys.argv[1], "w"), indent=1)
