// Rendezvous store: wire format round trips and rejections, client-server behaviour over
// loopback, waiting GETs, authentication, many concurrent clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fault_cause.h"
#include "store.h"
#include "store_proto.h"

namespace {

const char* kSecret = "0123456789abcdef0123456789abcdef";

std::vector<uint8_t> Encode(const hvds_store_msg_t& m) {
  hvds_store_buf_t buf = {};
  EXPECT_EQ(hvds__store_encode(&m, &buf), HVDS_SUCCESS);
  std::vector<uint8_t> out(buf.data, buf.data + buf.len);
  hvds__store_buf_free(&buf);
  return out;
}

// Decodes a whole frame (header included).
hvds_result_t DecodeFrame(const std::vector<uint8_t>& f, hvds_store_msg_t* m) {
  size_t frame_len = 0;
  hvds_result_t rc = hvds__store_frame_peek(f.data(), f.size(), HVDS_STORE_MAX_FRAME, &frame_len);
  if (rc != HVDS_SUCCESS) return rc;
  if (frame_len != f.size()) return HVDS_INTERNAL_ERROR;
  return hvds__store_decode(f.data() + HVDS_STORE_HEADER, frame_len - HVDS_STORE_HEADER, m);
}

hvds_store_msg_t Msg(hvds_store_msg_type_t type, const std::string& key = "",
                     const std::string& val = "", int64_t num = 0) {
  hvds_store_msg_t m = {};
  m.type = type;
  m.key = key.empty() ? nullptr : strdup(key.c_str());
  m.key_len = key.size();
  if (!val.empty()) {
    void* copy = malloc(val.size());
    memcpy(copy, val.data(), val.size());
    m.val = copy;
  }
  m.val_len = val.size();
  m.num = num;
  return m;
}

void FreeMsg(hvds_store_msg_t* m) {
  free(const_cast<char*>(m->key));
  free(const_cast<void*>(m->val));
}

TEST(StoreProto, RoundTripEveryType) {
  struct Case {
    hvds_store_msg_type_t type;
    std::string key, val;
    int64_t num;
  } cases[] = {
      {HVDS_STORE_MSG_HELLO, kSecret, "", 0},
      {HVDS_STORE_MSG_OK, "", "", 0},
      {HVDS_STORE_MSG_DENIED, "", "", 0},
      {HVDS_STORE_MSG_SET, "rank/0/addr", std::string("a\0b", 3), 0},
      {HVDS_STORE_MSG_SET, "empty", "", 0},
      {HVDS_STORE_MSG_GET, "k", "", -1},
      {HVDS_STORE_MSG_GET, "k", "", 123456},
      {HVDS_STORE_MSG_VALUE, "", "payload", 0},
      {HVDS_STORE_MSG_NOTFOUND, "", "", 0},
      {HVDS_STORE_MSG_ADD, "counter", "", -5},
      {HVDS_STORE_MSG_INT, "", "", INT64_MIN},
      {HVDS_STORE_MSG_INT, "", "", INT64_MAX},
      {HVDS_STORE_MSG_DELETE_PREFIX, "hvds/job/", "", 0},
      {HVDS_STORE_MSG_ERROR, "store full", "", 0},
  };
  for (const Case& c : cases) {
    hvds_store_msg_t in = Msg(c.type, c.key, c.val, c.num);
    std::vector<uint8_t> frame = Encode(in);
    hvds_store_msg_t out;
    ASSERT_EQ(DecodeFrame(frame, &out), HVDS_SUCCESS) << "type " << c.type;
    EXPECT_EQ(out.type, c.type);
    EXPECT_EQ(std::string(out.key ? out.key : "", out.key_len), c.key);
    EXPECT_EQ(std::string(out.val ? static_cast<const char*>(out.val) : "", out.val_len), c.val);
    EXPECT_EQ(out.num, c.num);
    FreeMsg(&in);
  }
}

TEST(StoreProto, TruncatedFramesNeedMoreOrFail) {
  hvds_store_msg_t in = Msg(HVDS_STORE_MSG_SET, "key", "value");
  std::vector<uint8_t> frame = Encode(in);
  FreeMsg(&in);
  size_t frame_len;
  for (size_t n = 0; n < frame.size(); n++) {
    EXPECT_EQ(hvds__store_frame_peek(frame.data(), n, HVDS_STORE_MAX_FRAME, &frame_len),
              HVDS_IN_PROGRESS)
        << n;
  }
  // A body cut short but declared complete must not decode.
  for (size_t n = 1; n < frame.size() - HVDS_STORE_HEADER; n++) {
    hvds_store_msg_t out;
    EXPECT_EQ(hvds__store_decode(frame.data() + HVDS_STORE_HEADER, n, &out),
              HVDS_INVALID_ARGUMENT)
        << n;
  }
}

TEST(StoreProto, OversizedDeclarationRejectedBeforeBody) {
  uint8_t header[4] = {0xff, 0xff, 0xff, 0xff};
  size_t frame_len;
  EXPECT_EQ(hvds__store_frame_peek(header, 4, HVDS_STORE_MAX_FRAME, &frame_len),
            HVDS_INVALID_ARGUMENT);
  uint8_t zero[4] = {0, 0, 0, 0};
  EXPECT_EQ(hvds__store_frame_peek(zero, 4, HVDS_STORE_MAX_FRAME, &frame_len),
            HVDS_INVALID_ARGUMENT);
  uint8_t small[4] = {0, 0, 0x10, 0};
  EXPECT_EQ(hvds__store_frame_peek(small, 4, 100, &frame_len), HVDS_INVALID_ARGUMENT);
}

TEST(StoreProto, OverLimitFieldsRejected) {
  std::string long_key(HVDS_STORE_MAX_KEY + 1, 'k');
  hvds_store_msg_t m = Msg(HVDS_STORE_MSG_SET, long_key, "v");
  hvds_store_buf_t buf = {};
  EXPECT_EQ(hvds__store_encode(&m, &buf), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(buf.len, 0u);
  FreeMsg(&m);
  // Hand-built frame: SET whose key length field claims 2 KiB.
  uint8_t body[] = {HVDS_STORE_MSG_SET, 0, 0, 0x08, 0, 'k'};
  hvds_store_msg_t out;
  EXPECT_EQ(hvds__store_decode(body, sizeof(body), &out), HVDS_INVALID_ARGUMENT);
  // Value length field above 64 MiB.
  uint8_t body2[] = {HVDS_STORE_MSG_SET, 0, 0, 0, 1, 'k', 0x10, 0, 0, 0};
  EXPECT_EQ(hvds__store_decode(body2, sizeof(body2), &out), HVDS_INVALID_ARGUMENT);
  hvds_store_msg_t big = {};
  big.type = HVDS_STORE_MSG_VALUE;
  big.val = "x";
  big.val_len = (size_t)HVDS_STORE_MAX_VALUE + 1;
  EXPECT_EQ(hvds__store_encode(&big, &buf), HVDS_INVALID_ARGUMENT);
  hvds__store_buf_free(&buf);
}

TEST(StoreProto, GarbageRejected) {
  hvds_store_msg_t out;
  uint8_t unknown[] = {0x7f};
  EXPECT_EQ(hvds__store_decode(unknown, 1, &out), HVDS_INVALID_ARGUMENT);
  uint8_t trailing[] = {HVDS_STORE_MSG_OK, 0};
  EXPECT_EQ(hvds__store_decode(trailing, 2, &out), HVDS_INVALID_ARGUMENT);
  uint8_t nul_key[] = {HVDS_STORE_MSG_DELETE_PREFIX, 0, 0, 0, 2, 'a', 0};
  EXPECT_EQ(hvds__store_decode(nul_key, sizeof(nul_key), &out), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__store_decode(unknown, 0, &out), HVDS_INVALID_ARGUMENT);
  // Random bytes never crash the decoder and never decode to something out of bounds.
  srand(7);
  std::vector<uint8_t> junk(64);
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = 1 + rand() % junk.size();
    for (size_t i = 0; i < n; i++) junk[i] = static_cast<uint8_t>(rand());
    if (rand() % 2) junk[0] = static_cast<uint8_t>(1 + rand() % 11);
    if (hvds__store_decode(junk.data(), n, &out) == HVDS_SUCCESS) {
      if (out.key) {
        EXPECT_LE(out.key + out.key_len, (const char*)junk.data() + n);
      }
      if (out.val) {
        EXPECT_LE((const uint8_t*)out.val + out.val_len, junk.data() + n);
      }
    }
  }
}

// A client of the store on this machine's port, past its handshake (nullptr, with a failure
// recorded, if not).
hvds_store_t* ConnectTo(int port, const char* secret = kSecret) {
  hvds_store_t* s = nullptr;
  char err[256];
  EXPECT_EQ(hvds__store_connect("127.0.0.1", port, secret, 5000, &s, err, sizeof(err)),
            HVDS_SUCCESS)
      << err;
  return s;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(hvds__store_server_start("127.0.0.1", 0, kSecret, &srv_, &port_), HVDS_SUCCESS);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { hvds__store_server_stop(srv_); }

  hvds_store_t* Connect(const char* secret = kSecret) { return ConnectTo(port_, secret); }

  static std::string Get(hvds_store_t* s, const char* key, int timeout_ms, hvds_result_t* rc) {
    void* val = nullptr;
    size_t len = 0;
    *rc = hvds__store_get(s, key, timeout_ms, &val, &len);
    std::string out(val ? static_cast<char*>(val) : "", len);
    free(val);
    return out;
  }

  hvds_store_server_t* srv_ = nullptr;
  int port_ = 0;
};

TEST_F(StoreTest, SetGetOverwriteBinary) {
  hvds_store_t* s = Connect();
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(hvds__store_set(s, "a", "one", 3), HVDS_SUCCESS);
  hvds_result_t rc;
  EXPECT_EQ(Get(s, "a", 0, &rc), "one");
  EXPECT_EQ(rc, HVDS_SUCCESS);
  ASSERT_EQ(hvds__store_set(s, "a", "\0two", 4), HVDS_SUCCESS);
  EXPECT_EQ(Get(s, "a", 0, &rc), std::string("\0two", 4));
  ASSERT_EQ(hvds__store_set(s, "empty", "", 0), HVDS_SUCCESS);
  EXPECT_EQ(Get(s, "empty", 0, &rc), "");
  EXPECT_EQ(rc, HVDS_SUCCESS);
  Get(s, "missing", 0, &rc);
  EXPECT_EQ(rc, HVDS_TIMEOUT);
  std::string big(3 << 20, 'z');
  big[12345] = 'q';
  ASSERT_EQ(hvds__store_set(s, "big", big.data(), big.size()), HVDS_SUCCESS);
  EXPECT_EQ(Get(s, "big", 0, &rc), big);
  std::string long_key(HVDS_STORE_MAX_KEY + 1, 'k');
  EXPECT_EQ(hvds__store_set(s, long_key.c_str(), "v", 1), HVDS_INVALID_ARGUMENT);
  hvds__store_close(s);
}

TEST_F(StoreTest, GetWaitTimesOut) {
  hvds_store_t* s = Connect();
  auto t0 = std::chrono::steady_clock::now();
  hvds_result_t rc;
  Get(s, "never", 200, &rc);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - t0)
                .count();
  EXPECT_EQ(rc, HVDS_TIMEOUT);
  EXPECT_GE(ms, 190);
  EXPECT_LT(ms, 3000);
  // The connection is still usable afterwards.
  EXPECT_EQ(hvds__store_set(s, "x", "1", 1), HVDS_SUCCESS);
  hvds__store_close(s);
}

