/* Validation of one tensor's requests at the set's rank 0: every rank's request is compared with
 * the first, and a disagreement becomes Horovod's error message. Split by message kind: what
 * every kind shares (operation, dtype, device class), what reductions and broadcasts add
 * (shape, scaling, op, root, sparse layout), what gathers add (rank, trailing dimensions), and
 * what one request alone can get wrong (rank-zero tensors, operations Join does not support). */
#ifndef HVDS_VALIDATE_H_
#define HVDS_VALIDATE_H_

#include <stddef.h>

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks rec's requests (one per set rank; reqs[r].name == NULL where rank r has none) on set
 * s. Returns 0 when they agree; else -1 with the message, ending in
 * " [tensor: NAME; ranks A and B]" (global ranks), in err. */
int hvds__validate_requests(const hvds_pset_t* s, const hvds_table_rec_t* rec, char* err,
                            size_t len);

/* Whether an operation of this message type fails while a rank of its set has joined. */
int hvds__join_refuses(int32_t type);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_VALIDATE_H_ */
