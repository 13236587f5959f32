// a2sgd-netbench: the network as MPI sees it, and the alpha-beta model held against it
// (docs/network.md). Three measurements at the current rank count:
//   pingpong   half the round trip of a message between ranks 0 and 1, per size
//   sendrecv   ranks 0 and 1 sending to each other at once (is the link used in both directions?)
//   allreduce  MPI_Allreduce (float sum) and MPI_Allgather of m bytes per rank, per size
//   methods    every exchange method's step on a model's gradient (default: the LSTM language
//              model), its measured MPI time against NetworkModel's prediction for its collectives
// Alpha and beta are fitted to the ping-pong; every collective and method is then predicted with
// them (a2sgd::collective_seconds / step_comm_seconds) and the relative error reported.
#include "common/AppMain.hpp"
#include "common/OptionErrors.hpp"
#include "common/Statistics.hpp"

#include <a2sgd/a2sgd.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace po = boost::program_options;
using namespace a2sgd;

namespace {

struct Options {
  std::uint64_t min_bytes = 8, max_bytes = std::uint64_t(64) << 20;
  double factor = 4.0;
  double seconds = 1.0;  // time per size and operation, at least min_repeats repetitions
  int min_repeats = 3, max_repeats = 200;
  std::uint64_t fit_min = 64 << 10;  // beta is fitted on ping-pong sizes from this
  std::vector<std::string> ops = {"pingpong", "sendrecv", "allreduce", "allgather", "methods"};
  std::string model = "lstm", csv, label;
  int method_steps = 5;
};

// One measured row.
struct Row {
  std::string op;
  std::uint64_t bytes = 0;
  int repeats = 0;
  double median_s = 0, min_s = 0, predicted_s = -1;
};

using a2sgd::apps::median;

std::vector<std::uint64_t> sizes(const Options& o) {
  std::vector<std::uint64_t> s;
  for (double m = static_cast<double>(o.min_bytes); m < static_cast<double>(o.max_bytes); m *= o.factor)
    s.push_back(static_cast<std::uint64_t>(m));
  s.push_back(o.max_bytes);
  return s;
}

// Repeats `once` (which returns its own seconds) until o.seconds have passed and at least
// min_repeats runs were made, or max_repeats; every rank stops after the same repetition (rank
// 0's clock decides, broadcast each time).
template <class Fn>
Row repeat(const Communicator& comm, const Options& o, const std::string& op, std::uint64_t bytes, Fn once) {
  std::vector<double> t;
  Stopwatch total;
  for (int r = 0;; ++r) {
    comm.barrier();
    t.push_back(once());
    int more = r + 1 < o.max_repeats && (r + 1 < o.min_repeats || total.seconds() < o.seconds);
    comm.broadcast(&more, 1, 0);
    if (!more) break;
  }
  // The slowest rank's time is the collective's time.
  for (double& v : t) comm.allreduce(&v, 1, MPI_MAX);
  return {op, bytes, static_cast<int>(t.size()), median(t), *std::min_element(t.begin(), t.end())};
}

Row pingpong(const Communicator& comm, const Options& o, std::uint64_t bytes) {
  std::vector<char> buf(bytes, 1);
  const int count = static_cast<int>(bytes), rank = comm.rank();
  return repeat(comm, o, "pingpong", bytes, [&] {
    Stopwatch clock;
    if (rank == 0) {
      A2SGD_MPI_CHECK(MPI_Send(buf.data(), count, MPI_CHAR, 1, 7, comm.get()));
      A2SGD_MPI_CHECK(MPI_Recv(buf.data(), count, MPI_CHAR, 1, 7, comm.get(), MPI_STATUS_IGNORE));
    } else if (rank == 1) {
      A2SGD_MPI_CHECK(MPI_Recv(buf.data(), count, MPI_CHAR, 0, 7, comm.get(), MPI_STATUS_IGNORE));
      A2SGD_MPI_CHECK(MPI_Send(buf.data(), count, MPI_CHAR, 0, 7, comm.get()));
    }
    return clock.seconds() / 2;
  });
}

// Both directions at once: ranks 0 and 1 send m bytes to each other (MPI_Sendrecv). On a full-duplex
// link this takes as long as one direction's ping-pong.
Row exchange(const Communicator& comm, const Options& o, std::uint64_t bytes) {
  std::vector<char> out(bytes, 1), in(bytes);
  const int count = static_cast<int>(bytes), rank = comm.rank();
  return repeat(comm, o, "sendrecv", bytes, [&] {
    Stopwatch clock;
    if (rank < 2)
      A2SGD_MPI_CHECK(MPI_Sendrecv(out.data(), count, MPI_CHAR, 1 - rank, 8, in.data(), count, MPI_CHAR, 1 - rank, 8,
                                   comm.get(), MPI_STATUS_IGNORE));
    return clock.seconds();
  });
}

Row collective(const Communicator& comm, const Options& o, const std::string& op, std::uint64_t bytes) {
  const std::size_t floats = std::max<std::size_t>(1, bytes / 4);
  std::vector<float> send(floats, 1.0f), recv(op == "allgather" ? floats * static_cast<std::size_t>(comm.size()) : 0);
  return repeat(comm, o, op, 4 * floats, [&] {
    Stopwatch clock;
    if (op == "allreduce")
      comm.allreduce(send.data(), floats, MPI_SUM);
    else
      comm.allgather(send.data(), floats, recv.data());
    return clock.seconds();
  });
}

// alpha: the smallest message's half round trip; beta: least squares of t = a + m beta over the
// sizes from fit_min (where the bandwidth term dominates).
Link fit_link(const std::vector<Row>& pp, std::uint64_t fit_min) {
  Link link;
  link.alpha_s = pp.front().median_s;
  double n = 0, sm = 0, st = 0, smm = 0, smt = 0;
  for (const Row& r : pp) {
    if (r.bytes < fit_min) continue;
    const double m = static_cast<double>(r.bytes);
    n += 1, sm += m, st += r.median_s, smm += m * m, smt += m * r.median_s;
  }
  const double beta = n >= 2 ? (n * smt - sm * st) / (n * smm - sm * sm) : 0.0;
  if (beta > 0) link.bytes_per_s = 1.0 / beta;
  return link;
}

// Whether both directions run at the full rate: the sizes from fit_min of a simultaneous exchange
// against the ping-pong's one direction. A ratio near 1 is a full-duplex link, near 2 a shared one;
// 1.5 divides them.
void fit_duplex(Link& link, const std::vector<Row>& pp, const std::vector<Row>& sr, std::uint64_t fit_min) {
  std::vector<double> ratio;
  for (std::size_t i = 0; i < pp.size() && i < sr.size(); ++i)
    if (pp[i].bytes >= fit_min && pp[i].median_s > 0) ratio.push_back(sr[i].median_s / pp[i].median_s);
  if (!ratio.empty()) link.full_duplex = median(ratio) < 1.5;
}

// The model's tensors, without data: every exchange needs only the layout.
ParameterStore model_store(const std::string& model) {
  ParameterStore store;
  if (model == "lstm")
    nn::LstmLanguageModel(nn::LstmConfig{}, store);
  else
    nn::Mlp(nn::MlpConfig{}, store);
  store.allocate();
  return store;
}

std::vector<Row> methods(const Communicator& comm, const Options& o, const Link& link) {
  ParameterStore store = model_store(o.model);
  const Index n = store.size();
  std::vector<float> host(static_cast<std::size_t>(n));
  std::mt19937 rng(17u + static_cast<unsigned>(comm.rank()));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (float& v : host) v = normal(rng);
  auto mirror = Kokkos::create_mirror_view(store.grads());
  std::vector<Row> rows;
  for (const std::string& method : exchange_methods()) {
    ExchangeConfig cfg;
    cfg.method = method;
    cfg.layout = store.tensors();
    auto exchange = make_exchange(cfg, comm, n);
    Optimizer sgd(OptimizerConfig{}, n);
    std::vector<double> comm_s;
    for (int s = 0; s < o.method_steps + 1; ++s) {
      for (Index i = 0; i < n; ++i) mirror(i) = host[static_cast<std::size_t>(i)];
      Kokkos::deep_copy(store.grads(), mirror);
      comm.barrier();  // every rank enters the step together: comm_s is then the transfer
      exchange->step(store.params(), store.grads(), sgd, 1e-6);
      if (s > 0) comm_s.push_back(exchange->stats().last_step.comm_s);  // the first step warms up
    }
    // The rank that entered the collective last waited for no other: its time in MPI is the
    // transfer itself, without the other ranks' wait for the slowest compression.
    for (double& v : comm_s) comm.allreduce(&v, 1, MPI_MIN);
    Row r{"method:" + method, exchange->stats().last_step.bytes_sent, static_cast<int>(comm_s.size()), median(comm_s),
          *std::min_element(comm_s.begin(), comm_s.end())};
    r.predicted_s = step_comm_seconds(exchange->step_traffic(), comm.size(), link);
    rows.push_back(r);
  }
  return rows;
}

bool print_rows(const Communicator& comm, const Options& o, const std::vector<Row>& rows, const Link& link,
                bool fitted);

// Rank 0 prints the table and writes the CSV; a CSV that cannot be written fails every rank.
void print(const Communicator& comm, const Options& o, const std::vector<Row>& rows, const Link& link, bool fitted) {
  bool written = true;
  if (comm.rank() == 0) written = print_rows(comm, o, rows, link, fitted);
  comm.raise_if_any(!written, "cannot write " + o.csv);
}

bool print_rows(const Communicator& comm, const Options& o, const std::vector<Row>& rows, const Link& link,
                bool fitted) {
  std::printf("a2sgd-netbench: %d ranks%s%s\n", comm.size(), o.label.empty() ? "" : ", ", o.label.c_str());
  if (fitted)
    std::printf("fitted link: alpha %.1f us, bandwidth %.1f MB/s (%.3f Gbit/s), %s duplex%s\n", link.alpha_s * 1e6,
                link.bytes_per_s / 1e6, link.gbit_per_s(), link.full_duplex ? "full" : "half",
                std::count(o.ops.begin(), o.ops.end(), "sendrecv") ? " (from sendrecv)" : " (assumed)");
  std::printf("%-18s %12s %8s %12s %12s %12s %10s %8s\n", "op", "bytes", "repeats", "median ms", "min ms", "model ms",
              "error", "MB/s");
  for (const Row& r : rows) {
    const bool modelled = r.predicted_s >= 0;
    const double rate = r.median_s > 0 ? static_cast<double>(r.bytes) / r.median_s / 1e6 : 0.0;
    std::printf(
        "%-18s %12llu %8d %12.3f %12.3f %12s %10s %8.1f\n", r.op.c_str(), static_cast<unsigned long long>(r.bytes),
        r.repeats, 1e3 * r.median_s, 1e3 * r.min_s,
        modelled ? std::to_string(1e3 * r.predicted_s).substr(0, 10).c_str() : "-",
        modelled && r.predicted_s > 0
            ? (std::to_string(static_cast<int>(std::lround(100 * (r.predicted_s / r.median_s - 1)))) + "%").c_str()
            : "-",
        rate);
  }
  if (o.csv.empty()) return true;
  std::ofstream f(o.csv);
  f << "label,ranks,op,bytes,repeats,median_s,min_s,predicted_s,alpha_s,bytes_per_s,full_duplex\n";
  for (const Row& r : rows)
    f << o.label << ',' << comm.size() << ',' << r.op << ',' << r.bytes << ',' << r.repeats << ',' << r.median_s << ','
      << r.min_s << ',' << r.predicted_s << ',' << link.alpha_s << ',' << link.bytes_per_s << ',' << link.full_duplex
      << '\n';
  f.close();
  return static_cast<bool>(f);
}

bool parse(int argc, char** argv, Options& o, const Communicator& comm) {
  std::string ops = "pingpong,sendrecv,allreduce,allgather,methods";
  long long min_bytes = 8, max_bytes = 64ll << 20, fit_min = 64 << 10;
  po::options_description d("a2sgd-netbench options");
  d.add_options()("help,h", "show this help")("min-bytes", po::value(&min_bytes)->default_value(min_bytes),
                                              "smallest message")(
      "max-bytes", po::value(&max_bytes)->default_value(max_bytes), "largest message")(
      "factor", po::value(&o.factor)->default_value(o.factor), "size step")(
      "seconds", po::value(&o.seconds)->default_value(o.seconds), "time per size and operation")(
      "min-repeats", po::value(&o.min_repeats)->default_value(o.min_repeats), "repetitions per size, at least")(
      "max-repeats", po::value(&o.max_repeats)->default_value(o.max_repeats), "repetitions per size, at most")(
      "fit-min", po::value(&fit_min)->default_value(fit_min), "ping-pong sizes from which beta is fitted")(
      "ops", po::value(&ops)->default_value(ops), "comma-separated: pingpong, sendrecv, allreduce, allgather, methods")(
      "model", po::value(&o.model)->default_value(o.model), "methods: the gradient's layout, lstm | mlp")(
      "method-steps", po::value(&o.method_steps)->default_value(o.method_steps), "methods: timed steps each")(
      "label", po::value(&o.label), "a label for the CSV rows (e.g. the link)")(
      "csv", po::value(&o.csv), "write every row to this CSV file (rank 0)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(d).run(), vm);
    po::notify(vm);
  } catch (po::error& e) {
    throw InvalidArgument(apps::option_error_message(e));
  }
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << d;
    return false;
  }
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgument(what);
  };
  require(min_bytes >= 1 && max_bytes >= min_bytes && max_bytes <= (1ll << 31) - 1,
          "--min-bytes and --max-bytes: need 1 <= min <= max < 2 GiB");
  require(o.factor > 1.0, "--factor must be above 1");
  require(o.seconds >= 0 && o.min_repeats >= 1 && o.max_repeats >= o.min_repeats,
          "--seconds >= 0 and 1 <= --min-repeats <= --max-repeats");
  require(o.model == "lstm" || o.model == "mlp", "--model must be lstm or mlp");
  require(o.method_steps >= 1, "--method-steps must be at least 1");
  o.min_bytes = static_cast<std::uint64_t>(min_bytes), o.max_bytes = static_cast<std::uint64_t>(max_bytes);
  o.fit_min = static_cast<std::uint64_t>(std::max(0ll, fit_min));
  o.ops.clear();
  std::stringstream list(ops);
  for (std::string op; std::getline(list, op, ',');) {
    require(op == "pingpong" || op == "sendrecv" || op == "allreduce" || op == "allgather" || op == "methods",
            "--ops: unknown operation '" + op + "' (pingpong, sendrecv, allreduce, allgather, methods)");
    o.ops.push_back(op);
  }
  const bool needs_fit = std::count(o.ops.begin(), o.ops.end(), "pingpong") > 0;
  require(needs_fit || o.ops.empty() == false, "--ops is empty");
  require(comm.size() >= 2 || (!needs_fit && std::count(o.ops.begin(), o.ops.end(), "sendrecv") == 0),
          "pingpong and sendrecv need at least 2 ranks");
  return true;
}

