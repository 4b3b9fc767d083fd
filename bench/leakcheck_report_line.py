# Turns a dwleak --leak-check JSON report into the key=value line
# bench/run_leakcheck_bench.sh reads (the dwleak-trace row).
import json
import sys

lc = json.load(open(sys.argv[1]))["totals"]["leak_check"]
print("pause_ms=%.3f scanned_bytes=%d lost_bytes=%d possibly_bytes=%d live_scan_ms=%.3f snapshot=%d" % (
    lc["pause_ms"], lc["scanned_bytes"],
    lc["definitely_lost"]["bytes"] + lc["indirectly_lost"]["bytes"], lc["possibly_lost"]["bytes"],
    lc.get("scan_ms") or 0, 1 if lc.get("snapshot") else 0))
