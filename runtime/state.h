/* The runtime and the records it owns: tensor entries, handles, process sets. Internal code
 * takes the runtime it works on (a process set reaches it through s->rt); only the public C API
 * names the process's runtime, hvds__rt. Tests run several runtimes in one process, ranks as
 * threads over an in-process transport.
 * Every field says which thread writes it. "coord" is the cycle's owner: the coordinator thread,
 * or a caller that runs the cycle while it waits (cycle.h); "any" means any thread under the
 * lock named. */
#ifndef HVDS_STATE_H_
#define HVDS_STATE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "atomics.h"
#include "clock.h"
#include "hvdsparse.h"
#include "message.h"
#include "name_map.h"
#include "response_cache.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hvds_p2p;
struct hvds_store;
struct hvds_timeline;
struct hvds_sparse_out;
struct hvds_staging;

#define HVDS_MAX_PROCESS_SETS 256

typedef struct hvds_handle_rec hvds_handle_rec_t;

/* One tensor submitted by the framework (Horovod's TensorTableEntry). */
typedef struct hvds_entry {
  char* name;                 /* negotiation key: name_buf, or its own allocation when longer */
  char name_buf[48];
  int32_t type;               /* hvds_msg_type_t */
  hvds_tensor_t input;        /* caller's memory */
  hvds_tensor_t output;       /* allreduce: caller's output view (may alias input) */
  hvds_reduce_op_t op;
  double prescale, postscale;
  int32_t root_rank;          /* set-relative */
  int32_t* splits;            /* alltoall, owned; NULL = equal split */
  int32_t nsplits;
  int32_t* ps_ranks;          /* PS_ADD: ranks of the new set, owned */
  int32_t ps_nranks;
  hvds_sparse_tensor_t sparse; /* SPARSE_ALLREDUCE: the caller's entries (caller's memory) */
  int32_t sparse_meta[4]; /* SPARSE_ALLREDUCE: format, index dtype, algorithm, quantization bits
                             (the request's extra, HVDS_SPARSE_META_*) */
  int32_t sparse_dense_out;   /* SPARSE_ALLREDUCE: the result goes densely to output */
  hvds_alloc_fn alloc;
  void* alloc_ctx;
  int32_t process_set;
  struct hvds_staging* staging; /* a GPU tensor's host copies (device_staging.h), owned; or NULL */
  void* ready_event;            /* a routed GPU tensor's ready event (device_route.h), owned */
  hvds_handle_rec_t* handle;  /* completion target */
  int32_t index;              /* position within the handle's outputs */
  double enqueue_time;        /* seconds, monotonic */
  uint64_t seq;               /* this rank's submission order: the slow path asks in it */
  int sent;                   /* coord: request sent to the set's coordinator */
  int ordered;                /* runs in the ordered fast lane (lane.h) */
  int lane_warned;            /* coord: the lane's stall warning was given */
  struct hvds_entry* lane_next; /* coord: the set's lane, in submission order */
  struct hvds_entry* next;    /* queue link */
} hvds_entry_t;

/* What hvds_wait() waits on. Guarded by rt->hmu. */
struct hvds_handle_rec {
  hvds_handle_t id;
  int32_t n;                  /* entries */
  int32_t remaining;          /* entries not yet completed */
  int done;
  int released;               /* the caller forgot it; free at completion */
  hvds_result_t status;       /* first failure wins */
  char* message;
  hvds_tensor_t* outputs;     /* n entries: results (allgather, alltoall, reducescatter) */
  void** owned;               /* n entries: runtime-allocated output memory, freed at release */
  int32_t* recv_splits;       /* alltoall */
  int32_t nrecv_splits;
  int32_t join_rank;          /* join: last rank that joined */
  int32_t result_int;         /* process-set add: the new id */
  struct hvds_sparse_out* sparse; /* sparse allreduce: result and statistics (execute_sparse.c) */
  void* gpu_work;     /* completed at launch: an event of its GPU work (device_completion.h) */
  int32_t gpu_device; /* that work's GPU */
};

