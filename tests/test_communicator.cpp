#include "TestingCatch.hpp"

#include <a2sgd/comm/Communicator.hpp>

#include <chrono>
#include <climits>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace a2sgd;
using namespace a2sgd::testing;

TEST_CASE("the communicator is a duplicate of its parent, freed once", "[comm]") {
  Communicator comm;
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(comm.get(), MPI_COMM_WORLD, &relation);
  CHECK(relation == MPI_CONGRUENT);  // same group, different context: no message crosstalk
  CHECK(comm.rank() == world_rank());
  CHECK(comm.size() == world_size());

  Communicator moved(std::move(comm));
  CHECK(comm.get() == MPI_COMM_NULL);
  CHECK(moved.get() != MPI_COMM_NULL);
  Communicator assigned;
  assigned = std::move(moved);
  CHECK(moved.get() == MPI_COMM_NULL);
  double x = 1.0;
  assigned.allreduce(&x, 1, MPI_SUM);
  CHECK(x == world_size());
}

TEST_CASE("collectives account bytes, messages and time", "[comm]") {
  Communicator comm;
  std::vector<float> v(1000, static_cast<float>(comm.rank() + 1));
  StepStats stats;
  comm.allreduce(v.data(), v.size(), MPI_SUM, &stats);
  const int p = comm.size();
  CHECK(v[999] == static_cast<float>(p * (p + 1) / 2));
  CHECK(stats.bytes_sent == 4000);
  CHECK(stats.messages == 1);
  CHECK(stats.comm_s >= 0.0);
  std::int64_t root_value = comm.rank() == 0 ? 42 : 0;
  StepStats bstats;
  comm.broadcast(&root_value, 1, 0, &bstats);
  CHECK(root_value == 42);
  CHECK(bstats.bytes_sent == (comm.rank() == 0 ? 8u : 0u));
}

TEST_CASE("an error on one rank is raised on every rank with that rank's message", "[comm]") {
  Communicator comm;
  const int last = comm.size() - 1;
  // No failure: nobody throws.
  CHECK_NOTHROW(comm.raise_if_any(false, ""));
  // The last rank fails; every rank must throw the same CollectiveError.
  bool threw = false;
  try {
    comm.raise_if_any(comm.rank() == last, "disk full on rank " + std::to_string(comm.rank()));
  } catch (const CollectiveError& e) {
    threw = true;
    CHECK(e.origin_rank() == last);
    CHECK_THAT(e.what(), A2SGD_CONTAINS("disk full on rank " + std::to_string(last)));
    if (comm.size() > 1) CHECK_THAT(e.what(), A2SGD_CONTAINS("rank " + std::to_string(last) + ": "));
  }
  CHECK(threw);

  // all_or_throw: an exception inside the function on rank 0 only.
  threw = false;
  try {
    comm.all_or_throw([&] {
      if (comm.rank() == 0) throw std::runtime_error("bad option --foo");
    });
  } catch (const CollectiveError& e) {
    threw = true;
    CHECK_THAT(e.what(), A2SGD_CONTAINS("bad option --foo"));
  }
  CHECK(threw);
  // Every rank fails: rank 0's message, not attributed to one rank.
  threw = false;
  try {
    comm.raise_if_any(true, "bad input on rank " + std::to_string(comm.rank()));
  } catch (const CollectiveError& e) {
    threw = true;
    CHECK(std::string(e.what()) == "bad input on rank 0");
  }
  CHECK(threw);
  // The communicator is still usable afterwards (no rank is left inside a collective).
  int one = 1;
  comm.allreduce(&one, 1, MPI_SUM);
  CHECK(one == comm.size());
}

TEST_CASE("require_same detects disagreement on every rank", "[comm]") {
  Communicator comm;
  CHECK_NOTHROW(comm.require_same(12345, "n"));
  if (comm.size() > 1) {
    const std::uint64_t n = comm.rank() == 1 ? 11 : 10;
    CHECK_THROWS_WITH(comm.require_same(n, "the number of parameters"),
                      A2SGD_CONTAINS("ranks disagree on the number of parameters") && A2SGD_CONTAINS("from 10 to 11"));
  }
}

TEST_CASE("MPI errors become exceptions with MPI's description", "[comm]") {
  Communicator comm;
  double x = 0;
  // An invalid root is reported by MPI as an error code, which we turn into MpiError.
  CHECK_THROWS_AS(comm.broadcast(&x, 1, comm.size() + 5), MpiError);
}

