#!/bin/bash
# Slurm Epilog: stop the MPS daemons a whole-GPU job asked for in its comment
# ("mps-per-gpu", "mps-per-node").  The daemons of gres/mps jobs stay: the
# next MPS job on the GPU uses them, and the Prolog of the next job given
# the GPU as a whole stops them.  See README.md in this directory.
MPS_SCRIPT=epilog
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/mps-common.sh"
mps_init_state

job=${SLURM_JOB_ID:?}
refused=0
for f in "$MPS_STATE_DIR"/daemon.job"$job" "$MPS_STATE_DIR"/daemon.job"$job".gpu*; do
	[ -e "$f" ] || continue
	key=${f##*/daemon.}
	mps_stop "$key" || refused=1
done
rm -f "$(mps_job_file "$job")"
if [ $refused -ne 0 ]; then
	mps_refused || exit 1
fi
exit 0
