// The word-level LSTM language model on Penn Treebank (the standard small configuration by
// default), registered as "lstm".
#include <a2sgd/data/DataHome.hpp>
#include <a2sgd/data/Ptb.hpp>
#include <a2sgd/nn/LstmLanguageModel.hpp>
#include <a2sgd/train/ModelRegistry.hpp>
#include <a2sgd/train/TokenStreamSource.hpp>

#include <filesystem>

namespace {

using namespace a2sgd;

nn::LstmConfig lstm_config(const OptionValues& o) {
  nn::LstmConfig lc;
  const std::string& hidden = o.text("hidden");
  std::size_t used = 0;
  long long width = 0;
  try {
    width = std::stoll(hidden, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  o.require(used == hidden.size() && width >= 1, "hidden", "the lstm model takes one hidden width");
  const std::int64_t layers = o.integer("layers");
  const double dropout = o.number("dropout");
  o.require(layers >= 1 && layers <= 64, "layers", "must be in [1, 64]");
  o.require(dropout >= 0.0 && dropout < 1.0, "dropout", "must be in [0, 1)");
  lc.embedding = lc.hidden = static_cast<Index>(width);
  lc.layers = static_cast<Index>(layers);
  lc.dropout = static_cast<float>(dropout);
  lc.tie_weights = o.on("tie-weights");
  return lc;
}

Index bptt(const OptionValues& o) {
  const std::int64_t t = o.integer("bptt");
  o.require(t >= 1 && t <= 100000, "bptt", "must be in [1, 100000]");
  return static_cast<Index>(t);
}

}  // namespace

A2SGD_REGISTER_MODEL(lstm) {
  using namespace a2sgd::train;
  ModelKind k;
  k.summary = "word-level language model: embedding, LSTM layers, linear decoder, softmax cross-entropy";
  k.options = {
      {"hidden", "200", "the embedding's and every layer's width"},
      {"layers", "2", "LSTM layers, in [1, 64]"},
      {"bptt", "35", "time steps per batch (truncated back-propagation), in [1, 100000]"},
      {"dropout", "0", "dropout probability on the embedding and every layer's output, in [0, 1)"},
      {"tie-weights", "", "decoder weights shared with the embedding", {}, true},
  };
  k.datasets = {"ptb"};
  // The standard small configuration's recipe: plain SGD at lr 20 on the mean token loss, clipping
  // at 0.25, the rate divided when the validation loss stops improving.
  k.defaults.batch_size = 20;
  k.defaults.eval_batch = 10;
  k.defaults.clip = 0.25;
  k.defaults.schedule = LrScheduleKind::plateau;
  k.defaults.optimizer = [](const std::string&) { return OptimizerKind::sgd; };
  // SGD's rate is the recipe's 20, except for A2SGD: its averaged replicas reached dense's quality
  // in 0.71x (2 ranks) and 0.85x (4 ranks) of dense's steps at 30 against 0.80x and 1.04x at 20
  // (docs/convergence.md). 20 would make Adam diverge at once, so Adam gets the rate dense trains
  // with in the convergence study, and A2SGD 1.5 times it: at 0.002 it missed dense's quality, at
  // 0.003 it reached it. Momentum keeps the recipe's rate; no study measured another one.
  k.defaults.lr = [](const std::string& method, OptimizerKind kind) {
    const bool a2sgd = method == "a2sgd";
    if (kind == OptimizerKind::adam) return a2sgd ? 0.003 : 0.002;
    return kind == OptimizerKind::sgd && a2sgd ? 30.0 : 20.0;
  };
  // With Adam every method's rate rises linearly over the first 200 steps (A2SGD's first averaging
  // period): A2SGD's replicas drift apart fastest while Adam's second moments are still small, and
  // the warm-up took its steps to tuned dense's target from 1.25x to 1.19x at 2 ranks, from 1.59x
  // to 1.47x at 4 and from none in 1,485 steps to 1.39x at 8 (dense warmed up too: it gains as
  // well, so every method gets it; docs/results.md, docs/convergence.md). SGD's recipe has none.
  k.defaults.lr_warmup_steps = [](const std::string&, OptimizerKind kind) -> std::uint64_t {
    return kind == OptimizerKind::adam ? 200 : 0;
  };
  // A2SGD at dense quality (docs/convergence.md): the embedding and decoder need means of their own,
  // rows of words absent from a batch must not move, and the replicas an average every 200 steps
  // (0.5% of dense's traffic). Local SGD averages at the same period: the same bytes.
  k.defaults.exchange_options = {{"a2sgd", {{"granularity", "layer"}, {"zero-gradient", "hold"}}}};
  k.defaults.averaging = [](const std::string& method, OptimizerKind) -> std::map<std::string, std::string> {
    if (method == "a2sgd" || method == "local") return {{"average-every", "200"}};
    return {};
  };
  k.check_options = [](const OptionValues& o) {
    lstm_config(o);
    bptt(o);
  };
  k.build = [](const ModelContext& c, ParameterStore& store) {
    const std::string dir = data::ptb_directory(c.data_dir);
    // Without --data-dir a missing corpus is a missing download: say where it was looked for and
    // how to fetch it. A named directory's missing file is reported by load_ptb, naming the file.
    std::error_code ec;
    if (c.data_dir.empty() &&
        (dir.empty() || !std::filesystem::exists(std::filesystem::path(dir) / "ptb.train.txt", ec)))
      throw InvalidArgument("the Penn Treebank files (ptb.train.txt, ptb.valid.txt, ptb.test.txt) were not found: " +
                            data::dataset_hint("ptb"));
    const data::TokenCorpus corpus = data::load_ptb(dir);
    ModelProblem pb;
    pb.data = std::make_unique<TokenStreamSource>(corpus, c.dataset, c.comm.rank(), c.comm.size(), c.batch_size,
                                                  c.eval_batch, bptt(c.options));
    nn::LstmConfig lc = lstm_config(c.options);
    lc.vocab = corpus.vocab.size();
    pb.model = std::make_unique<nn::LstmLanguageModel>(lc, store);
    pb.sizes = std::to_string(corpus.train.size()) + " / " + std::to_string(corpus.valid.size()) + " / " +
               std::to_string(corpus.test.size()) + " train / valid / test tokens, " +
               std::to_string(corpus.vocab.size()) + " words";
    return pb;
  };
  return k;
}
