#!/bin/sh
# Open MPI's remote-shell agent for namespace hosts (mpirun --mca plm_rsh_agent THIS): Open MPI
# calls it as `agent HOST COMMAND...`, as it would call ssh, so run the command line in the
# network namespace named like the host, through a shell as sshd would.
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
