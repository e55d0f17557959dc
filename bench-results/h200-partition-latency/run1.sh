#!/bin/bash
# Partition latency: the scatter's cursor atomics read after the tile's scan
# (-DGH_EXP_LATE_CURSOR) and the 2^15-region histogram with 1024 threads
# (GPUHASH_EXP_HIST_THREADS), alternating with the committed build in two
# rounds; stall sites of the u64 two-level build (Nsight Compute, SASS);
# kernel times of small batches without cache flushes.
cd "$(dirname "$0")"
R=/tmp/r; mkdir -p $R $OUT /tmp/ghc
S=../../.ship
gunzip -c $S/gpuhash.gz > $R/gpuhash; chmod +x $R/gpuhash; G=$R/gpuhash
export GPUHASH_REQUIRE_CUDA=1 GPUHASH_CACHE_DIR=/tmp/ghc
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
A=$OUT/all.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $A
B="--device cuda --no-peers --no-limits --reps 3"
run() { local n=$1; shift
  timeout 100 $G bench $B "$@" --out $R/$n > $R/$n.log 2>&1
  echo "== $n rc=$? $(el)s [${GPUHASH_NVRTC_FLAGS:-} hist=${GPUHASH_EXP_HIST_THREADS:-512}]: $*" >> $A; grep -E "^cuda:0 " $R/$n.log | sort -u >> $A; }
rows() { local v=$1
  run $v-ins32 --scheme two-level --keys u32 --values u32 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-ins64 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5,0.9 --sizes 2^27
  run $v-agg --scheme linear,two-level --keys u32 --values u32 --ops apply_sum --loads 0.5 --sizes 2^23; }
for round in 1 2; do
  (unset GPUHASH_NVRTC_FLAGS GPUHASH_EXP_HIST_THREADS; rows r$round-base)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_LATE_CURSOR; rows r$round-late)
  (export GPUHASH_EXP_HIST_THREADS=1024; rows r$round-hist)
  (export GPUHASH_NVRTC_FLAGS=-DGH_EXP_LATE_CURSOR GPUHASH_EXP_HIST_THREADS=1024; rows r$round-both)
done
# Small batches: the call's time (bench) and its kernels' (ncu, caches kept).
run small --scheme linear,two-level --keys u32 --values u32 --ops insert,find_hit --loads 0.5 --batch 2^20 --sizes 2^27
run small64 --scheme linear,two-level --keys u64 --values u64 --ops insert,find_hit --loads 0.5 --batch 2^20 --sizes 2^27
N=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$N" ] && N=ncu
for s in linear two-level; do for op in insert find_hit; do
  timeout 60 $N --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    $G bench --device cuda --no-peers --no-limits --reps 1 --scheme $s --keys u32 --values u32 --ops $op --loads 0.5 --batch 2^20 --sizes 2^27 --out $R/ps > $OUT/ncu-small-$s-$op.txt 2>&1
  echo "ncu small $s $op rc=$? $(el)s" >> $A
done; done
# Stall sites of the u64 two-level insert's kernels (line info in the module).
export GPUHASH_NVRTC_FLAGS=-lineinfo
timeout 150 $N --clock-control none -k regex:'gh_region_(hist|scatter1|build)' -c 3 --section WarpStateStats --section SourceCounters \
  --section LaunchStats --section Occupancy -o $R/prof -f $G bench --device cuda --no-peers --no-limits --reps 1 --scheme two-level --keys u64 --values u64 --ops insert --loads 0.5 --sizes 2^27 --out $R/pp > $R/prof.log 2>&1
echo "ncu prof rc=$? $(el)s" >> $A
$N -i $R/prof.ncu-rep --page details > $OUT/prof-details.txt 2>&1
$N -i $R/prof.ncu-rep --page source --csv --print-source sass > $R/src.csv 2>$R/src.err; echo "source rc=$? $(wc -c < $R/src.csv)" >> $A
head -c 300 $R/src.err >> $A
python3 - $R/src.csv > $OUT/prof-top.txt 2>&1 <<'PY'
import csv, sys, re
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
# The file holds one table per kernel, each with a header row.
tables, cur = [], None
for r in rows:
    if any("Source" == c or c.startswith("Address") for c in r[:3]) and any("Sampl" in c for c in r):
        cur = {"head": r, "rows": []}; tables.append(cur)
    elif cur is not None and len(r) == len(cur["head"]):
        cur["rows"].append(r)
    elif r and cur is not None:
        print("#", ",".join(r)[:200])
for t in tables:
    h = t["head"]
    cols = [i for i, c in enumerate(h) if "Sampl" in c]
    src = next((i for i, c in enumerate(h) if c == "Source"), 1)
    print("== table, columns:", [h[i] for i in cols])
    k = cols[0]
    def num(x):
        try: return float(x.replace(",", ""))
        except: return 0.0
    tot = sum(num(r[k]) for r in t["rows"]) or 1
    top = sorted(t["rows"], key=lambda r: -num(r[k]))[:45]
    for r in top:
        print(f"{100*num(r[k])/tot:5.1f}%  " + "  ".join(h[i].split(' (')[0][:14]+'='+r[i] for i in cols[:6]) + "  | " + r[src][:110])
PY
cp $R/prof.ncu-rep $OUT/ 2>/dev/null
cd $R && tar czf $OUT/logs.tgz *.log 2>/dev/null
echo "done $(el)s" >> $A
