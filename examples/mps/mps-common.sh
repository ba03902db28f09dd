# Shared functions of the MPS Prolog, Epilog and TaskProlog examples.
# Sourced, never run.  See README.md in this directory.
#
# Settings: put any of these in $MPS_CONF (default /etc/slurm/mps.conf) as
# shell assignments; slurmd runs Prolog and Epilog with the job's variables
# only, not with its own environment.
#
#   MPS_CONTROL       the control program        (nvidia-cuda-mps-control)
#   MPS_STATE_DIR     what the scripts remember   (/run/slurm-mps)
#   MPS_PIPE_BASE     daemon pipe dirs: <base>_<key>      (/tmp/nvidia-mps)
#   MPS_LOG_BASE      daemon log dirs:  <base>_<key>      (/var/log/nvidia-mps)
#   MPS_QUIT_TIMEOUT  seconds a daemon gets to quit       (10)
#   MPS_ON_REFUSAL    "fail" (the script fails: slurmd drains the node and
#                     requeues the job) or "continue"     (fail)
#   MPS_LOG_FILE      log file besides syslog   ($MPS_STATE_DIR/mps.log)
#
# A daemon is known by a key: the GPU for gres/mps jobs ("gpu<N>", shared
# by every MPS job on that GPU), "job<ID>" or "job<ID>.gpu<N>" for whole-GPU
# jobs that asked for MPS in their comment.

: "${MPS_CONF:=/etc/slurm/mps.conf}"
# shellcheck disable=SC1090
[ -r "$MPS_CONF" ] && . "$MPS_CONF"
: "${MPS_CONTROL:=nvidia-cuda-mps-control}"
: "${MPS_STATE_DIR:=/run/slurm-mps}"
: "${MPS_PIPE_BASE:=/tmp/nvidia-mps}"
: "${MPS_LOG_BASE:=/var/log/nvidia-mps}"
: "${MPS_QUIT_TIMEOUT:=10}"
: "${MPS_ON_REFUSAL:=fail}"
: "${MPS_LOG_FILE:=$MPS_STATE_DIR/mps.log}"

# Prolog and Epilog (root) keep state; a TaskProlog (the job's user) only reads.
mps_init_state() {
	mkdir -p "$MPS_STATE_DIR" || exit 1
}

mps_log() {
	local line
	line="$(date '+%Y-%m-%dT%H:%M:%S') ${MPS_SCRIPT:-mps} job ${SLURM_JOB_ID:-?}: $*"
	printf '%s\n' "$line" >>"$MPS_LOG_FILE" 2>/dev/null
	logger -t slurm-mps -- "${MPS_SCRIPT:-mps} job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null
	return 0
}

# The GPUs of $1 (a comma-separated list such as CUDA_VISIBLE_DEVICES),
# one per line.  In Prolog and Epilog these are the node's GPU numbers (or
# MIG UUIDs), not the job's renumbered ones.
mps_gpus() {
	printf '%s\n' "$1" | tr ',' '\n' | sed '/^$/d'
}

mps_pipe_dir() { printf '%s_%s\n' "$MPS_PIPE_BASE" "$1"; }
mps_log_dir() { printf '%s_%s\n' "$MPS_LOG_BASE" "$1"; }
mps_state_file() { printf '%s/daemon.%s\n' "$MPS_STATE_DIR" "$1"; }

# PIDs of the MPS processes (control daemon and servers) that use pipe
# directory $1: their command name starts with "nvidia-cuda-mps" and their
# environment names that directory.
mps_daemon_pids() {
	local want="CUDA_MPS_PIPE_DIRECTORY=$1" p comm
	for p in /proc/[0-9]*; do
		comm=$(cat "$p/comm" 2>/dev/null) || continue
		case "$comm" in nvidia-cuda-mps*) ;; *) continue ;; esac
		# (a process may end while we look; a zombie has no environment)
		if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF -- "$want"; then
			printf '%s\n' "${p#/proc/}"
		fi
	done
}

