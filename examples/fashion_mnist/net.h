// The Fashion-MNIST CNN of the example and of bench/ddp_vs_pytorch (where ddp_peer.py defines the
// same network in Python): PyTorch's MNIST example without dropout, 1.2 M parameters.
#pragma once

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

namespace zeus::examples {

struct Net : torch::nn::Module {
  Net()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3)))),
        fc1(register_module("fc1", torch::nn::Linear(9216, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::nn::functional::relu(conv1->forward(x));
    x = torch::nn::functional::relu(conv2->forward(x));
    x = torch::nn::functional::max_pool2d(x, torch::nn::functional::MaxPool2dFuncOptions(2))
            .flatten(1);
    x = torch::nn::functional::relu(fc1->forward(x));
    return fc2->forward(x);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

}  // namespace zeus::examples
