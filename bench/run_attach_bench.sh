#!/bin/bash
# Attach latency and BPF map memory (issue 7), for `dwleak -p PID` on
#   seed     build/testdata/seed_O2 --interval-ms 50 (running, leaking)
#   python   /usr/bin/python3.11 bench/py_workload.py (running)
# latency = from starting dwleak to its "dwleak: tracing" line on stderr
# (CLOCK_MONOTONIC, measured here), next to the "N ms to attach" dwleak
# reports itself; cold = empty table cache (XDG_CACHE_HOME a fresh temp
# dir), warm = a second run with the same cache dir.  REPS fresh cache dirs
# per target (median, min, max).
# Map memory: while dwleak traces, its BPF maps are found from its file
# descriptors (/proc/PID/fdinfo/N "map_id:"; this bpftool cannot show map
# owners), and `bpftool map show id N` gives each map's bytes_memlock.
#
# Environment: DWLEAK, PYTHON (/usr/bin/python3.11), SEED
# (BUILD/testdata/seed_O2), REPS (3), OUT (default BUILD/bench/attach_bench.md).
set -uo pipefail

ROOT=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
DWLEAK=${DWLEAK:-$ROOT/dwleak}
PYTHON=${PYTHON:-/usr/bin/python3.11}
SEED=${SEED:-$BUILD/testdata/seed_O2}
REPS=${REPS:-3}
OUT=${OUT:-$BUILD/bench/attach_bench.md}
. "$ROOT/bench/ensure_tools.sh"

if [ "$(id -u)" != 0 ]; then
	echo "run_attach_bench: needs root for BPF" >&2
	exit 2
fi
for f in "$DWLEAK" "$SEED"; do
	[ -x "$f" ] || { echo "run_attach_bench: $f is missing (make all testdata)" >&2; exit 2; }
done
ensure_tool bpftool bpftool || echo "run_attach_bench: no bpftool: map sizes from /proc fdinfo memlock" >&2

mkdir -p "$(dirname "$OUT")"
DWLEAK=$DWLEAK PYTHON=$PYTHON SEED=$SEED REPS=$REPS ROOT=$ROOT MACHINE="$(machine_line)" \
	python3 - "$OUT" << 'EOF'
import json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time

out_path = sys.argv[1]
DWLEAK, PYTHON, SEED, ROOT = (os.environ[k] for k in ("DWLEAK", "PYTHON", "SEED", "ROOT"))
REPS = int(os.environ["REPS"])
targets = [("seed_O2 (`--interval-ms 50`)", [SEED, "--interval-ms", "50"], 0.3)]
if os.access(PYTHON, os.X_OK):
    targets.append(("python3.11 (bench/py_workload.py)", [PYTHON, os.path.join(ROOT, "bench/py_workload.py"), "100000"], 1.0))
notes = []


def bpf_maps(pid):
    """{map_id: (name, bytes_memlock)} for the BPF maps pid holds."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue
        m = re.search(r"^map_id:\s*(\d+)", info, re.M)
        if m:
            mem = re.search(r"^memlock:\s*(\d+)", info, re.M)
            ids.add((int(m.group(1)), int(mem.group(1)) if mem else 0))
    maps = {}
    for mid, fdmem in ids:
        name, mem = "?", fdmem
        if shutil.which("bpftool"):
            r = subprocess.run(["bpftool", "map", "show", "id", str(mid), "-j"], capture_output=True, text=True)
            if r.returncode == 0:
                j = json.loads(r.stdout)
                name, mem = j.get("name", "?"), j.get("bytes_memlock", fdmem)
        maps[mid] = (name, mem)
    return maps


def attach(pid, cache, want_maps):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    t0 = time.monotonic()
    p = subprocess.Popen([DWLEAK, "-p", str(pid), "-o", os.devnull], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    latency = self_ms = tables = None
    lines = []
    for line in p.stderr:
        lines.append(line.strip())
        if line.startswith("dwleak: tracing"):
            latency = (time.monotonic() - t0) * 1e3
            m = re.search(r"(\d+) tables, (\d+) ms to attach", line)
            if m:
                tables, self_ms = int(m.group(1)), int(m.group(2))
            break
    maps = None
    if latency is not None and want_maps:
        time.sleep(0.5)
        maps = bpf_maps(p.pid)
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    if latency is None:
        notes.append(f"dwleak -p failed: {' / '.join(lines[-3:])}")
    return latency, self_ms, tables, maps


rows, mem = [], []
for label, cmd, settle in targets:
    tgt = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(settle)
    res = {"cold": [], "warm": []}
    maps = None
    cache_bytes = None
    try:
        for r in range(REPS):
            cache = tempfile.mkdtemp(prefix="dwleak-cache.")
            try:
                for kind in ("cold", "warm"):
                    lat, self_ms, tables, m = attach(tgt.pid, cache, maps is None and kind == "warm")
                    if m:
                        maps = m
                    if lat is not None:
                        res[kind].append((lat, self_ms, tables))
                    print(f"attach: {label} {kind} rep {r + 1}/{REPS}: {lat if lat is None else round(lat)} ms (dwleak says {self_ms} ms, {tables} tables)", file=sys.stderr)
                    if kind == "cold" and cache_bytes is None:
                        cache_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        tgt.kill()
        tgt.wait()
    for kind in ("cold", "warm"):
        v = res[kind]
        if not v:
            rows.append(f"| {label} | {kind} | failed | | | | |")
            continue
        lat = [x[0] for x in v]
        selfs = [x[1] for x in v if x[1] is not None]
        rows.append(f"| {label} | {kind} | {statistics.median(lat):.0f} | {min(lat):.0f} | {max(lat):.0f} | "
                    f"{statistics.median(selfs):.0f} | {v[0][2]} |")
    if maps:
        total = sum(x[1] for x in maps.values())
        big = sorted(maps.values(), key=lambda x: -x[1])
        mem.append(f"| {label} | {len(maps)} | {total / 2**20:.1f} | " +
                   ", ".join(f"{n} {b / 2**20:.1f}" for n, b in big if b >= 2**19) + " |")
    if cache_bytes is not None:
        notes.append(f"{label}: the table cache written by the cold run holds {cache_bytes / 1024:.0f} KiB")

with open(out_path, "w") as f:
    w = lambda s="": print(s, file=f)
    w("### Attach latency (`dwleak -p PID`) and BPF map memory")
    w()
    w(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.environ['MACHINE']}; {REPS} runs each, each with a fresh cache dir (cold) used again at once (warm).")
    w()
    w("| target | table cache | start to `dwleak: tracing`, ms (median) | min | max | dwleak's own \"ms to attach\" (median) | tables |")
    w("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        w(r)
    w()
    w("BPF maps of the dwleak process while it traces (sum of `bpftool map show` bytes_memlock; maps found through the process's file descriptors; for maps created with BPF_F_NO_PREALLOC this is the kernel's estimate of the upper bound):")
    w()
    w("| target | maps | MiB (memlock) | maps of 0.5 MiB or more, MiB |")
    w("|---|---:|---:|---|")
    for r in mem:
        w(r)
    w()
    for n in notes:
        w(f"- note: {n}")
print(open(out_path).read())
EOF
