#!/usr/bin/env bash
# One CPU agent on this node, as one Slurm task of infra/slurm/hpcrl-agents.sbatch (or by hand on any host).
# The agent takes this process's CPU set less the first HPCRL_RESERVED_CORES cores (left to the agent's own
# Prefect threads and the system, so timed kernels run on quiet cores) and serves
# floor(cores / HPCRL_CORES_PER_SLOT) slots. SIGTERM or SIGINT (Slurm's at job end, scancel, the time limit)
# is passed to the agent, which stops its task worker and withdraws its heartbeat; after HPCRL_STOP_WAIT_S
# seconds it is killed.
#
# Environment: PREFECT_API_URL, the result-store and AWS_* variables (infra/.env.example, docs/agents.md);
#   HPCRL_BIN (default: hpcrl on PATH), HPCRL_PARAMS (default params.yaml), HPCRL_CORES_PER_SLOT (1),
#   HPCRL_RESERVED_CORES (1), HPCRL_STOP_WAIT_S (60).
# Run: infra/slurm/agent-node.sh   Test: pytest tests/infra (shellcheck, and a stop by SIGTERM with a stub agent).
set -euo pipefail

bin=${HPCRL_BIN:-hpcrl}
params=${HPCRL_PARAMS:-params.yaml}
per_slot=${HPCRL_CORES_PER_SLOT:-1}
reserved=${HPCRL_RESERVED_CORES:-1}
stop_wait=${HPCRL_STOP_WAIT_S:-60}

# this process's CPU set (Slurm's allocation on the node), e.g. "0-3,8-11", as a list of CPU numbers
allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
cpus=()
IFS=, read -ra ranges <<<"$allowed"
for r in "${ranges[@]}"; do
  if [[ $r == *-* ]]; then
    for ((c = ${r%-*}; c <= ${r#*-}; c++)); do cpus+=("$c"); done
  else
    cpus+=("$r")
  fi
done

usable=$((${#cpus[@]} - reserved))
slots=$((usable / per_slot))
if ((slots < 1)); then
  echo "agent-node: ${#cpus[@]} CPU(s) ($allowed) less $reserved reserved leave no slot of $per_slot core(s);" \
    "set HPCRL_RESERVED_CORES or HPCRL_CORES_PER_SLOT lower, or ask Slurm for more cores" >&2
  exit 2
fi
used=("${cpus[@]:reserved:$((slots * per_slot))}")
cores=$(IFS=,; echo "${used[*]}")

echo "agent-node $(hostname): cpus $allowed, reserved $reserved, $slots slot(s) x $per_slot core(s) on $cores"
"$bin" agent --slots "$slots" --cores "$cores" --cores-per-slot "$per_slot" --params "$params" &
agent=$!

# shellcheck disable=SC2317  # reached through the trap below
stop() {
  echo "agent-node $(hostname): stopping agent $agent"
  kill -TERM "$agent" 2>/dev/null || true
  for ((i = 0; i < stop_wait; i++)); do
    kill -0 "$agent" 2>/dev/null || break
    sleep 1
  done
  kill -KILL "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  exit 0
}
trap stop TERM INT

# `wait` returns early when a trapped signal arrives; the trap then stops the agent and exits
status=0
wait "$agent" || status=$?
echo "agent-node $(hostname): agent exited with status $status" >&2
exit "$status"
