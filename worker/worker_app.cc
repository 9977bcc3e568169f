#include "worker/worker_app.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "cluster/coordinator_client.h"
#include "cluster/node_info.h"
#include "common/zmq_transport.h"
#include "proto_msgs/codec.h"

namespace pstrain::worker {

absl::Status RunWorker(const WorkerOptions& options) {
  ZmqTransportOptions to;
  to.name = "worker";
  auto node = std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(to));
  PS_ASSIGN_OR_RETURN(std::string bound, node->Bind(options.bind));
  std::string endpoint = AdvertisedEndpoint(bound, options.advertise_host);
  RpcNode* raw = node.get();
  // The coordinator may tell this worker to stop (job aborted elsewhere).
  PS_RETURN_IF_ERROR(node->Start([raw](RpcRequest&& req) {
    auto d = proto::Decode(req.message);
    if (d.ok() && d->type() == proto::MsgType::kShutdown) {
      raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
      absl::Status why = proto::RemoteStatus(d->header());
      spdlog::error("stopped by the coordinator: {}", why.ToString());
      std::_Exit(why.ok() ? 0 : 3);
    }
    raw->Reply(req, proto::EncodeError(proto::Role::kWorker, -1,
                                       absl::UnimplementedError("workers serve no requests")));
  }));

  CoordinatorClientOptions co;
  co.coordinator = options.coordinator;
  co.role = proto::Role::kWorker;
  co.requested_rank = options.rank;
  co.endpoint = endpoint;
  co.connect_timeout = options.connect_timeout;
  CoordinatorClient coordinator(node.get(), co);
  PS_ASSIGN_OR_RETURN(proto::ClusterView first, coordinator.Register());
  int rank = first.your_rank;
  spdlog::info("worker {} of {} at {}", rank, first.num_workers, endpoint);
  coordinator.StartHeartbeats(absl::Milliseconds(first.heartbeat_interval_ms), nullptr);
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, coordinator.WaitForCluster(absl::Hours(1)));

  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(options.train.model));
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      coordinator.DefineTables(model->tables(), absl::Minutes(10)));
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  KvClientOptions ko;
  ko.rank = rank;
  KvClient kv(node.get(), layout, servers, ko);

  Trainer trainer(options.train, model.get(), &kv, &coordinator, rank, view.num_workers);
  absl::StatusOr<TrainResult> result = trainer.Run();
  if (!result.ok()) return result.status();
  PS_RETURN_IF_ERROR(coordinator.WorkerDone());
  coordinator.StopHeartbeats();
  node->Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::worker