/* Per-rank bookkeeping of a tensor at the set's coordinator (Horovod's message table). */
typedef struct {
  hvds_request_t* reqs;       /* one per set rank; reqs[r].name == NULL until rank r asked */
  int32_t count;
  double first_seen;
  int32_t warned;
} hvds_table_rec_t;

typedef struct hvds_pset {
  struct hvds_runtime* rt; /* the runtime this set belongs to */
  int32_t id;
  int32_t* ranks;             /* global ranks, sorted */
  int32_t n;
  int32_t my_rank;            /* rank within the set, -1 if not a member */
  struct hvds_p2p* comm;      /* coord: NULL when not a member */
  uint64_t tag_seq;           /* coord: next tag; identical on every member */
  /* Guarded by rt->qmu: */
  hvds_entry_t* q_head;
  hvds_entry_t* q_tail;
  hvds_name_map_t inflight;   /* names queued or pending -> entry (duplicate detection) */
  int marked_removed;
  /* The cycle's owner only (the coordinator, or a caller running the cycle: cycle.h): */
  hvds_name_map_t pending;    /* popped entries awaiting a response: name -> entry */
  hvds_cache_t cache;
  struct hvds_entry** bit_entry; /* cache slot -> this rank's entry with a hit, this cycle */
  struct hvds_entry* lane_head;  /* ordered entries not yet run, oldest first (lane.h) */
  struct hvds_entry* lane_tail;
  uint64_t lane_done;            /* ordered operations run so far */
  hvds_name_map_t table;      /* set rank 0: name -> hvds_table_rec_t* */
  hvds_name_map_t sparse_memory; /* sparse allreduce name -> hvds_sparse_memory_t* learned
                                    from its steps (sparse_memory.h) */
  int joined;                 /* this rank called join and awaits the JOIN response */
  hvds_entry_t* join_entry;
  int32_t* joined_ranks;      /* set rank 0: 1 per rank that joined */
  int32_t joined_count;
  int32_t last_joined;
  double last_stall_check;
  int busy_anywhere;          /* coord: some member had work in the last cycle */
  int all_stuck;              /* coord: every member was stuck (stall.h) in the last cycle */
  uint64_t slow_rounds;       /* coord: cycles that took the slow path (requests to rank 0) */
  uint64_t cache_hits;        /* coord: tensors the fast path ran from the response cache */
  void* device_comm;          /* coord: the NCCL route's communicator (device_route.h), or NULL */
} hvds_pset_t;

