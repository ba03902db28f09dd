#!/bin/bash
# Slurm TaskProlog: point each task of an MPS job at its daemon.  Prints
# "export" lines, which slurmstepd adds to the task's environment.  A task
# uses the daemon of the first GPU it was given (SLURM_STEP_GPUS, else
# SLURM_JOB_GPUS: node numbering), or the job's one daemon (mps-per-node).
# See README.md in this directory.
MPS_SCRIPT=task-prolog
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/mps-common.sh"

jobfile=$(mps_job_file "${SLURM_JOB_ID:?}")
[ -r "$jobfile" ] || exit 0
first=$(mps_gpus "${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-}}" | head -n1)
key=$(awk -v g="$first" '$1 == "node" || $1 == g { print $2; exit }' "$jobfile")
[ -n "$key" ] || key=$(awk 'NR == 1 { print $2 }' "$jobfile")
[ -n "$key" ] || exit 0
echo "export CUDA_MPS_PIPE_DIRECTORY=$(mps_pipe_dir "$key")"
echo "export CUDA_MPS_LOG_DIRECTORY=$(mps_log_dir "$key")"
exit 0
