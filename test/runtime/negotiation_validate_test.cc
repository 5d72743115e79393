// Validation of every message kind at the set's rank 0 (validate.c): each disagreement between
// two ranks' requests becomes Horovod's message with " [tensor: NAME; ranks A and B]" (global
// ranks), and what one request alone gets wrong ends in " [tensor: NAME]".
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "validate.h"

namespace {

// A request for tensor "t": a float32 CPU allreduce of shape [4] unless a case changes it.
hvds_request_t Request() {
  hvds_request_t r = {};
  r.type = HVDS_MSG_ALLREDUCE;
  r.dtype = HVDS_FLOAT32;
  r.device = -1;
  r.reduce_op = HVDS_SUM;
  r.prescale = r.postscale = 1.0;
  r.ndim = 1;
  r.shape[0] = 4;
  r.name = const_cast<char*>("t");  // validation only reads it
  return r;
}

void SetShape(hvds_request_t& r, std::vector<int64_t> shape) {
  r.ndim = (int32_t)shape.size();
  for (size_t d = 0; d < shape.size(); d++) r.shape[d] = shape[d];
}

// Validates reqs (nullptr: that set rank sent none) on a set of the given global ranks, with
// joined ranks having called join. Returns the message, or "" when they agree.
std::string Validate(std::vector<hvds_request_t*> reqs, std::vector<int32_t> ranks, int joined) {
  std::vector<hvds_request_t> table(reqs.size());
  for (size_t r = 0; r < reqs.size(); r++)
    if (reqs[r]) table[r] = *reqs[r];
  hvds_pset_t s = {};
  s.ranks = ranks.data();
  s.n = (int32_t)ranks.size();
  s.joined_count = joined;
  hvds_table_rec_t rec = {};
  rec.reqs = table.data();
  char err[1024] = "";
  return hvds__validate_requests(&s, &rec, err, sizeof err) == 0 ? "" : err;
}

// One case: two ranks (global 3 and 5) send requests of one kind and shapes, which change
// alters further where it is given.
struct Case {
  const char* id;
  int32_t type;
  std::vector<int64_t> shape_a, shape_b;
  void (*change)(hvds_request_t& a, hvds_request_t& b);
  const char* message;  // "" when the requests agree
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.id; }  // names it in test listings

class NegotiationValidate : public ::testing::TestWithParam<Case> {};

TEST_P(NegotiationValidate, ReportsHorovodsMessage) {
  const Case& c = GetParam();
  hvds_request_t a = Request(), b = Request();
  a.type = b.type = c.type;
  SetShape(a, c.shape_a);
  SetShape(b, c.shape_b);
  if (c.change) c.change(a, b);
  std::string suffix = c.message[0] ? " [tensor: t; ranks 3 and 5]" : "";
  EXPECT_EQ(Validate({&a, &b}, {3, 5}, 0), c.message + suffix);
}

constexpr int32_t kAllreduce = HVDS_MSG_ALLREDUCE, kAllgather = HVDS_MSG_ALLGATHER,
                  kAlltoall = HVDS_MSG_ALLTOALL, kBroadcast = HVDS_MSG_BROADCAST,
                  kReducescatter = HVDS_MSG_REDUCESCATTER, kPsAdd = HVDS_MSG_PS_ADD;

// Process-set registrations of ranks {0, 1} and {0, last}.
void AddSets(hvds_request_t& a, hvds_request_t& b, int32_t last) {
  static int32_t x[] = {0, 1}, y[2];
  y[0] = 0;
  y[1] = last;
  a.extra = x;
  b.extra = y;
  a.nextra = b.nextra = 2;
}

// One case to a paragraph reads better than one field to a line.
// clang-format off
const Case kPairCases[] = {
    {"operation", kAllreduce, {4}, {4},
     [](hvds_request_t&, hvds_request_t& b) { b.type = HVDS_MSG_ALLGATHER; },
     "Mismatched operations: One rank did an ALLREDUCE, but another rank did an ALLGATHER."},
    {"barrier_against_allreduce", kAllreduce, {4}, {4},
     [](hvds_request_t& a, hvds_request_t&) { a.type = HVDS_MSG_BARRIER; },
     "Mismatched operations: One rank did an BARRIER, but another rank did an ALLREDUCE."},
    {"dtype", kAllreduce, {4}, {4},
     [](hvds_request_t&, hvds_request_t& b) { b.dtype = HVDS_INT32; },
     "Mismatched data types: One rank had type FLOAT32, but another rank had type INT32."},
    {"cpu_against_gpu", kAllreduce, {4}, {4},
     [](hvds_request_t&, hvds_request_t& b) { b.device = 0; },
     "Mismatched ALLREDUCE CPU/GPU device selection: One rank specified device CPU, but another "
     "rank specified device GPU."},
    {"gpu_against_cpu_broadcast", kBroadcast, {4}, {4},
     [](hvds_request_t& a, hvds_request_t&) { a.device = 1; },
     "Mismatched BROADCAST CPU/GPU device selection: One rank specified device GPU, but another "
     "rank specified device CPU."},
    // Ranks on different local GPUs is the normal case: only the device class must agree.
    {"gpu0_and_gpu1_agree", kAllreduce, {4}, {4},
     [](hvds_request_t& a, hvds_request_t& b) { a.device = 0, b.device = 1; }, ""},
    {"allreduce_shape", kAllreduce, {4}, {5}, nullptr,
     "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [4], but another rank "
     "sent a tensor of shape [5]."},
    {"allreduce_same_count_other_shape", kAllreduce, {4}, {2, 2}, nullptr,
     "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [4], but another rank "
     "sent a tensor of shape [2, 2]."},
    {"broadcast_shape", kBroadcast, {4}, {4, 1}, nullptr,
     "Mismatched BROADCAST tensor shapes: One rank sent a tensor of shape [4], but another rank "
     "sent a tensor of shape [4, 1]."},
    {"reducescatter_shape", kReducescatter, {6, 2}, {6, 3}, nullptr,
     "Mismatched REDUCESCATTER tensor shapes: One rank sent a tensor of shape [6, 2], but another "
     "rank sent a tensor of shape [6, 3]."},
    {"allgather_rank", kAllgather, {4, 3}, {4}, nullptr,
     "Mismatched ALLGATHER tensor shapes: One rank sent a tensor of rank 2, but another rank sent "
     "a tensor of rank 1."},
    {"allgather_trailing_dimension", kAllgather, {4, 3, 2}, {4, 3, 5}, nullptr,
     "Mismatched ALLGATHER tensor shapes: One rank sent a tensor with dimension 2 equal to 2, but "
     "another rank sent a tensor with dimension 2 equal to 5."},
    {"allgather_first_dimension_may_differ", kAllgather, {4, 3}, {7, 3}, nullptr, ""},
    {"alltoall_rank", kAlltoall, {4}, {4, 1}, nullptr,
     "Mismatched ALLTOALL tensor shapes: One rank sent a tensor of rank 1, but another rank sent "
     "a tensor of rank 2."},
    {"alltoall_trailing_dimension", kAlltoall, {2, 8}, {6, 9}, nullptr,
     "Mismatched ALLTOALL tensor shapes: One rank sent a tensor with dimension 1 equal to 8, but "
     "another rank sent a tensor with dimension 1 equal to 9."},
    {"prescale", kAllreduce, {4}, {4},
     [](hvds_request_t&, hvds_request_t& b) { b.prescale = 2.0; },
     "Mismatched prescale and/or postscale factors: One rank sent factors (1, 1), but another "
     "rank sent factors (2, 1)."},
    {"postscale_reducescatter", kReducescatter, {4}, {4},
     [](hvds_request_t& a, hvds_request_t&) { a.postscale = 0.5; },
     "Mismatched prescale and/or postscale factors: One rank sent factors (1, 0.5), but another "
     "rank sent factors (1, 1)."},
    {"reduce_op", kAllreduce, {4}, {4},
     [](hvds_request_t&, hvds_request_t& b) { b.reduce_op = HVDS_MAX; },
     "Mismatched reduction operation: One rank sent reduction op 1, but another rank sent "
     "reduction op 4."},
    {"broadcast_root", kBroadcast, {4}, {4},
     [](hvds_request_t&, hvds_request_t& b) { b.root_rank = 1; },
     "Mismatched BROADCAST root ranks: One rank specified root rank 3, but another rank specified "
     "root rank 5."},
    {"process_set_add_ranks", kPsAdd, {}, {},
     [](hvds_request_t& a, hvds_request_t& b) { AddSets(a, b, 2); },
     "Different ranks tried to add different process sets."},
    {"process_set_add_same_ranks", kPsAdd, {}, {},
     [](hvds_request_t& a, hvds_request_t& b) { AddSets(a, b, 1); }, ""},
};
// clang-format on

INSTANTIATE_TEST_SUITE_P(Pairs, NegotiationValidate, ::testing::ValuesIn(kPairCases),
                         [](const auto& info) { return std::string(info.param.id); });

// The reference is the first rank that sent a request; the first rank that differs is named.
TEST(NegotiationValidateRanks, NamesTheFirstRankThatDiffers) {
  hvds_request_t a = Request(), b = Request(), c = Request();
  c.dtype = HVDS_FLOAT64;
  EXPECT_EQ(Validate({nullptr, &a, &b, &c}, {0, 2, 4, 6}, 0),
            "Mismatched data types: One rank had type FLOAT32, but another rank had type FLOAT64. "
            "[tensor: t; ranks 2 and 6]");
}

// A rank-zero tensor cannot be gathered or scattered, whatever the other ranks sent.
TEST(NegotiationValidateAlone, RankZeroTensorsForGatherKinds) {
  const std::pair<int32_t, const char*> kinds[] = {{HVDS_MSG_ALLGATHER, "ALLGATHER"},
                                                   {HVDS_MSG_ALLTOALL, "ALLTOALL"},
                                                   {HVDS_MSG_REDUCESCATTER, "REDUCESCATTER"}};
  for (const auto& [type, text] : kinds) {
    hvds_request_t a = Request(), b = Request();
    a.type = b.type = type;
    a.ndim = b.ndim = 0;
    EXPECT_EQ(Validate({&a, &b}, {3, 5}, 0), std::string("Process-set rank zero tried to ") + text +
                                                 " a rank-zero tensor. " + "[tensor: t]");
  }
  hvds_request_t a = Request(), b = Request();
  a.ndim = b.ndim = 0;  // an allreduce of a scalar is fine
  EXPECT_EQ(Validate({&a, &b}, {3, 5}, 0), "");
}

// Once a rank has joined, the operations Join does not support fail with Horovod's words; the
// joined rank sent no request.
TEST(NegotiationValidateAlone, OperationsJoinRefuses) {
  const std::pair<int32_t, const char*> refused[] = {
      {HVDS_MSG_ALLGATHER,
       "Allgather is not supported with Join at this time. Specify sparse_to_dense=True if using "
       "DistributedOptimizer"},
      {HVDS_MSG_ALLTOALL, "Alltoall is not supported with Join at this time."},
      {HVDS_MSG_BROADCAST, "Broadcast is not supported with Join at this time."},
      {HVDS_MSG_REDUCESCATTER, "Reducescatter is not supported with Join at this time."},
  };
  for (const auto& [type, text] : refused) {
    hvds_request_t a = Request();
    a.type = type;
    EXPECT_EQ(Validate({&a, nullptr}, {3, 5}, 1), std::string(text) + " [tensor: t]");
    EXPECT_EQ(Validate({&a, nullptr}, {3, 5}, 0), "") << "refused without a join: " << text;
  }
  hvds_request_t a = Request();  // allreduce: the joined rank contributes zeros
  EXPECT_EQ(Validate({&a, nullptr}, {3, 5}, 1), "");
}

}  // namespace