TEST_F(StoreTest, GetWokenBySetFromAnotherClient) {
  hvds_store_t* waiter = Connect();
  hvds_store_t* setter = Connect();
  std::atomic<bool> done{false};
  std::string got;
  hvds_result_t rc = HVDS_INTERNAL_ERROR;
  auto t0 = std::chrono::steady_clock::now();
  std::thread t([&] {
    got = Get(waiter, "late", 10000, &rc);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(done.load());
  ASSERT_EQ(hvds__store_set(setter, "late", "here", 4), HVDS_SUCCESS);
  t.join();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - t0)
                .count();
  EXPECT_EQ(rc, HVDS_SUCCESS);
  EXPECT_EQ(got, "here");
  EXPECT_LT(ms, 2000);  // woken by the set, not by the 10 s wait expiring
  hvds__store_close(waiter);
  hvds__store_close(setter);
}

TEST_F(StoreTest, GetWokenByInProcessSet) {
  hvds_store_t* s = Connect();
  hvds_result_t rc = HVDS_INTERNAL_ERROR;
  std::string got;
  std::thread t([&] { got = Get(s, "hvds/job/failed", 10000, &rc); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(hvds__store_server_set(srv_, "hvds/job/failed", "rank 1", 6), HVDS_SUCCESS);
  t.join();
  EXPECT_EQ(rc, HVDS_SUCCESS);
  EXPECT_EQ(got, "rank 1");
  hvds__store_close(s);
}

TEST_F(StoreTest, AddAndDeletePrefix) {
  hvds_store_t* s = Connect();
  int64_t v = 0;
  ASSERT_EQ(hvds__store_add(s, "n", 5, &v), HVDS_SUCCESS);
  EXPECT_EQ(v, 5);
  ASSERT_EQ(hvds__store_add(s, "n", -7, &v), HVDS_SUCCESS);
  EXPECT_EQ(v, -2);
  hvds_result_t rc;
  EXPECT_EQ(Get(s, "n", 0, &rc), "-2");
  ASSERT_EQ(hvds__store_set(s, "text", "abc", 3), HVDS_SUCCESS);
  EXPECT_EQ(hvds__store_add(s, "text", 1, &v), HVDS_INVALID_ARGUMENT);
  ASSERT_EQ(hvds__store_set(s, "job/a", "1", 1), HVDS_SUCCESS);
  ASSERT_EQ(hvds__store_set(s, "job/b", "2", 1), HVDS_SUCCESS);
  ASSERT_EQ(hvds__store_set(s, "jobx", "3", 1), HVDS_SUCCESS);
  ASSERT_EQ(hvds__store_delete_prefix(s, "job/"), HVDS_SUCCESS);
  Get(s, "job/a", 0, &rc);
  EXPECT_EQ(rc, HVDS_TIMEOUT);
  Get(s, "job/b", 0, &rc);
  EXPECT_EQ(rc, HVDS_TIMEOUT);
  EXPECT_EQ(Get(s, "jobx", 0, &rc), "3");
  hvds__store_close(s);
}

TEST_F(StoreTest, WrongSecretRefusedAndCounted) {
  hvds_store_t* s = nullptr;
  char err[256];
  EXPECT_EQ(hvds__store_connect("127.0.0.1", port_, "not-the-secret", 2000, &s, err, sizeof(err)),
            HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(err).find("secret"), std::string::npos);
  EXPECT_EQ(hvds__store_server_refused(srv_), 1);
  // A raw connection whose first frame is not HELLO is refused as well.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port_));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  hvds_store_msg_t m = Msg(HVDS_STORE_MSG_SET, "k", "v");
  std::vector<uint8_t> frame = Encode(m);
  FreeMsg(&m);
  ASSERT_EQ(write(fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  uint8_t buf[64];
  ssize_t n = read(fd, buf, sizeof(buf));  // DENIED, then EOF
  EXPECT_GE(n, 5);
  if (n >= 5) {
    EXPECT_EQ(buf[4], HVDS_STORE_MSG_DENIED);
  }
  close(fd);
  // A huge declared length before HELLO is refused without waiting for the body.
  fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff};
  ASSERT_EQ(write(fd, huge, 4), 4);
  n = read(fd, buf, sizeof(buf));
  EXPECT_GE(n, 5);
  close(fd);
  EXPECT_EQ(hvds__store_server_refused(srv_), 3);
  // The right secret still works.
  hvds_store_t* ok = Connect();
  EXPECT_NE(ok, nullptr);
  hvds__store_close(ok);
}

TEST_F(StoreTest, ConnectRetriesUntilServerAppears) {
  // Find a free port, then start a second server on it only after the client began retrying.
  hvds_store_server_t* probe = nullptr;
  int port = 0;
  ASSERT_EQ(hvds__store_server_start("127.0.0.1", 0, kSecret, &probe, &port), HVDS_SUCCESS);
  hvds__store_server_stop(probe);
  hvds_store_server_t* late = nullptr;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int p2 = 0;
    EXPECT_EQ(hvds__store_server_start("127.0.0.1", port, kSecret, &late, &p2), HVDS_SUCCESS);
  });
  hvds_store_t* s = nullptr;
  char err[256];
  hvds_result_t rc = hvds__store_connect("127.0.0.1", port, kSecret, 5000, &s, err, sizeof(err));
  starter.join();
  EXPECT_EQ(rc, HVDS_SUCCESS) << err;
  hvds__store_close(s);
  hvds__store_server_stop(late);
  // Nobody listening: times out.
  rc = hvds__store_connect("127.0.0.1", port, kSecret, 300, &s, err, sizeof(err));
  EXPECT_EQ(rc, HVDS_TIMEOUT);
}

TEST_F(StoreTest, ManyConcurrentClients) {
  const int kClients = 32;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < kClients; r++) {
    threads.emplace_back([&, r] {
      hvds_store_t* s = nullptr;
      char err[256];
      if (hvds__store_connect("127.0.0.1", port_, kSecret, 5000, &s, err, sizeof(err)) !=
          HVDS_SUCCESS) {
        failures++;
        return;
      }
      std::string key = "rank/" + std::to_string(r);
      std::string val = "addr-" + std::to_string(r);
      if (hvds__store_set(s, key.c_str(), val.data(), val.size()) != HVDS_SUCCESS) failures++;
      int64_t n = 0;
      if (hvds__store_add(s, "arrived", 1, &n) != HVDS_SUCCESS) failures++;
      // Every client reads every other client's key, waiting for late ones.
      for (int peer = 0; peer < kClients; peer++) {
        std::string pk = "rank/" + std::to_string(peer);
        hvds_result_t rc;
        std::string got = Get(s, pk.c_str(), 10000, &rc);
        if (rc != HVDS_SUCCESS || got != "addr-" + std::to_string(peer)) failures++;
      }
      hvds__store_close(s);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  hvds_store_t* s = Connect();
  hvds_result_t rc;
  EXPECT_EQ(Get(s, "arrived", 0, &rc), std::to_string(kClients));
  hvds__store_close(s);
}

TEST_F(StoreTest, ClientDisconnectWhileWaiting) {
  // A raw client authenticates, parks a GET that waits forever, and vanishes.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port_));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  hvds_store_msg_t hello = Msg(HVDS_STORE_MSG_HELLO, kSecret);
  hvds_store_msg_t get = Msg(HVDS_STORE_MSG_GET, "never", "", -1);
  std::vector<uint8_t> a = Encode(hello), b = Encode(get);
  FreeMsg(&hello);
  FreeMsg(&get);
  a.insert(a.end(), b.begin(), b.end());
  ASSERT_EQ(write(fd, a.data(), a.size()), static_cast<ssize_t>(a.size()));
  uint8_t buf[16];
  ASSERT_EQ(read(fd, buf, sizeof(buf)), 5);  // OK for the HELLO
  EXPECT_EQ(buf[4], HVDS_STORE_MSG_OK);
  close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  hvds_store_t* s2 = Connect();
  EXPECT_EQ(hvds__store_set(s2, "never", "1", 1), HVDS_SUCCESS);
  hvds_result_t rc;
  EXPECT_EQ(Get(s2, "never", 0, &rc), "1");
  hvds__store_close(s2);
}

// A store that accepts one client, answers its HELLO and then never answers again.
class MuteStore {
 public:
  MuteStore() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    socklen_t len = sizeof(sa);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] {
      fd_ = accept(listen_fd_, nullptr, nullptr);
      uint8_t buf[256];
      if (fd_ < 0 || read(fd_, buf, sizeof(buf)) <= 0) return;  // the HELLO
      hvds_store_msg_t ok = Msg(HVDS_STORE_MSG_OK);
      std::vector<uint8_t> reply = Encode(ok);
      FreeMsg(&ok);
      EXPECT_EQ(write(fd_, reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
    });
  }
  ~MuteStore() {
    thread_.join();
    if (fd_ >= 0) close(fd_);
    close(listen_fd_);
  }
  int port() const { return port_; }
  // A client of this store, past its handshake (nullptr, with a failure recorded, if not).
  hvds_store_t* Client() const { return ConnectTo(port_); }

 private:
  int listen_fd_ = -1, fd_ = -1, port_ = 0;
  std::thread thread_;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(StoreTimeouts, AnUnansweredRequestTimesOutAndBreaksTheConnection) {
  MuteStore mute;
  hvds_store_t* s = mute.Client();
  ASSERT_NE(s, nullptr);
  auto start = std::chrono::steady_clock::now();
  int64_t n = 0;
  EXPECT_EQ(hvds__store_add_within(s, "count", 1, &n, 300), HVDS_TIMEOUT);
  double took = SecondsSince(start);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 5.0);
  // A late reply would answer the next request: the connection is given up instead.
  ASSERT_NE(hvds__store_lost(s), nullptr);
  EXPECT_NE(std::string(hvds__store_lost(s)).find("did not answer"), std::string::npos);
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(hvds__store_set_within(s, "k", "v", 1, -1), HVDS_SYSTEM_ERROR);
  EXPECT_LT(SecondsSince(start), 0.1);  // at once, even without a deadline
  hvds__store_close(s);
}

// A rank whose communication failed reports through the store and follows the other ranks'
// reports; with a store that stopped answering as well (its host cut off), the report gives up
// after one unanswered request (2 s) and the rank still fails, with no root cause, instead of
// hanging in its first request.
TEST(StoreTimeouts, AFaultReportDoesNotHangOnAMuteStore) {
  MuteStore mute;
  hvds_store_t* s = mute.Client();
  ASSERT_NE(s, nullptr);
  auto start = std::chrono::steady_clock::now();
  char out[512] = "x";
  hvds__fault_root_cause(s, "job", 0, /*rank=*/1, /*size=*/4, /*peer=*/0, HVDS_TIMEOUT,
                         "hvds/job/failed", out, sizeof(out));
  double took = SecondsSince(start);
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 10.0);
  EXPECT_STREQ(out, "");
  EXPECT_NE(hvds__store_lost(s), nullptr);
  hvds__store_close(s);
}

// A rank that timed out waiting for a peer that never reports names it as unresponsive, in the
// root cause and in "hvds/<job>/silent", where an elastic launcher looks for workers to end.
TEST_F(StoreTest, AFaultReportMarksTheRankItTimedOutOnAsSilent) {
  hvds_store_t* s = Connect();
  ASSERT_NE(s, nullptr);
  char out[512] = "";
  hvds__fault_root_cause(s, "job.e2", 2, /*rank=*/1, /*size=*/4, /*peer=*/2, HVDS_TIMEOUT,
                         "hvds/job.e2/failed", out, sizeof(out));
  EXPECT_NE(strstr(out, "rank 2 stopped responding"), nullptr) << out;
  char silent[16] = "";
  ASSERT_EQ(hvds__store_server_get(srv_, "hvds/job.e2/silent", silent, sizeof(silent)), 1);
  EXPECT_STREQ(silent, "2");
  hvds__store_close(s);
}

// A peer that died (the launcher recorded its exit) is not marked silent: nothing to end.
TEST_F(StoreTest, AFaultReportDoesNotMarkARankThatExited) {
  hvds_store_t* s = Connect();
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(hvds__store_set(s, "hvds/job/failed", "rank 2 exited with signal 9", 27), HVDS_SUCCESS);
  char out[512] = "";
  hvds__fault_root_cause(s, "job", 0, /*rank=*/1, /*size=*/4, /*peer=*/2, HVDS_TIMEOUT,
                         "hvds/job/failed", out, sizeof(out));
  EXPECT_NE(strstr(out, "rank 2 exited with signal 9"), nullptr) << out;
  char silent[16] = "";
  EXPECT_EQ(hvds__store_server_get(srv_, "hvds/job/silent", silent, sizeof(silent)), 0);
  hvds__store_close(s);
}

TEST_F(StoreTest, BoundedGetWaitsAndGivesUpLikeGet) {
  hvds_store_t* s = Connect();
  void* val = nullptr;
  size_t len = 0;
  EXPECT_EQ(hvds__store_get_within(s, "absent", 50, 1000, &val, &len), HVDS_TIMEOUT);
  EXPECT_EQ(hvds__store_lost(s), nullptr);  // the server answered "not found" in time
  ASSERT_EQ(hvds__store_set(s, "k", "v", 1), HVDS_SUCCESS);
  ASSERT_EQ(hvds__store_get_within(s, "k", 0, 1000, &val, &len), HVDS_SUCCESS);
  EXPECT_EQ(std::string(static_cast<char*>(val), len), "v");
  free(val);
  hvds__store_close(s);
}

TEST_F(StoreTest, BoundedRequestsWorkLikeTheOthers) {
  hvds_store_t* s = Connect();
  int64_t n = 0;
  EXPECT_EQ(hvds__store_add_within(s, "c", 2, &n, 1000), HVDS_SUCCESS);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(hvds__store_set_within(s, "k", "v", 1, 1000), HVDS_SUCCESS);
  hvds_result_t rc;
  EXPECT_EQ(Get(s, "k", 0, &rc), "v");
  EXPECT_EQ(rc, HVDS_SUCCESS);
  EXPECT_EQ(hvds__store_lost(s), nullptr);
  hvds__store_close(s);
}

}  // namespace
