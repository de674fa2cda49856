#include "fake_kubelet.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <mutex>

#include "podresources/v1/api.grpc.pb.h"

namespace zeus::test {

struct FakeKubelet::Impl final : public v1::PodResourcesLister::Service {
  std::mutex mu;
  std::vector<FakePod> pods;
  std::atomic<int> calls{0};
  std::unique_ptr<grpc::Server> server;

  grpc::Status List(grpc::ServerContext* /*context*/, const v1::ListPodResourcesRequest* /*req*/,
                    v1::ListPodResourcesResponse* response) override {
    ++calls;
    std::lock_guard lock(mu);
    for (const FakePod& p : pods) {
      v1::PodResources* pod = response->add_pod_resources();
      pod->set_name(p.name);
      pod->set_namespace_(p.namespace_name);
      v1::ContainerResources* c = pod->add_containers();
      c->set_name(p.container);
      v1::ContainerDevices* d = c->add_devices();
      d->set_resource_name(p.resource);
      for (const auto& id : p.device_ids) {
        d->add_device_ids(id);
      }
    }
    return grpc::Status::OK;
  }
};

FakeKubelet::FakeKubelet(std::string socket_path)
    : socket_path_(std::move(socket_path)), impl_(std::make_unique<Impl>()) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path_, grpc::InsecureServerCredentials());
  builder.RegisterService(impl_.get());
  impl_->server = builder.BuildAndStart();
}

FakeKubelet::~FakeKubelet() {
  if (impl_->server) {
    impl_->server->Shutdown();
  }
}

void FakeKubelet::set_pods(std::vector<FakePod> pods) {
  std::lock_guard lock(impl_->mu);
  impl_->pods = std::move(pods);
}

int FakeKubelet::calls() const {
  return impl_->calls;
}

}  // namespace zeus::test
