#include "workload/model.hpp"

#include <cmath>
#include <stdexcept>

namespace ina::workload {

uint64_t ModelSpec::total_bytes() const {
  uint64_t b = 0;
  for (const auto& p : send_order) b += p.bytes;
  return b;
}

Time ModelSpec::total_compute() const {
  Time t = 0;
  for (Time c : compute) t += c;
  return t;
}

ModelSpec dsa_model(char which, double partition_mb, double compute_ms) {
  double mb, ms;
  if (which == 'A') { mb = 4; ms = 0.32; }
  else if (which == 'B') { mb = 2; ms = 0.64; }
  else throw std::invalid_argument(std::string("unknown DSA model '") + which + "'");
  if (partition_mb > 0) mb = partition_mb;
  if (compute_ms > 0) ms = compute_ms;
  // Round to whole int32 elements.
  const uint64_t bytes = static_cast<uint64_t>(std::llround(mb * kMiB / 4)) * 4;
  ModelSpec m;
  m.name = std::string(1, which);
  m.compute = {from_ms(ms), from_ms(ms)};
  m.send_order = {{bytes, 2}, {bytes, 1}, {bytes, 1}, {bytes, 2}};
  return m;
}

// Parameter counts, from the models' papers and their reference
// implementations:
//  - ResNet50 25,557,032 and ResNet101 44,549,160: He et al., "Deep Residual
//    Learning for Image Recognition", CVPR 2016 (the torchvision models);
//    25.6 M x 4 B = 97.5 MiB, the Rina paper's "98 MB" (§VI-C);
//  - VGG16 138,357,544: Simonyan & Zisserman, "Very Deep Convolutional
//    Networks for Large-Scale Image Recognition", ICLR 2015 (138 M, Table 2);
//  - InceptionV3 23,851,784: Szegedy et al., "Rethinking the Inception
//    Architecture for Computer Vision", CVPR 2016 (the Keras Applications
//    model, without the auxiliary head);
//  - BERT-base 110 M: Devlin et al., "BERT", NAACL 2019 (§3: L=12, H=768,
//    A=12, 110 M parameters).
// These are the ImageNet/pre-training heads; the paper's CIFAR heads differ
// by under 2 M parameters (< 8 %).
// Compute per iteration = 3 (forward + backward) x forward FLOPs per sample x
// batch / 14 TFLOP/s, the forward costs from the same papers (ResNet50 3.8
// and ResNet101 7.6 G multiply-adds, He et al. Table 1; VGG16 15.3 G, ibid.;
// InceptionV3 5.0 G, Szegedy et al.'s abstract; BERT-base 110 M per token x 384
// tokens),
// 2 FLOPs per multiply-add, the paper's batches (64 images, 12 sequences,
// §VI-A), and 14 TFLOP/s an assumed sustained FP32 rate of the testbed's RTX
// 3090 (about 40 % of its 35.6 TFLOP/s peak). This is an estimate, not a
// measurement: it only sets how long a worker computes between allreduces.
const std::vector<DnnModel>& dnn_models() {
  constexpr double kFlops = 14e12;
  auto ms = [&](double fwd_flops, int batch) { return 3 * fwd_flops * batch / kFlops * 1e3; };
  static const std::vector<DnnModel> models = {
      {"ResNet50", 25'557'032, ms(2 * 3.8e9, 64), 64},
      {"VGG16", 138'357'544, ms(2 * 15.3e9, 64), 64},
      {"InceptionV3", 23'851'784, ms(2 * 5.0e9, 64), 64},
      {"ResNet101", 44'549'160, ms(2 * 7.6e9, 64), 64},
      {"BERT-base", 110'000'000, ms(2 * 110e6 * 384, 12), 12},
  };
  return models;
}

const DnnModel* find_dnn_model(std::string_view name) {
  for (const auto& m : dnn_models())
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace ina::workload
