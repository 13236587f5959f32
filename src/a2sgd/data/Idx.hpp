#pragma once
/// @file Idx.hpp
/// Reader for the IDX format of MNIST and Fashion-MNIST (unsigned-byte arrays), plain or gzip.

#include <a2sgd/data/Dataset.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace a2sgd::data {

/// An unsigned-byte IDX array: its dimensions and row-major data.
struct IdxArray {
  std::uint32_t magic = 0;
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};

/// Reads an IDX file (gzip-compressed or not). Every problem (missing or unreadable file, wrong
/// magic number, unsupported type, truncated or overlong data, corrupt gzip stream) throws
/// InvalidArgument naming the file.
IdxArray read_idx(const std::string& path);

/// Loads an MNIST-layout directory: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
/// Images become rows of 784 floats in [0, 1] before normalize(); labels must lie in
/// [0, num_classes). Image and label counts must match.
DatasetPair load_idx_dataset(const std::string& directory, const std::string& name, int num_classes = 10);

}  // namespace a2sgd::data
