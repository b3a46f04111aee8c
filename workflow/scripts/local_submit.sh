#!/usr/bin/env bash
# A local stand-in for a cluster's submit command (sbatch, qsub, kubectl …), for the
# cluster-generic executor: start the job script as its own detached process, print its id.
# Usage: snakemake --executor cluster-generic --cluster-generic-submit-cmd workflow/scripts/local_submit.sh
set -euo pipefail
jobscript="$1"
setsid bash "$jobscript" > /dev/null 2>&1 < /dev/null &
echo $!