# Talk to the control daemon of key $1: the commands on stdin.
mps_command() {
	CUDA_MPS_PIPE_DIRECTORY="$(mps_pipe_dir "$1")" \
		CUDA_MPS_LOG_DIRECTORY="$(mps_log_dir "$1")" \
		"$MPS_CONTROL"
}

# Run "$@" holding the lock of key $1 (Prologs of jobs sharing a GPU may
# run at the same time).
mps_locked() {
	local key=$1
	shift
	(
		flock -w 60 9 || { mps_log "could not lock MPS state of $key"; exit 1; }
		"$@"
	) 9>"$MPS_STATE_DIR/lock.$key"
}

# Start the control daemon of key $1 on devices $2 (a CUDA_VISIBLE_DEVICES
# value in node numbering) unless it runs, then ask it for a server for
# user $3.  Its pipe and log directories are private to the key.
mps_start() {
	local key=$1 devices=$2 uid=$3 pipe log
	pipe=$(mps_pipe_dir "$key")
	log=$(mps_log_dir "$key")
	mkdir -p "$pipe" "$log" || return 1
	if [ -n "$(mps_daemon_pids "$pipe")" ]; then
		mps_log "MPS control daemon $key already running (devices $devices)"
	else
		# The daemon must see the node's GPUs numbered as Slurm and NVML
		# number them; it must hold neither slurmd's pipes nor our lock, and
		# outlive this script (slurmd kills the Prolog's process group).
		if ! setsid -w env CUDA_VISIBLE_DEVICES="$devices" CUDA_DEVICE_ORDER=PCI_BUS_ID \
			CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_LOG_DIRECTORY="$log" \
			"$MPS_CONTROL" -d </dev/null >/dev/null 2>&1 9>&-; then
			mps_log "MPS control daemon $key (devices $devices) failed to start"
			return 1
		fi
		mps_log "MPS control daemon $key started on devices $devices (pipe $pipe, log $log)"
	fi
	{
		echo "key=$key"
		echo "devices=$devices"
		echo "pipe=$pipe"
		echo "log=$log"
	} >"$(mps_state_file "$key")"
	if [ -n "$uid" ]; then
		if echo "start_server -uid $uid" | mps_command "$key" >/dev/null 2>&1; then
			mps_log "MPS server for uid $uid requested from $key"
		else
			mps_log "MPS control daemon $key did not take start_server for uid $uid"
		fi
	fi
	return 0
}

# Stop the control daemon of key $1 (and its servers) if it runs.  Returns
# 1 when it is still running after MPS_QUIT_TIMEOUT seconds.
mps_stop() {
	local key=$1 pipe pids waited=0
	pipe=$(mps_pipe_dir "$key")
	pids=$(mps_daemon_pids "$pipe")
	if [ -z "$pids" ]; then
		rm -f "$(mps_state_file "$key")"
		return 0
	fi
	echo quit | mps_command "$key" >/dev/null 2>&1
	while [ -n "$(mps_daemon_pids "$pipe")" ]; do
		if [ "$waited" -ge $((MPS_QUIT_TIMEOUT * 10)) ]; then
			mps_log "MPS control daemon $key refuses to quit (pids $(mps_daemon_pids "$pipe" | tr '\n' ' '))"
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	rm -f "$(mps_state_file "$key")"
	mps_log "MPS control daemon $key stopped"
	return 0
}

# Where a job finds its daemon: "<gpu> <key>" lines, or one "node <key>".
mps_job_file() { printf '%s/job.%s\n' "$MPS_STATE_DIR" "$1"; }

# What to do when a daemon would not quit.
mps_refused() {
	if [ "$MPS_ON_REFUSAL" = continue ]; then
		mps_log "continuing although an MPS daemon would not quit (MPS_ON_REFUSAL=continue)"
		return 0
	fi
	mps_log "failing: an MPS daemon would not quit (set MPS_ON_REFUSAL=continue to go on)"
	return 1
}
