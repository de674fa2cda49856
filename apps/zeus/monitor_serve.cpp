#include "monitor_serve.h"

#include "zeus/common/errors.h"

#ifdef ZEUS_HAVE_METRICS_SERVER
#include "zeus/exporter/metrics_server.h"
#include "zeus/metrics/gpu_set_telemetry.h"
#include "zeus/metrics/node_sampler.h"
#endif
#include "zeus/kube/pod_resources.h"

namespace zeus::cli {

#ifdef ZEUS_HAVE_METRICS_SERVER
namespace {

class Serving final : public MetricsServe {
 public:
  Serving(const ServeOptions& serve, device::GpuSet* gpus, device::CpuSet* cpus) {
    if (gpus != nullptr) {
      telemetry_ = std::make_unique<metrics::GpuSetTelemetry>(*gpus);
    }
    metrics::NodeSamplerOptions options;
    options.period = serve.period;
    if (!serve.kubelet_socket.empty()) {
      kube::WatcherOptions watch;
      if (gpus != nullptr) {
        watch.mig_parent = [gpus](std::string_view mig) { return gpus->mig_parent_uuid(mig); };
      }
      pods_ = std::make_unique<kube::PodResourcesWatcher>(serve.kubelet_socket, watch);
      options.gpu_labels = [pods = pods_.get()](const metrics::GpuIdentity& gpu) {
        return kube::owner_labels(pods->owner_of_gpu(gpu.uuid, gpu.pci_address));
      };
    }
    sampler_ = std::make_unique<metrics::NodeSampler>(telemetry_.get(), cpus, options);
    exporter::MetricsServerOptions server;
    server.bind_address = serve.address;
    server.token_file = serve.token_file;
    server_ = std::make_unique<exporter::MetricsServer>(*sampler_, server);
  }
  std::string address() const override { return server_->address(); }

 private:
  std::unique_ptr<kube::PodResourcesWatcher> pods_;  // before the sampler that reads it
  std::unique_ptr<metrics::GpuTelemetry> telemetry_;
  std::unique_ptr<metrics::NodeSampler> sampler_;
  std::unique_ptr<exporter::MetricsServer> server_;
};

}  // namespace

std::unique_ptr<MetricsServe> serve_metrics(const ServeOptions& options, device::GpuSet* gpus,
                                            device::CpuSet* cpus) {
  return std::make_unique<Serving>(options, gpus, cpus);
}
#else
std::unique_ptr<MetricsServe> serve_metrics(const ServeOptions& options, device::GpuSet*,
                                            device::CpuSet*) {
  throw ConfigError("--serve " + options.address +
                    ": this zeus was built without its HTTP server (ZEUS_BUILD_ZEUSD=OFF, or "
                    "libmicrohttpd-dev missing); rebuild with it, or run zeusd "
                    "--metrics-bind-address");
}
#endif

}  // namespace zeus::cli
