#!/bin/bash
# Slurm Prolog: MPS control daemons for the two modes of gres.shtml ("MPS
# Management").  See README.md in this directory.
#
# 1. A job with gres/mps (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is set): make
#    sure the MPS control daemon of its GPU runs, with the GPU's own pipe and
#    log directories, and ask it for a server for the job's user.  The
#    daemon stays for the next MPS jobs on that GPU.
# 2. A job with whole GPUs (gres/gpu): stop the MPS daemons of mode 1 on its
#    GPUs first; then, if its comment says "mps-per-gpu" or "mps-per-node",
#    start one daemon per GPU or one across all of its GPUs (the Epilog
#    stops them).
MPS_SCRIPT=prolog
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/mps-common.sh"
mps_init_state

gpus=${CUDA_VISIBLE_DEVICES:-}
[ -n "$gpus" ] || exit 0
uid=${SLURM_JOB_UID:-}
job=${SLURM_JOB_ID:?}
jobfile=$(mps_job_file "$job")

if [ -n "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" ]; then
	: >"$jobfile"
	rc=0
	for g in $(mps_gpus "$gpus"); do
		mps_locked "gpu$g" mps_start "gpu$g" "$g" "$uid" || rc=1
		echo "$g gpu$g" >>"$jobfile"
	done
	mps_log "gres/mps job on GPU(s) $gpus at ${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE}%"
	exit $rc
fi

# Whole GPUs: no MPS daemon of another job may keep them.
refused=0
for g in $(mps_gpus "$gpus"); do
	mps_locked "gpu$g" mps_stop "gpu$g" || refused=1
done
if [ $refused -ne 0 ]; then
	mps_refused || exit 1
fi

comment=${SLURM_JOB_COMMENT-}
if [ -z "${SLURM_JOB_COMMENT+set}" ] && command -v scontrol >/dev/null; then
	# Slurm releases whose Prolog lacks SLURM_JOB_COMMENT.
	comment=$(scontrol -o show job "$job" 2>/dev/null | sed -n 's/.* Comment=//p')
fi
case " $comment " in
*mps-per-node*)
	mps_start "job$job" "$gpus" "$uid" || exit 1
	echo "node job$job" >"$jobfile"
	;;
*mps-per-gpu*)
	: >"$jobfile"
	for g in $(mps_gpus "$gpus"); do
		mps_start "job$job.gpu$g" "$g" "$uid" || exit 1
		echo "$g job$job.gpu$g" >>"$jobfile"
	done
	;;
esac
exit 0
