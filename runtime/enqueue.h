/* The enqueue side of the C API on a given runtime: the public functions (hvdsparse.h) call
 * these on the process's runtime; tests call them on runtimes of their own (instance.h). */
#ifndef HVDS_ENQUEUE_H_
#define HVDS_ENQUEUE_H_

#include "state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Validates and queues n tensors of one operation of the given type (hvds_msg_type_t) under one
 * handle; what names the operation in errors ("Allreduce"). outputs: the allreduce's (NULL: in
 * place). Never blocks on communication. On failure records the message, queues nothing. */
hvds_result_t hvds__enqueue(hvds_runtime_t* rt, int32_t type, const char* what, int32_t n,
                            const hvds_tensor_t* inputs, hvds_tensor_t* outputs,
                            const hvds_op_options_t* o, hvds_handle_t* handle);
/* An operation without a tensor (barrier, join, process-set removal: root carries its id) on
 * process set ps, negotiated under name. */
hvds_result_t hvds__enqueue_control(hvds_runtime_t* rt, int32_t type, const char* what,
                                    const char* name, int32_t ps, int32_t root,
                                    hvds_handle_t* handle);

/* ---- the steps every enqueue shares (enqueue_entry.c) ---- */

/* Runtime up, set ps exists and this rank is a member; else records the message (what names
 * the operation) and returns the code. */
hvds_result_t hvds__enqueue_ready(hvds_runtime_t* rt, int32_t ps, const char* what);
/* A new entry for one tensor of the operation o (NULL: defaults); NULL when out of memory. */
hvds_entry_t* hvds__enqueue_entry_new(const char* name, int32_t type, const hvds_op_options_t* o);
/* Appends n entries to their set's queue as one unit under one new handle, and wakes the
 * coordinator; on a duplicate name fails them all and queues none (the caller frees them). */
hvds_result_t hvds__enqueue_submit_all(hvds_runtime_t* rt, hvds_entry_t** es, int32_t n,
                                       hvds_handle_t* handle /* OUT */);
/* hvds__enqueue_submit_all of one entry, which it frees on failure. */
hvds_result_t hvds__enqueue_submit(hvds_runtime_t* rt, hvds_entry_t* e,
                                   hvds_handle_t* handle /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_ENQUEUE_H_ */