int run(int argc, char** argv, const Communicator& comm) {
  Options o;
  try {
    if (!parse(argc, argv, o, comm)) return 0;
  } catch (const InvalidArgument& e) {
    if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-netbench: error: %s\n", e.what());
    return 2;
  }
  auto has = [&](const char* op) { return std::count(o.ops.begin(), o.ops.end(), op) > 0; };
  std::vector<Row> rows, pp;
  if (has("pingpong"))
    for (std::uint64_t m : sizes(o)) pp.push_back(pingpong(comm, o, m));
  Link link = pp.empty() ? Link{} : fit_link(pp, o.fit_min);
  rows = pp;
  if (has("sendrecv")) {
    std::vector<Row> sr;
    for (std::uint64_t m : sizes(o)) sr.push_back(exchange(comm, o, m));
    if (!pp.empty()) fit_duplex(link, pp, sr, o.fit_min);
    for (Row& r : sr)
      if (!pp.empty())
        r.predicted_s = link.alpha_s + (link.full_duplex ? 1.0 : 2.0) * static_cast<double>(r.bytes) / link.bytes_per_s;
    rows.insert(rows.end(), sr.begin(), sr.end());
  }
  for (const char* op : {"allreduce", "allgather"}) {
    if (!has(op)) continue;
    for (std::uint64_t m : sizes(o)) {
      Row r = collective(comm, o, op, m);
      if (!pp.empty())
        r.predicted_s =
            collective_seconds(std::string(op) == "allreduce" ? CollectiveKind::allreduce : CollectiveKind::allgather,
                               r.bytes, comm.size(), link);
      rows.push_back(r);
    }
  }
  if (has("methods")) {
    const auto m = methods(comm, o, link);
    rows.insert(rows.end(), m.begin(), m.end());
    if (pp.empty())
      for (Row& r : rows) r.predicted_s = -1;  // no fitted link to predict with
  }
  try {
    print(comm, o, rows, link, !pp.empty());
  } catch (const CollectiveError& e) {
    if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-netbench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return apps::app_main(argc, argv, "a2sgd-netbench", run);
}
