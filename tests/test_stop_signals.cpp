#include "TestingCatch.hpp"

#include <a2sgd/comm/StopSignals.hpp>

#include <csignal>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

void (*handler_of(int signal_number))(int) {
  struct sigaction current {};
  sigaction(signal_number, nullptr, &current);
  return current.sa_handler;
}

}  // namespace

TEST_CASE("without a signal no rank ever stops", "[comm][signals]") {
  Communicator comm;
  StopSignals stop(comm);
  for (int step = 0; step < 50; ++step) REQUIRE_FALSE(stop.poll());
  CHECK_FALSE(stop.finish());
  CHECK(stop.signal_number() == 0);
}

TEST_CASE("a signal to one rank stops every rank at the same poll", "[comm][signals]") {
  Communicator comm;
  const int sender = comm.size() - 1;
  for (const int signal_number : {SIGUSR1, SIGTERM}) {
    StopSignals stop(comm);
    int stopped_at = -1;
    for (int step = 0; step < 20; ++step) {
      // Raised just before poll() at step 5: it is in the agreement posted at step 5 and acted
      // on at step 6 (raise() runs the handler before it returns).
      if (step == 5 && comm.rank() == sender) std::raise(signal_number);
      if (stop.poll()) {
        stopped_at = step;
        break;
      }
    }
    CHECK(stopped_at == 6);
    CHECK(stop.signal_number() == signal_number);
    CHECK(StopSignals::received() == (comm.rank() == sender ? signal_number : 0));
    // Every rank agrees on the step: the minimum and maximum over ranks coincide.
    int lo = stopped_at, hi = stopped_at;
    comm.allreduce(&lo, 1, MPI_MIN);
    comm.allreduce(&hi, 1, MPI_MAX);
    CHECK(lo == hi);
  }
}

TEST_CASE("a signal between the last poll and finish() is reported by finish()", "[comm][signals]") {
  Communicator comm;
  StopSignals stop(comm);
  for (int step = 0; step < 3; ++step) REQUIRE_FALSE(stop.poll());
  if (comm.rank() == 0) std::raise(SIGUSR1);
  // The agreement posted by the last poll() predates the signal: finish() completes that one.
  CHECK_FALSE(stop.finish());
  CHECK(stop.signal_number() == 0);
}

TEST_CASE("the handlers exist only while a StopSignals lives, one at a time", "[comm][signals]") {
  // MPI may have installed handlers of its own (Open MPI does for SIGTERM): they come back.
  Communicator comm;
  const auto usr1_before = handler_of(SIGUSR1), term_before = handler_of(SIGTERM);
  {
    StopSignals stop(comm);
    CHECK(handler_of(SIGUSR1) != usr1_before);
    CHECK(handler_of(SIGTERM) != term_before);
    CHECK(handler_of(SIGUSR1) == handler_of(SIGTERM));
    CHECK_THROWS_AS(StopSignals(comm), Error);
  }
  CHECK(handler_of(SIGUSR1) == usr1_before);
  CHECK(handler_of(SIGTERM) == term_before);
  StopSignals again(comm);  // the slot is free again
  CHECK(handler_of(SIGUSR1) != usr1_before);
}
