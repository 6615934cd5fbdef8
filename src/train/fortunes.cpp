#include "train/fortunes.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "train/fortune_files.hpp"

namespace ina::fortunes {

namespace {

// Lower-case alphabetic words of a text.
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> out;
  std::string w;
  for (char c : text) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

}  // namespace

Corpus load(const std::string& dir) {
  const std::vector<std::filesystem::path> files = fortune_files(dir);
  Corpus c;
  std::unordered_map<std::string, int64_t> vocab;
  c.classes = static_cast<int64_t>(files.size());
  for (size_t f = 0; f < files.size(); ++f) {
    std::ifstream in(files[f]);
    std::string line, text;
    auto flush = [&] {
      Sample s;
      s.label = static_cast<int64_t>(f);
      for (auto& w : words_of(text)) {
        auto [it, fresh] = vocab.emplace(w, static_cast<int64_t>(vocab.size()));
        s.words.push_back(it->second);
      }
      if (!s.words.empty()) c.samples.push_back(std::move(s));
      text.clear();
    };
    while (std::getline(in, line)) {
      if (line == "%") flush();
      else text += line + "\n";
    }
    flush();
  }
  c.vocab = static_cast<int64_t>(vocab.size());
  return c;
}

BagOfWordsImpl::BagOfWordsImpl(int64_t vocab, int64_t dim, int64_t classes)
    : emb(register_module("emb", torch::nn::EmbeddingBag(
                                     torch::nn::EmbeddingBagOptions(vocab, dim).mode(torch::kMean).sparse(true)))),
      fc(register_module("fc", torch::nn::Linear(dim, classes))) {}

torch::Tensor BagOfWordsImpl::forward(const torch::Tensor& flat, const torch::Tensor& offsets) {
  return fc->forward(emb->forward(flat, offsets));
}

void Batch::add(const Sample& s) {
  offsets.push_back(static_cast<int64_t>(flat.size()));
  flat.insert(flat.end(), s.words.begin(), s.words.end());
  labels.push_back(s.label);
}

void Batch::clear() {
  flat.clear();
  offsets.clear();
  labels.clear();
}

torch::Tensor Batch::loss(BagOfWords& model) const {
  return torch::nn::functional::cross_entropy(model->forward(torch::tensor(flat), torch::tensor(offsets)),
                                              torch::tensor(labels));
}

SparseRows nonzero_rows(const torch::Tensor& sparse_grad) {
  auto g = sparse_grad.coalesce();
  const auto rows = g.indices()[0].contiguous();
  const auto vals = g.values().contiguous();
  const auto nonzero = vals.ne(0).any(1).contiguous();
  const int64_t d = vals.size(1);
  const auto* nz = nonzero.data_ptr<bool>();
  const auto* r = rows.data_ptr<int64_t>();
  const auto* v = vals.data_ptr<float>();
  SparseRows out;
  for (int64_t q = 0; q < rows.numel(); ++q) {
    if (!nz[q]) continue;
    out.rows.push_back(r[q]);
    out.values.insert(out.values.end(), v + q * d, v + (q + 1) * d);
  }
  return out;
}

}  // namespace ina::fortunes