typedef struct hvds_runtime {
  pthread_mutex_t life_mu;       /* any: serializes init and shutdown */
  HVDS_ATOMIC(int) initialized;       /* init/shutdown */
  HVDS_ATOMIC(int) shut_down;         /* coord: loop ended; enqueue fails after this */
  HVDS_ATOMIC(int) shutdown_requested;/* any: ask every rank to stop */
  int generation;                /* init: count of inits in this process; an elastic job's
                                    membership epoch (elastic_join.h) */
  int64_t elastic_epoch;         /* init: the elastic membership joined last; 0 before, kept
                                    across shutdown */
  pid_t owner_pid;               /* init: the process that ran init; a process forked from it
                                    holds a copy of this state, not the runtime (forked copy) */

  int rank, size, local_rank, local_size, cross_rank, cross_size, homogeneous; /* init */
  int machine_ranks; /* init: ranks on this machine's kernel (one boot id); 0 when unknown */
  char job[128];                 /* init: key prefix in the store */
  struct hvds_store* store;      /* init; then coord (fault reports) */
  struct hvds_p2p* world;        /* init; then coord */
  struct hvds_p2p* local;        /* init: ranks on this host */
  struct hvds_p2p* cross;        /* init: ranks with this local rank */
  pthread_t thread;
  struct hvds_launch_store* self_served; /* init: the store rank 0 serves itself under mpirun,
                                            srun or torchrun (launch_store.h); NULL otherwise */
  int64_t start_deadline_ms;     /* init: start-up ends by then (HVDSPARSE_START_TIMEOUT) */
  int bootstrap_failed;          /* init: the last start failed; rank 0's store lingers briefly */
  int started; /* init: an instance's coordinator thread runs (instance.c) */

  pthread_mutex_t qmu;           /* guards queues, psets table, wakeups */
  pthread_cond_t qcv;            /* signalled on enqueue and shutdown request */
  int wake;                      /* qmu: new work since the coordinator last looked */
  uint64_t enqueued;             /* qmu (atomic reads without): operations queued so far */
  uint64_t entries_queued;       /* qmu: entries queued so far (numbers each entry's seq) */
  int coord_sleeping;            /* qmu: the coordinator waits on qcv */
  int coord_bell_sleeping;       /* qmu: the coordinator waits on the world doorbell */
  int coord_sleeps_forever;      /* qmu: its wait on qcv has no deadline */
  int cycle_owned;               /* qmu: a thread runs a cycle or sleeps on the doorbell; the
                                    fields marked "coord" belong to that thread meanwhile */
  int cycle_result;              /* qmu: sticky end of the loop (1 stop, -1 failure) */
  double last_cycle_start;       /* cycle owner: when the latest cycle began */
  struct {                       /* cycle owner: a cycle a caller left unfinished (cycle.c) */
    hvds_response_t* resps;      /* the rest of set_id's responses, from next on */
    int32_t n, next, set_id;
    double tuned_bytes;          /* the cycle's allreduce bytes, for autotune */
  } rest;
  int rest_pending;              /* atomic: rest holds operations for the next owner */
  int caller_runs;               /* init: waiting callers may run cycles themselves */
  int sparse_learn_costs;        /* init: the sparse selector corrects its model by past runs */
  hvds_pset_t* psets[HVDS_MAX_PROCESS_SETS]; /* index = id; written under qmu by the cycle's
                                                owner, which alone reads it without qmu */
  int32_t next_ps_id;            /* coord */
  HVDS_ATOMIC(int) ps_change_seq; /* any: numbers the process-set changes' names */

  pthread_mutex_t hmu;           /* guards the handle table and every handle record */
  pthread_cond_t hcv;            /* broadcast on every completion */
  int waiters;                   /* hmu: threads blocked in hvds_wait() */
  double wait_end;               /* hmu: when a blocking wait last returned */
  double blocked_since;          /* hmu: when this process last started to wait */
  double last_completion;        /* hmu: when an operation of this process last finished */
  double deadlock_s;             /* init: stuck seconds that end a deadlock; 0 never (stall.h) */
  hvds_handle_rec_t** handles;   /* slot table; id = generation << 32 | (slot + 1) */
  uint32_t* handle_gen;
  size_t handle_cap;
  size_t* free_slots;
  size_t nfree;

  void* fusion_buf;              /* coord: reused across cycles */
  void* device_context;          /* coord: the NCCL route's GPU context (device_route.h) */
  int device_index;              /* coord: its GPU */
  void* device_hier_comm;        /* coord: the route's hierarchical pair (HIERARCHICAL_ALLREDUCE) */
  size_t fusion_cap;
  struct hvds_timeline* timeline;/* coord */
  int mark_cycles;               /* coord */
  char* timeline_request;        /* qmu: path to start (or "" to stop), taken by coord */
  int timeline_request_marks;
  int timeline_pending;          /* qmu: a request is waiting */

  struct hvds_autotune* autotune; /* coord: Horovod's autotune (autotune.c); NULL when off */
  double cycle_ms;               /* coord, written under qmu: read there by any thread */
  double spin_us;                /* coord: polling before sleeping between cycles */
  int coord_priority;            /* hvds_priority_mode_t of the coordinator thread */
  int coord_priority_pending;    /* a mode a binding preferred since init; -1 when none */
  int coord_level;               /* atomic: its thread_priority.h level, lent to callers */
  int allreduce_algo;            /* init: hvds_algo_t forced by the knob, or 0 (auto) */
  long long rhd_max_bytes;       /* init: largest halving-doubling allreduce; < 0 the default */
  long long ring_chunk_bytes;    /* init: forced ring segment, or 0 */
  double stall_check_s;          /* init: stall warning time */
  int stall_check_disabled;      /* init */
  int idle_sleep_cycles;         /* coord: idle cycles before sleeping on the doorbell; 0 never */
  int due_again;                 /* coord: the next cycle is due at once (cycle.c) */
  int empty_rounds;              /* coord: consecutive cycles that ran nothing while this rank waited
                                    for its peers to agree (cycle.c: due_again) */
  int idle_cycles;               /* coord: consecutive cycles in which no rank had work (the same
                                    count on every rank: it comes from the global set's flags) */
  uint64_t world_epoch;          /* coord: global cycles run; stamps doorbell rings */
  int64_t fusion_threshold;      /* coord */
  double net_alpha;              /* init: seconds per message, rank 0's measurement (net_probe.c) */
  double net_beta;               /* init: seconds per byte, rank 0's measurement */
  double net_beta_loaded;        /* init: the same with every rank sending at once (the sparse
                                    cost model's; hvds__load_probe) */
  double work_gamma;             /* init: seconds per sparse entry step, rank 0's (work_probe.h) */
  double work_hash;              /* init: seconds per keyed hash, rank 0's */
  double work_qenc, work_qdec;   /* init: seconds to quantize / decode one value */
  double net_round;              /* init: seconds per synchronizing round beyond alpha */
  uint64_t zen_seed;             /* init: ZEN's hash key, rank 0's */
  int sparse_algo;               /* init: hvds_sparse_algo_t from HVDSPARSE_SPARSE_ALGORITHM */
  int sparse_detect;             /* init: HVDSPARSE_SPARSE_DETECT */
  int sparse_pack;               /* init: hvds_sparse_opts_t.pack_indices from
                                    HVDSPARSE_SPARSE_PACK_INDICES */
  int hier_mode;                 /* init: hvds_hier_mode_t, how the global allreduce runs */
  double hier_cost[4];           /* init: alpha, beta of the local then cross links (s, s/byte),
                                    identical on every rank (hierarchy.c) */
  char fatal[1024];              /* coord: why the runtime stopped (root cause first) */
  char stop_reason[512];         /* any: why this rank stops (hvds_set_shutdown_reason) */
} hvds_runtime_t;

