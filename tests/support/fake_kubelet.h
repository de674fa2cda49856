// A fake kubelet for the tests: a gRPC server on a Unix socket that speaks the real
// pod-resources v1 protocol (the service generated from proto/podresources/v1/api.proto by gRPC's
// own code generator) and lists the pods the test gives it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace zeus::test {

struct FakePod {
  std::string name;
  std::string namespace_name;
  std::string container;
  std::string resource = "nvidia.com/gpu";
  std::vector<std::string> device_ids;
};

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string socket_path);
  ~FakeKubelet();
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  void set_pods(std::vector<FakePod> pods);
  const std::string& socket_path() const { return socket_path_; }
  int calls() const;

 private:
  struct Impl;
  std::string socket_path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zeus::test