TEST_CASE("collective watchdog: a wait longer than the timeout is reported once, with the collective and step",
          "[comm][watchdog]") {
  std::mutex mutex;
  std::vector<std::string> reports;
  auto handler = [&](const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(message);
  };
  auto count = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return reports.size();
  };
  using namespace std::chrono_literals;
  SECTION("short waits and time outside collectives are not reported; a long wait is, once") {
    // Margins of 10x against the timeout: the assertions hold on a loaded, oversubscribed machine.
    CollectiveWatchdog dog(0.5, 3, handler);
    for (int i = 0; i < 5; ++i) {
      CollectiveWatchdog::Wait wait(&dog, "MPI_Allreduce");
      std::this_thread::sleep_for(50ms);
    }
    std::this_thread::sleep_for(700ms);  // computing, not waiting
    CHECK(count() == 0);
    dog.note_step(41, 0.001);
    {
      CollectiveWatchdog::Wait outer(&dog, "MPI_Bcast");
      CollectiveWatchdog::Wait inner(&dog, "MPI_Allreduce");  // nested: the outermost is named
      std::this_thread::sleep_for(1500ms);
    }
    REQUIRE(count() == 1);
    CHECK_THAT(reports[0], A2SGD_CONTAINS("rank 3: no progress for") && A2SGD_CONTAINS("waiting in MPI_Bcast") &&
                               A2SGD_CONTAINS("at step 41"));
  }
  SECTION("the timeout grows to 20 times the longest step") {
    CollectiveWatchdog dog(0.1, 0, handler);
    dog.note_step(1, 0.25);  // 20 x 0.25 s = 5 s
    CHECK_THAT(dog.effective_timeout(), WithinAbs(5.0, 1e-9));
    {
      CollectiveWatchdog::Wait wait(&dog, "MPI_Allreduce");
      std::this_thread::sleep_for(500ms);
    }
    CHECK(count() == 0);
  }
  SECTION("a timeout of 0 disables it; a communicator without a watchdog watches nothing") {
    CollectiveWatchdog dog(0.0, 0, handler);
    CHECK(!dog.enabled());
    {
      CollectiveWatchdog::Wait wait(&dog, "MPI_Allreduce");
      std::this_thread::sleep_for(200ms);
    }
    Communicator comm;
    CHECK(comm.watchdog() == nullptr);
    comm.barrier();
    CHECK(count() == 0);
  }
  SECTION("a communicator's collectives report their waits") {
    Communicator comm;
    CollectiveWatchdog dog(0.3, comm.rank(), handler);
    comm.set_watchdog(&dog);
    dog.note_step(7, 0.0);
    // Rank 0 arrives late at the barrier: the others wait in it for longer than the timeout.
    if (comm.rank() == 0) std::this_thread::sleep_for(900ms);
    comm.barrier();
    comm.set_watchdog(nullptr);
    if (comm.size() > 1 && comm.rank() > 0) {
      REQUIRE(count() == 1);
      CHECK_THAT(reports[0], A2SGD_CONTAINS("waiting in MPI_Barrier at step 7"));
    } else {
      CHECK(count() == 0);
    }
  }
}

// Non-blocking collectives (the overlap of communication with the backward pass rests on them):
// the same result bit for bit as the blocking call, whatever order several requests in flight
// are completed in; the accounting at the start; test() making progress to completion; a request
// moved or destroyed in flight still completing into its buffer.
TEST_CASE("non-blocking all-reduce and all-gather give the blocking results bit for bit", "[comm][nonblocking]") {
  Communicator comm;
  const int p = comm.size(), r = comm.rank();
  const std::size_t n = 1003;
  auto values = [&](int k) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>((i * 7 + 13 * k + 31 * r) % 97) - 4.0f;
    return v;
  };
  std::vector<std::vector<float>> blocking(3), nonblocking(3);
  for (int k = 0; k < 3; ++k) {
    blocking[k] = values(k);
    comm.allreduce(blocking[k].data(), n, MPI_SUM);
    nonblocking[k] = values(k);
  }
  StepStats stats;
  std::vector<Request> requests;
  for (int k = 0; k < 3; ++k) requests.push_back(comm.iallreduce(nonblocking[k].data(), n, MPI_SUM, &stats));
  CHECK(stats.messages == 3);
  CHECK(stats.bytes_sent == 3 * n * sizeof(float));
  for (int k = 2; k >= 0; --k) requests[static_cast<std::size_t>(k)].wait();  // the reverse order
  for (int k = 0; k < 3; ++k) CHECK(nonblocking[k] == blocking[k]);
  for (const Request& q : requests) CHECK_FALSE(q.active());

  const std::vector<std::uint64_t> mine = {static_cast<std::uint64_t>(r) << 40 | 7u, 11u + static_cast<std::uint64_t>(r)};
  std::vector<std::uint64_t> gathered(2 * static_cast<std::size_t>(p)), expected(gathered.size());
  comm.allgather(mine.data(), 2, expected.data());
  Request g = comm.iallgather(mine.data(), 2, gathered.data(), &stats);
  while (!g.test()) {
  }
  CHECK(gathered == expected);
  CHECK_FALSE(g.active());
  g.wait();  // completed: returns at once
  CHECK(stats.messages == 4);
}

TEST_CASE("a request moved or destroyed in flight completes into its buffer", "[comm][nonblocking]") {
  Communicator comm;
  std::vector<double> a(64, 1.0), b(64, 2.0);
  {
    Request first = comm.iallreduce(a.data(), a.size(), MPI_SUM);
    Request moved = std::move(first);
    CHECK_FALSE(first.active());  // NOLINT(bugprone-use-after-move): moved-from is inactive by contract
    Request second = comm.iallreduce(b.data(), b.size(), MPI_SUM);
    moved = std::move(second);  // the first collective completes here, before the second is held
    CHECK(a == std::vector<double>(64, 1.0 * comm.size()));
  }  // the second completes in the destructor
  CHECK(b == std::vector<double>(64, 2.0 * comm.size()));
}

TEST_CASE("a non-blocking collective past INT_MAX values is refused before MPI sees it", "[comm][nonblocking][errors]") {
  Communicator comm;
  float x = 0.0f;
  CHECK_THROWS_AS((void)comm.iallreduce(&x, static_cast<std::size_t>(INT_MAX) + 1, MPI_SUM), InvalidArgument);
  CHECK_THROWS_AS((void)comm.iallgather(&x, static_cast<std::size_t>(INT_MAX) + 1, &x), InvalidArgument);
}