/* The process's runtime: the one the public C API (hvdsparse.h) works on. */
extern hvds_runtime_t hvds__rt;

/* Wakes the coordinator for local work, a stop or a timeline change. Call with rt->qmu held. */
void hvds__coord_wake_locked(hvds_runtime_t* rt);
/* For an operation just queued by a thread whose previous operation it ran itself (it waited
 * and ran the cycle): marks the work and wakes the coordinator only if its sleep has no
 * deadline, since that thread will most likely wait and run the cycle again; a wake-up costs two
 * context switches, which on a host with fewer cores than ranks is a large part of a small
 * operation. Otherwise as hvds__coord_wake_locked. Call with rt->qmu held. */
void hvds__coord_wake_lazy_locked(hvds_runtime_t* rt);

/* Whether the caller's options struct is long enough to hold field (older callers pass a
 * smaller size: the field then takes its default). */
#define OPT_HAS(o, field) ((o)->size >= offsetof(hvds_op_options_t, field) + sizeof((o)->field))

/* 1 in a process forked after init (a data loader's worker, a plain fork): its copy of the
 * runtime has no coordinator thread, and its connections and shared memory belong to the parent,
 * so it must neither run, wait for nor stop anything. Queries (rank, size) still answer. */
int hvds__forked_copy(hvds_runtime_t* rt);
/* Init: makes this process the runtime's owner (owner_pid) and keeps its pid for the question. */
void hvds__forked_copy_own(hvds_runtime_t* rt);
/* Records why an operation of such a process cannot run; returns HVDS_INVALID_USAGE. */
hvds_result_t hvds__forked_error(hvds_runtime_t* rt, const char* what);
/* Records the message of a failed API call for hvds_last_error(); returns rc. */
hvds_result_t hvds__set_error(hvds_result_t rc, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif /* HVDS_STATE_H_ */
