#pragma once
/// @file a2sgd.hpp
/// Umbrella header of the a2sgd library.

#include <a2sgd/comm/CollectiveWatchdog.hpp>
#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/comm/StopSignals.hpp>
#include <a2sgd/comm/ViewCollectives.hpp>
#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/ExchangeFactory.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/KernelTraffic.hpp>
#include <a2sgd/compress/Methods.hpp>  // every registered method's header (generated)
#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/core/Accounting.hpp>
#include <a2sgd/core/BuildInfo.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/HeapPolicy.hpp>
#include <a2sgd/core/Options.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/data/DataHome.hpp>
#include <a2sgd/data/Dataset.hpp>
#include <a2sgd/data/Idx.hpp>
#include <a2sgd/data/Ptb.hpp>
#include <a2sgd/data/ShardSampler.hpp>
#include <a2sgd/data/Synthetic.hpp>
#include <a2sgd/io/Checkpoint.hpp>
#include <a2sgd/nn/Dropout.hpp>
#include <a2sgd/nn/Embedding.hpp>
#include <a2sgd/nn/Linear.hpp>
#include <a2sgd/nn/Lstm.hpp>
#include <a2sgd/nn/LstmLanguageModel.hpp>
#include <a2sgd/nn/Mlp.hpp>
#include <a2sgd/nn/Model.hpp>
#include <a2sgd/nn/SoftmaxCrossEntropy.hpp>
#include <a2sgd/optim/GradientClip.hpp>
#include <a2sgd/optim/LrSchedule.hpp>
#include <a2sgd/optim/Optimizer.hpp>
#include <a2sgd/train/ClassificationSource.hpp>
#include <a2sgd/train/DataSource.hpp>
#include <a2sgd/train/ModelRegistry.hpp>
#include <a2sgd/train/Observer.hpp>
#include <a2sgd/train/TokenStreamSource.hpp>
#include <a2sgd/train/Trainer.hpp>
