/* Slurm's compressed host lists, e.g. "node[01-04,07],gpu[1-2]-ib", read one host at a time. */
#ifndef HVDS_SLURM_NODELIST_H_
#define HVDS_SLURM_NODELIST_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes host number index (from 0, in Slurm's order: comma-separated entries left to right,
 * within an entry the last bracket varies fastest) of list to out. Numbers keep the width of the
 * range's first bound ("[01-10]" gives "01" .. "10"). Returns 0, or -1 when index is past the
 * end, the list is malformed, or the host does not fit in len; out is then "". Pure. */
int hvds__slurm_nodelist_host(const char* list, int index, char* out /* OUT */, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SLURM_NODELIST_H_ */
