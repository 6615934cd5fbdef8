#pragma once
// The fortunes bag-of-words classifier, shared by ina-sparse-trace (which
// records its sparse gradients) and ina-train --model fortunes (which trains
// it data-parallel over allreduce_sparse or gloo). Includes <torch/torch.h>:
// only libtorch targets may use it.
//
// Data: Debian's `fortunes` package. Each fortune is a sample, its file (art,
// computers, food, law, ...) the class; a word is a lower-case alphabetic
// run, numbered in order of first appearance over the files sorted by name.
// Model: EmbeddingBag(V, d, mean, sparse gradients) -> Linear(d, C).
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ina::fortunes {

struct Sample {
  std::vector<int64_t> words;
  int64_t label = 0;
};

struct Corpus {
  std::vector<Sample> samples;  // in file order, then fortune order
  int64_t vocab = 0;            // V
  int64_t classes = 0;          // C
};

// The fortunes of `dir`'s fortune files (fortune_files.hpp). Throws
// std::runtime_error if there are none.
Corpus load(const std::string& dir);

struct BagOfWordsImpl : torch::nn::Module {
  // Parameters drawn from torch's generator in this order: embedding, then linear.
  BagOfWordsImpl(int64_t vocab, int64_t dim, int64_t classes);
  torch::Tensor forward(const torch::Tensor& flat, const torch::Tensor& offsets);
  torch::nn::EmbeddingBag emb;
  torch::nn::Linear fc;
};
TORCH_MODULE(BagOfWords);

// A batch as EmbeddingBag takes it: every sample's words back to back.
struct Batch {
  std::vector<int64_t> flat, offsets, labels;
  void add(const Sample& s);
  void clear();
  size_t size() const { return labels.size(); }
  // The cross-entropy (mean over the batch) of `model` on it.
  torch::Tensor loss(BagOfWords& model) const;
};

// The rows of a sparse embedding gradient that have a non-zero entry,
// ascending, and their d values each, row-major (rows.size() x d).
struct SparseRows {
  std::vector<int64_t> rows;
  std::vector<float> values;
};
SparseRows nonzero_rows(const torch::Tensor& sparse_grad);

}  // namespace ina::fortunes
