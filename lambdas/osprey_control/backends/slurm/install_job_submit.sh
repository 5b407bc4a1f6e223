#!/bin/bash
# Osprey's Slurm job submit plugin for the priority range @RANGE@ (docs/slurm.md, "New jobs mid-range at
# submission"); rendered by `osprey slurm submit-plugin`. Run it as root on the head node:
#
# - AWS ParallelCluster: as the head node's OnNodeStart custom action, with `JobSubmitPlugins: lua` in
#   Scheduling/SlurmSettings/CustomSlurmSettings. OnNodeStart runs before slurmctld first starts, which is
#   needed: slurmctld refuses to start when JobSubmitPlugins names lua and job_submit.lua is missing.
# - A running cluster (or SageMaker HyperPod's controller node): `bash <this script> --enable` also adds
#   JobSubmitPlugins=lua to slurm.conf and runs `scontrol reconfigure` (no restart; no running or queued job is
#   touched).
#
# It writes job_submit.lua next to slurm.conf ($SLURM_CONF, else ParallelCluster's /opt/slurm/etc/slurm.conf).
# Running it again (a new range) replaces the script; slurmctld reads the new one on the next submission.
set -euo pipefail
PATH="$PATH:/opt/slurm/bin"
conf="${SLURM_CONF:-/opt/slurm/etc/slurm.conf}"
dir="$(dirname "$conf")"
mkdir -p "$dir"
tmp="$(mktemp "$dir/.job_submit.lua.XXXXXX")"
cat >"$tmp" <<'OSPREY_JOB_SUBMIT_LUA'
@LUA@
OSPREY_JOB_SUBMIT_LUA
chmod 0644 "$tmp"
mv -f "$tmp" "$dir/job_submit.lua" # one rename: slurmctld never reads half a script
echo "osprey: wrote $dir/job_submit.lua"
[[ "${1:-}" == "--enable" ]] || exit 0

plugins="$(scontrol show config | sed -n 's/^JobSubmitPlugins *= *//p')"
listed=",${plugins// /},"
if [[ "${listed//job_submit\//}" == *",lua,"* ]]; then
    echo "osprey: JobSubmitPlugins already includes lua ($plugins)"
    exit 0
fi
if grep -Eq '^[[:space:]]*JobSubmitPlugins[[:space:]]*=' "$conf"; then
    sed -i -E 's/^([[:space:]]*JobSubmitPlugins[[:space:]]*=[[:space:]]*[^[:space:]#]+)/\1,lua/' "$conf"
elif [[ -n "$plugins" && "$plugins" != "(null)" ]]; then
    echo "osprey: JobSubmitPlugins is $plugins, set outside $conf: add lua to it there, then scontrol reconfigure" >&2
    exit 1
else
    printf '\n# Osprey: new opted-in jobs start mid-range (job_submit.lua)\nJobSubmitPlugins=lua\n' >>"$conf"
fi
scontrol reconfigure
echo "osprey: JobSubmitPlugins now includes lua"
