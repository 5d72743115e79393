// Ranks as threads for the runtime's own tests: n runtimes opened over one in-process world
// (instance.h: no store, no coordinator thread), each driven by its rank's thread, which queues
// operations and runs the negotiation cycles itself. The runtime needs every rank to run the
// same cycles; Cycle and CycleUntil keep the ranks in step. A rank still running at the deadline
// fails the test, and a rank that failed an assertion releases its peers at once.
#ifndef HVDS_TEST_INSTANCE_RANKS_H_
#define HVDS_TEST_INSTANCE_RANKS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../common/barrier.h"
#include "inproc_p2p.h"
#include "message.h"
#include "param.h"
#include "state.h"

namespace hvds_test {

class InstanceRanks {
 public:
  using RankFn = std::function<void(int rank, hvds_runtime_t* rt)>;

  // Opens n runtimes; they read the knobs (param.h) as set now. sets: static process sets, each
  // a list of global ranks, installed after the global set as ids 1, 2, ...
  explicit InstanceRanks(int n, const std::vector<std::vector<int32_t>>& sets = {});
  // Closes every runtime, then the world.
  ~InstanceRanks();

  // Places the ranks on hosts of equal size, in rank order (n a multiple of hosts): each
  // runtime gets its local and cross groups as views of the world, and with hierarchical the
  // global set's allreduces run as HOROVOD_HIERARCHICAL_ALLREDUCE=1 makes them. Before Run.
  void PlaceOnHosts(int hosts, bool hierarchical);

  // Runs fn on one thread per rank and joins them. A rank still running after deadline_s fails
  // the test: the world's ranks are killed and the barrier broken, so that its peers end.
  void Run(const RankFn& fn, double deadline_s = 20.0);

  // For the rank threads. Waits for every rank.
  void Sync() { barrier_.Wait(); }
  // One negotiation-and-execution cycle of rt (every set it belongs to); every rank runs as many.
  void Cycle(hvds_runtime_t* rt);
  // Runs cycles until done() holds on every rank; false, with a test failure, after limit_s.
  bool CycleUntil(hvds_runtime_t* rt, const std::function<bool()>& done, double limit_s = 10.0);

 private:
  void ReleaseAll();

  int n_;
  std::shared_ptr<InprocWorld> world_;
  std::vector<hvds_p2p_t*> comms_;
  std::vector<std::unique_ptr<hvds_runtime_t>> rts_;
  Barrier barrier_;
};

// A knob for one test: set now, and on destruction every override is dropped (the environment
// re-read). Set it before opening the runtimes that read it.
class KnobOverride {
 public:
  KnobOverride(hvds_param_id_t id, const char* value) { hvds__param_set_str(id, value); }
  ~KnobOverride() { hvds__param_reload(); }
};

// A float32 CPU tensor over v (the product of shape is v.size(); empty shape: 1-D).
hvds_tensor_t Tensor(std::vector<float>& v, const std::vector<int64_t>& shape = {});
// Queues one tensor of operation type (hvds_msg_type_t) under name on rt, in place where the
// operation has an output; fails the test if the runtime refuses it.
hvds_handle_t Submit(hvds_runtime_t* rt, int32_t type, const char* name, hvds_tensor_t t,
                     hvds_op_options_t o = HVDS_OP_OPTIONS_INIT);

// What a handle of rt holds, read without waiting: HVDS_IN_PROGRESS while pending.
struct Outcome {
  hvds_result_t status;
  std::string message;
  int32_t join_rank;
};
Outcome Peek(hvds_runtime_t* rt, hvds_handle_t h);
bool Done(hvds_runtime_t* rt, hvds_handle_t h);

// Queues a join on rt's global set; fails the test if the runtime refuses it.
hvds_handle_t Join(hvds_runtime_t* rt);
// Every rank queues an allreduce of v under name, then runs one cycle, after which the
// allreduce must have succeeded (its handle is released).
void AllreduceInOneCycle(InstanceRanks& ranks, hvds_runtime_t* rt, const char* name,
                         std::vector<float>& v);

// Which paths set s's negotiation took so far: "slow N, cached M" (slow rounds, cache hits).
std::string Paths(const hvds_pset_t* s);
// The cache slot of name in set s, or nullptr.
const hvds_cache_entry_t* Cached(const hvds_pset_t* s, const char* name);

}  // namespace hvds_test

#endif  // HVDS_TEST_INSTANCE_RANKS_H_
