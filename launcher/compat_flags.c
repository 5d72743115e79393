/* The tables of compat_flags.h. */
#include "compat_flags.h"

const hvds_compat_flag_t hvds__no_effect_flags[] = {
    {"--mpi", 0, "hvdsparse has no MPI controller; its own coordinator and transports run the job"},
    {"--gloo", 0,
     "the controller is always hvdsparse's own (HVDSPARSE_TRANSPORT=gloo moves the data over "
     "Gloo's pairs)"},
    {"--jsrun", 0, "workers are started by hvdsparse itself (ssh or --rsh), not by jsrun"},
    {"--tcp", 0, "collectives already run over TCP and shared memory only"},
    {"--num-nccl-streams", 1, "the runtime runs no NCCL streams"},
    {"--thread-affinity", 1,
     "the coordinator thread is not pinned on its own (--bind-to binds whole workers)"},
    {"--mpi-threads-disable", 0, "no MPI library is used"},
    {"--no-mpi-threads-disable", 0, "no MPI library is used"},
    {"--mpi-args", 1, "no mpirun is started"},
    {"--binding-args", 1, "no mpirun is started (--bind-to binds workers)"},
    {"--hierarchical-allgather", 0, "allgather has no hierarchical variant here"},
    {"--no-hierarchical-allgather", 0, "allgather has no hierarchical variant here"},
    {"--torus-allreduce", 0, "torus allreduce is an NCCL variant; GPU tensors do not run here yet"},
    {"--no-torus-allreduce", 0,
     "torus allreduce is an NCCL variant; GPU tensors do not run here yet"},
    {"--disable-cache", 0, "nothing to disable: no host checks are cached between runs"},
};
const int hvds__no_effect_flag_count =
    (int)(sizeof(hvds__no_effect_flags) / sizeof(hvds__no_effect_flags[0]));
