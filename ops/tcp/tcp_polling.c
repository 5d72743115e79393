/* The tcp transport's polling (tcp_polling.h). Polling beats sleeping only while no rank of
 * this machine waits for a core. Hosts named apart can still share one machine (network
 * namespaces, containers of one node), so the ranks that share this kernel count too (bootstrap
 * counts them by boot id with the host exchange), while a container's CPU quota bounds the
 * ranks of one host name (cpu_budget.h). */
#include "tcp_polling.h"

int hvds__tcp_poll_us(long long knob, int local_ranks, int machine_ranks, long cores,
                      long machine_cores) {
  if (knob >= 0) return knob > 1000000 ? 1000000 : (int)knob;
  if (machine_cores < cores) machine_cores = cores;  // the quota never adds cores
  return local_ranks <= cores && machine_ranks <= machine_cores ? 50 : 0;
}
