#!/usr/bin/env bash
# The capacity planner's validation runs (results/plan-validate): N profiles of one
# broker (the plan-profile preset) and N runs of a 3-broker cluster (the
# replication preset), taken in turn, every one inside one cgroup with a CPU quota
# of one core and a high weight, so each side gets the same, known CPU budget
# however busy the rest of the machine is; then weir plan --validate over all of
# them. Needs root and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu (cgroup
# v2: write "100000 100000" to cpu.max and 10000 to cpu.weight instead).
#   scripts/plan-validate.sh [N] [OUT]     (defaults 4, results/plan-validate; ~20 min for 4)
set -euo pipefail
n=${1:-4}
out=${2:-results/plan-validate}
bin=${WEIR:-bin/weir}
cg=/sys/fs/cgroup/cpu/weir-plan-validate
mkdir -p "$cg"
echo 100000 > "$cg/cpu.cfs_period_us"
echo 100000 > "$cg/cpu.cfs_quota_us"   # one core
echo 10240 > "$cg/cpu.shares"          # ten times a default process's weight: the core is ours
echo $$ > "$cg/tasks"                  # this shell and everything it starts
for i in $(seq 1 "$n"); do
	for p in plan-profile:profile replication:replication; do
		echo "$(date -u +%T) ${p#*:}-$i, load average $(cut -d' ' -f1-3 /proc/loadavg)"
		nice -n 5 "$bin" run --preset "${p%%:*}" --out "$out/${p#*:}-$i"
	done
done
list() { local s=; for i in $(seq 1 "$n"); do s+="${s:+,}$out/$1-$i"; done; echo "$s"; }
"$bin" plan --profile "$(list profile)" --validate "$(list replication)" | tee "$out/validation.txt"
