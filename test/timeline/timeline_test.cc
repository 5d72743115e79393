// Timeline tests: the file is valid Chrome-trace JSON after open, while the writer runs, after
// close and after a write error; Horovod's event names and metadata are present.
#include "timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

// ---- A small strict JSON parser (RFC 8259 grammar), enough to check the trace. ----

struct Json {
  enum Kind { kNull, kBool, kNum, kStr, kArr, kObj } kind = kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;

  const Json* Get(const std::string& key) const {
    for (const auto& kv : obj)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  std::string Str(const std::string& key) const {
    const Json* v = Get(key);
    return v && v->kind == kStr ? v->str : std::string("<none>");
  }
  double Num(const std::string& key) const {
    const Json* v = Get(key);
    return v && v->kind == kNum ? v->num : -1;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}

  // Parses the whole text; on failure returns false and describes where in *err.
  bool Parse(Json* out, std::string* err) {
    Ws();
    bool ok = Value(out, 0);
    Ws();
    if (ok && pos_ != s_.size()) ok = Fail("trailing data");
    if (!ok)
      *err = err_ + " at offset " + std::to_string(pos_) + " of " + std::to_string(s_.size());
    return ok;
  }

 private:
  bool Fail(const char* what) {
    if (err_.empty()) err_ = what;
    return false;
  }
  void Ws() {
    while (pos_ < s_.size() && strchr(" \t\r\n", s_[pos_]) && s_[pos_]) pos_++;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  bool Literal(const char* word) {
    size_t n = strlen(word);
    if (s_.compare(pos_, n, word) != 0) return Fail("bad literal");
    pos_ += n;
    return true;
  }
  bool Value(Json* v, int depth) {
    if (depth > 64) return Fail("too deep");
    if (pos_ >= s_.size()) return Fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->kind = Json::kStr;
      return String(&v->str);
    }
    if (c == 't' || c == 'f') {
      v->kind = Json::kBool;
      v->b = c == 't';
      return Literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') return Literal("null");
    v->kind = Json::kNum;
    return Number(&v->num);
  }
  bool Object(Json* v, int depth) {
    v->kind = Json::kObj;
    pos_++;
    Ws();
    if (Eat('}')) return true;
    for (;;) {
      std::pair<std::string, Json> kv;
      Ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Fail("expected key");
      if (!String(&kv.first)) return false;
      Ws();
      if (!Eat(':')) return Fail("expected ':'");
      Ws();
      if (!Value(&kv.second, depth + 1)) return false;
      v->obj.push_back(std::move(kv));
      Ws();
      if (Eat('}')) return true;
      if (!Eat(',')) return Fail("expected ',' or '}'");
    }
  }
  bool Array(Json* v, int depth) {
    v->kind = Json::kArr;
    pos_++;
    Ws();
    if (Eat(']')) return true;
    for (;;) {
      Ws();
      v->arr.emplace_back();
      if (!Value(&v->arr.back(), depth + 1)) return false;
      Ws();
      if (Eat(']')) return true;
      if (!Eat(',')) return Fail("expected ',' or ']'");
    }
  }
  static void PutUtf8(std::string* out, unsigned cp) {
    if (cp < 0x80) {
      *out += (char)cp;
    } else if (cp < 0x800) {
      *out += (char)(0xc0 | (cp >> 6));
      *out += (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      *out += (char)(0xe0 | (cp >> 12));
      *out += (char)(0x80 | ((cp >> 6) & 0x3f));
      *out += (char)(0x80 | (cp & 0x3f));
    } else {
      *out += (char)(0xf0 | (cp >> 18));
      *out += (char)(0x80 | ((cp >> 12) & 0x3f));
      *out += (char)(0x80 | ((cp >> 6) & 0x3f));
      *out += (char)(0x80 | (cp & 0x3f));
    }
  }
  bool Hex4(unsigned* cp) {
    if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
    *cp = 0;
    for (int i = 0; i < 4; i++) {
      char c = s_[pos_++];
      *cp <<= 4;
      if (c >= '0' && c <= '9')
        *cp |= c - '0';
      else if (c >= 'a' && c <= 'f')
        *cp |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        *cp |= c - 'A' + 10;
      else
        return Fail("bad hex digit");
    }
    return true;
  }
  bool String(std::string* out) {
    pos_++;  // opening quote
    for (;;) {
      if (pos_ >= s_.size()) return Fail("unterminated string");
      unsigned char c = s_[pos_++];
      if (c == '"') return true;
      if (c < 0x20) return Fail("raw control character in string");
      if (c != '\\') {
        *out += (char)c;
        continue;
      }
      if (pos_ >= s_.size()) return Fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          unsigned cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00) {
            unsigned lo;
            if (!Eat('\\') || !Eat('u') || !Hex4(&lo) || lo < 0xdc00 || lo > 0xdfff)
              return Fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          PutUtf8(out, cp);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
  }
  bool Digits() {
    size_t start = pos_;
    while (pos_ < s_.size() && isdigit((unsigned char)s_[pos_])) pos_++;
    return pos_ > start;
  }
  bool Number(double* num) {
    size_t start = pos_;
    Eat('-');
    if (Eat('0')) {
    } else if (!Digits()) {
      return Fail("bad value");
    }
    if (Eat('.') && !Digits()) return Fail("bad fraction");
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      pos_++;
      if (!Eat('+')) Eat('-');
      if (!Digits()) return Fail("bad exponent");
    }
    *num = strtod(s_.substr(start, pos_ - start).c_str(), nullptr);
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string err_;
};

bool ParseJson(const std::string& text, Json* out, std::string* err) {
  *out = Json();
  return JsonParser(text).Parse(out, err);
}

// Reads the whole file. With shared_lock, holds flock(LOCK_SH) as the writer's flushes hold
// LOCK_EX, so the read sees the state between two flushes.
std::string ReadFile(const std::string& path, bool shared_lock = false) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string();
  if (shared_lock) flock(fd, LOCK_SH);
  std::string data(1 << 20, '\0');
  size_t len = 0;
  for (;;) {
    if (len == data.size()) data.resize(data.size() * 2);
    ssize_t n = read(fd, &data[len], data.size() - len);
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);  // drops the lock
  data.resize(len);
  return data;
}

// Parses the file and checks it is a trace array; reports the tail of the text on failure.
::testing::AssertionResult LoadTrace(const std::string& path, Json* trace,
                                     bool shared_lock = false) {
  std::string text = ReadFile(path, shared_lock);
  std::string err;
  *trace = Json();
  if (!ParseJson(text, trace, &err)) {
    return ::testing::AssertionFailure()
           << "invalid JSON in " << path << ": " << err
           << "; tail: " << text.substr(text.size() > 200 ? text.size() - 200 : 0);
  }
  if (trace->kind != Json::kArr) return ::testing::AssertionFailure() << "not an array";
  for (const Json& ev : trace->arr) {
    if (ev.kind != Json::kObj) return ::testing::AssertionFailure() << "element not an object";
  }
  return ::testing::AssertionSuccess();
}

// Events of one pid in file order.
std::vector<const Json*> EventsOf(const Json& trace, int pid) {
  std::vector<const Json*> out;
  for (const Json& ev : trace.arr)
    if (ev.Num("pid") == pid && ev.Str("ph") != "M") out.push_back(&ev);
  return out;
}

// The pid whose process_name metadata names the tensor, or -1.
int PidOf(const Json& trace, const std::string& tensor) {
  for (const Json& ev : trace.arr) {
    const Json* args = ev.Get("args");
    if (ev.Str("name") == "process_name" && ev.Str("ph") == "M" && args &&
        args->Str("name") == tensor)
      return (int)ev.Num("pid");
  }
  return -1;
}

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hvds_timeline_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
    dir_ = tmpl;
    path_ = dir_ + "/timeline.json";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  hvds_timeline_t* Open(int mark_cycles) {
    hvds_timeline_t* tl = nullptr;
    char err[256] = "";
    hvds_result_t rc = hvds__timeline_open(path_.c_str(), mark_cycles, &tl, err, sizeof(err));
    EXPECT_EQ(rc, HVDS_SUCCESS) << err;
    return tl;
  }

  std::string dir_;
  std::string path_;
};

// One tensor's whole life, as the coordinator reports it.
void ReportAllreduce(hvds_timeline_t* tl, const char* name, int ranks) {
  hvds__timeline_negotiate_start(tl, name, "ALLREDUCE");
  for (int r = 0; r < ranks; r++) hvds__timeline_negotiate_rank_ready(tl, name, r);
  hvds__timeline_negotiate_end(tl, name);
  hvds__timeline_start(tl, name, "ALLREDUCE", "{\"algorithm\":\"ring\"}");
  hvds__timeline_activity_start(tl, name, "MEMCPY_IN_FUSION_BUFFER");
  hvds__timeline_activity_end(tl, name);
  hvds__timeline_activity_start(tl, name, "GLOO_ALLREDUCE");
  hvds__timeline_activity_end(tl, name);
  hvds__timeline_end(tl, name, "FLOAT32", "[3, 4]");
}

TEST(TimelineJsonParser, RejectsWhatUsersReported) {
  Json j;
  std::string err;
  EXPECT_FALSE(ParseJson("[", &j, &err));
  EXPECT_FALSE(ParseJson("[{\"a\":1},", &j, &err));
  EXPECT_FALSE(ParseJson("[{\"a\":\"x\ny\"}]", &j, &err));
  EXPECT_FALSE(ParseJson("[1] ,", &j, &err));
  EXPECT_FALSE(ParseJson("", &j, &err));
  ASSERT_TRUE(ParseJson("[{\"a\":\"q\\\"\\u00e9\"}, -1.5e3, true, null]\n", &j, &err)) << err;
  EXPECT_EQ(j.arr[0].Str("a"), "q\"\xc3\xa9");
}

TEST_F(TimelineTest, ValidRightAfterOpenWithStartTime) {
  hvds_timeline_t* tl = Open(0);
  ASSERT_NE(tl, nullptr);
  Json trace;
  ASSERT_TRUE(LoadTrace(path_, &trace));
  ASSERT_GE(trace.arr.size(), 2u);
  const Json& first = trace.arr[0];
  EXPECT_EQ(first.Str("name"), "process_name");
  EXPECT_EQ(first.Str("ph"), "M");
  EXPECT_EQ(first.Num("pid"), 0);
  ASSERT_NE(first.Get("args"), nullptr);
  double start = first.Get("args")->Num("start_time_since_epoch_in_micros");
  double now = (double)std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  EXPECT_GT(start, now - 60e6);
  EXPECT_LE(start, now + 1e6);
  EXPECT_EQ(trace.arr[1].Str("name"), "process_sort_index");
  hvds__timeline_close(tl);
  ASSERT_TRUE(LoadTrace(path_, &trace));
  EXPECT_EQ(trace.arr.size(), 2u);
}

TEST_F(TimelineTest, HorovodEventsAndMetadata) {
  hvds_timeline_t* tl = Open(1);
  ASSERT_NE(tl, nullptr);
  hvds__timeline_mark_cycle(tl);
  ReportAllreduce(tl, "allreduce.test_allreduce", 3);
  hvds__timeline_mark_cycle(tl);
  ReportAllreduce(tl, "allreduce.second", 2);

  // Flushed by the writer's timer, before close.
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  Json trace;
  ASSERT_TRUE(LoadTrace(path_, &trace));
  EXPECT_GT(trace.arr.size(), 20u);
  hvds__timeline_close(tl);
  ASSERT_TRUE(LoadTrace(path_, &trace));

  int pid = PidOf(trace, "allreduce.test_allreduce");
  EXPECT_EQ(pid, 1);
  EXPECT_EQ(PidOf(trace, "allreduce.second"), 2);
  bool sort_index = false;
  int cycles = 0;
  for (const Json& ev : trace.arr) {
    if (ev.Str("name") == "process_sort_index" && ev.Num("pid") == pid)
      sort_index = ev.Get("args") && ev.Get("args")->Num("sort_index") == pid;
    if (ev.Str("name") == "CYCLE_START") {
      cycles++;
      EXPECT_EQ(ev.Str("ph"), "i");
      EXPECT_EQ(ev.Str("s"), "g");
      EXPECT_GE(ev.Num("ts"), 0);
    }
  }
  EXPECT_TRUE(sort_index);
  EXPECT_EQ(cycles, 2);

  std::vector<const Json*> evs = EventsOf(trace, pid);
  std::vector<std::string> seq;
  for (const Json* ev : evs) seq.push_back(ev->Str("ph") + ":" + ev->Str("name"));
  std::vector<std::string> want = {"B:NEGOTIATE_ALLREDUCE",
                                   "X:0",
                                   "X:1",
                                   "X:2",
                                   "E:<none>",
                                   "B:ALLREDUCE",
                                   "B:MEMCPY_IN_FUSION_BUFFER",
                                   "E:<none>",
                                   "B:GLOO_ALLREDUCE",
                                   "E:<none>",
                                   "E:<none>"};
  EXPECT_EQ(seq, want);
  ASSERT_EQ(evs.size(), want.size());
  double last_ts = 0;
  for (const Json* ev : evs) {
    EXPECT_GE(ev->Num("ts"), last_ts);
    last_ts = ev->Num("ts");
  }
  EXPECT_EQ(evs[1]->Num("dur"), 0);
  ASSERT_NE(evs[5]->Get("args"), nullptr);
  EXPECT_EQ(evs[5]->Get("args")->Str("algorithm"), "ring");
  const Json* final_args = evs.back()->Get("args");
  ASSERT_NE(final_args, nullptr);
  EXPECT_EQ(final_args->Str("dtype"), "FLOAT32");
  EXPECT_EQ(final_args->Str("shape"), "[3, 4]");
  EXPECT_EQ(hvds__timeline_dropped(nullptr), 0);
}

TEST_F(TimelineTest, NoCycleMarksUnlessAsked) {
  hvds_timeline_t* tl = Open(0);
  ASSERT_NE(tl, nullptr);
  hvds__timeline_mark_cycle(tl);
  ReportAllreduce(tl, "t", 1);
  hvds__timeline_close(tl);
  std::string text = ReadFile(path_);
  EXPECT_EQ(text.find("CYCLE_START"), std::string::npos);
  EXPECT_NE(text.find("NEGOTIATE_ALLREDUCE"), std::string::npos);
}

TEST_F(TimelineTest, EscapesTensorNames) {
  hvds_timeline_t* tl = Open(0);
  ASSERT_NE(tl, nullptr);
  const std::string names[] = {"say \"hi\"", "back\\slash", "line\nbreak\ttab",
                               std::string("ctl\x01\x1f", 5), "caf\xc3\xa9 \xe2\x82\xac"};
  for (const std::string& n : names) ReportAllreduce(tl, n.c_str(), 1);
  ReportAllreduce(tl, "bad\xff utf8", 1);
  hvds__timeline_close(tl);
  Json trace;
  ASSERT_TRUE(LoadTrace(path_, &trace));
  int pid = 1;
  for (const std::string& n : names) EXPECT_EQ(PidOf(trace, n), pid++) << n;
  EXPECT_EQ(PidOf(trace, "bad\xef\xbf\xbd utf8"), pid);
  EXPECT_NE(ReadFile(path_).find("say \\\"hi\\\""), std::string::npos);
}

// Reports tensors like a coordinator until stopped: a cycle of ten tensors (about 9 KiB of
// events), then a pause of pause_us.
class Producer {
 public:
  Producer(hvds_timeline_t* tl, int pause_us)
      : thread_([this, tl, pause_us] {
          for (int i = 0; !done_.load(); i++) {
            std::string name = "grad/" + std::to_string(i % 50) + "/\"w\"";
            if (i % 10 == 0) hvds__timeline_mark_cycle(tl);
            ReportAllreduce(tl, name.c_str(), 4);
            if (i % 10 == 9) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
          }
        }) {}
  ~Producer() { Stop(); }
  void Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Readers that take a shared flock see a complete array at every moment, even with the
// writer flushing every 2 KiB as fast as it can.
TEST_F(TimelineTest, ValidAtEveryMomentForLockingReaders) {
  hvds_timeline_t* tl = Open(1);
  ASSERT_NE(tl, nullptr);
  hvds__timeline_set_limits(tl, 2048, 0);  // a flush per cycle
  Producer producer(tl, 3000);
  int reads = 0;
  size_t last_events = 0, grew = 0;
  // 1.5 s and at least 11 reads (a sanitizer build reads slowly), 30 s at the most.
  auto start = std::chrono::steady_clock::now();
  auto end = start + std::chrono::milliseconds(1500), cap = start + std::chrono::seconds(30);
  while ((std::chrono::steady_clock::now() < end || reads <= 10) &&
         std::chrono::steady_clock::now() < cap) {
    Json trace;
    ASSERT_TRUE(LoadTrace(path_, &trace, true)) << "after " << reads << " good reads";
    EXPECT_GE(trace.arr.size(), last_events);
    grew += trace.arr.size() > last_events;
    last_events = trace.arr.size();
    reads++;
  }
  producer.Stop();
  hvds__timeline_close(tl);
  Json trace;
  ASSERT_TRUE(LoadTrace(path_, &trace));
  EXPECT_GE(trace.arr.size(), last_events);
  EXPECT_GT(reads, 10);
  EXPECT_GT(grew, 3u) << "the file should grow while it is read";
}

// A plain reader (python's json.load, a viewer) takes no lock. It can catch a flush half
// written (the kernel does not make a buffered read atomic against a write), but with the
// default settings a flush takes microseconds every 100 ms and the file is complete again
// right after it: a torn read must parse when read again a moment later.
TEST_F(TimelineTest, ValidBetweenFlushesForPlainReaders) {
  hvds_timeline_t* tl = Open(1);
  ASSERT_NE(tl, nullptr);
  Producer producer(tl, 1000);
  int reads = 0, torn = 0;
  size_t last_events = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
  while (std::chrono::steady_clock::now() < end) {
    Json trace;
    ::testing::AssertionResult ok = LoadTrace(path_, &trace);
    if (!ok) {
      torn++;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ASSERT_TRUE(LoadTrace(path_, &trace))
          << "still invalid after a retry; first: " << ok.message();
    }
    EXPECT_GE(trace.arr.size(), last_events);
    last_events = trace.arr.size();
    reads++;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  producer.Stop();
  hvds__timeline_close(tl);
  Json trace;
  ASSERT_TRUE(LoadTrace(path_, &trace));
  EXPECT_GT(last_events, 100u);
  EXPECT_LE(torn * 20, reads) << torn << " of " << reads << " reads caught a flush";
  RecordProperty("torn_reads", torn);
  RecordProperty("reads", reads);
}

TEST_F(TimelineTest, DirectoryPathFailsClearly) {
  hvds_timeline_t* tl = reinterpret_cast<hvds_timeline_t*>(0x1);
  char err[256] = "";
  EXPECT_EQ(hvds__timeline_open(dir_.c_str(), 0, &tl, err, sizeof(err)), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(tl, nullptr);
  EXPECT_NE(strstr(err, "is a directory"), nullptr) << err;
  EXPECT_NE(strstr(err, dir_.c_str()), nullptr) << err;
}

TEST_F(TimelineTest, UnwritablePathFailsClearly) {
  hvds_timeline_t* tl = nullptr;
  char err[256] = "";
  std::string bad = dir_ + "/missing/timeline.json";
  EXPECT_EQ(hvds__timeline_open(bad.c_str(), 0, &tl, err, sizeof(err)), HVDS_SYSTEM_ERROR);
  EXPECT_EQ(tl, nullptr);
  EXPECT_NE(strstr(err, bad.c_str()), nullptr) << err;
  EXPECT_NE(strstr(err, strerror(ENOENT)), nullptr) << err;
  EXPECT_EQ(hvds__timeline_open("", 0, &tl, err, sizeof(err)), HVDS_INVALID_ARGUMENT);
  EXPECT_EQ(hvds__timeline_open(nullptr, 0, &tl, nullptr, 0), HVDS_INVALID_ARGUMENT);
}

TEST_F(TimelineTest, NullTimelineIsANoOp) {
  ReportAllreduce(nullptr, "x", 2);
  hvds__timeline_mark_cycle(nullptr);
  hvds__timeline_close(nullptr);
  EXPECT_EQ(hvds__timeline_dropped(nullptr), 0);
}

TEST_F(TimelineTest, MemoryCapDropsAndCounts) {
  hvds_timeline_t* tl = Open(0);
  ASSERT_NE(tl, nullptr);
  hvds__timeline_set_limits(tl, size_t(1) << 30, 4096);  // only the timer flushes
  const int kEvents = 20000;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < kEvents; i++) hvds__timeline_negotiate_rank_ready(tl, "capped", i);
  int dropped = hvds__timeline_dropped(tl);
  hvds__timeline_close(tl);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(dropped, 0);
  EXPECT_NE(log.find("cannot keep up"), std::string::npos) << log;
  Json trace;
  ASSERT_TRUE(LoadTrace(path_, &trace));
  // Written events (past the two head events) plus dropped ones account for every call,
  // the tensor's two metadata events included.
  EXPECT_EQ((int)trace.arr.size() - 2 + dropped, kEvents + 2);
}

// A full disk: a 64 KiB tmpfs. Needs root (CAP_SYS_ADMIN) to mount.
TEST_F(TimelineTest, FullDiskWarnsDropsAndStaysValid) {
  std::string mnt = dir_ + "/tiny";
  ASSERT_EQ(mkdir(mnt.c_str(), 0755), 0);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0) {
    int e = errno;
    rmdir(mnt.c_str());
    GTEST_SKIP() << "cannot mount a 64 KiB tmpfs to fill up (" << strerror(e)
                 << "); run as root to test the full-disk path";
  }
  std::string path = mnt + "/timeline.json";
  hvds_timeline_t* tl = nullptr;
  char err[256] = "";
  ASSERT_EQ(hvds__timeline_open(path.c_str(), 1, &tl, err, sizeof(err)), HVDS_SUCCESS) << err;
  hvds__timeline_set_limits(tl, 8192, 0);

  ::testing::internal::CaptureStderr();
  auto t0 = std::chrono::steady_clock::now();
  double slowest_ms = 0;
  int calls = 0;
  // About 70 bytes per event: 4000 events overflow 64 KiB several times over.
  for (int i = 0; i < 4000; i++) {
    auto c0 = std::chrono::steady_clock::now();
    hvds__timeline_mark_cycle(tl);
    calls++;
    std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - c0;
    if (took.count() > slowest_ms) slowest_ms = took.count();
    if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Wait (bounded) for the writer to hit ENOSPC.
  for (int i = 0; i < 100 && hvds__timeline_dropped(tl) == 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 100; i++, calls++) hvds__timeline_mark_cycle(tl);  // after the failure
  std::chrono::duration<double> total = std::chrono::steady_clock::now() - t0;
  int dropped = hvds__timeline_dropped(tl);
  hvds__timeline_close(tl);
  std::string log = ::testing::internal::GetCapturedStderr();

  Json trace;
  ::testing::AssertionResult valid = LoadTrace(path, &trace);
  unlink(path.c_str());
  umount2(mnt.c_str(), MNT_DETACH);
  rmdir(mnt.c_str());

  EXPECT_TRUE(valid);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ((int)trace.arr.size() - 2 + dropped, calls);
  EXPECT_GT(trace.arr.size(), 100u) << "the events written before the disk filled are kept";
  EXPECT_NE(log.find("write failed"), std::string::npos) << log;
  EXPECT_NE(log.find(path), std::string::npos) << log;
  EXPECT_NE(log.find(strerror(ENOSPC)), std::string::npos) << log;
  size_t first = log.find("write failed");
  EXPECT_EQ(log.find("write failed", first + 1), std::string::npos) << "warn once: " << log;
  EXPECT_LT(slowest_ms, 200.0) << "an event call blocked";
  EXPECT_LT(total.count(), 10.0);
}

}  // namespace
