// A coordinator started on the journal of a finished job (coordinator.h,
// ServeFinishedJob): tells the job's nodes so, then exits.
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cluster/coordinator_client.h"
#include "cluster/node_info.h"
#include "server/coordinator/cluster_link.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

using proto::MsgType;
using proto::Role;

absl::Status ServeFinishedJob(const CoordinatorOptions& options, const JobJournal& job,
                              std::unique_ptr<Transport> transport, absl::Duration wait,
                              const std::function<absl::Status(const std::string&)>& on_listening) {
  const absl::Status answer = NothingLeftToDo(absl::StrCat(
      "the job journaled in ", options.checkpoint.dir, " finished",
      job.final_step > 0 ? absl::StrCat(" at step ", job.final_step) : "", " (", job.ended,
      "): nothing left to train. Start the coordinator with --continue_job to train on from "
      "its latest checkpoint, --new_job to train a new job from scratch, or use another "
      "--checkpoint_dir."));
  RpcNode node(std::move(transport));
  PS_ASSIGN_OR_RETURN(std::string bound, node.Bind(options.bind));
  absl::Mutex mu;
  std::set<std::tuple<Role, std::string, uint64_t>> told;  // (role, endpoint, incarnation)
  int servers = 0;
  int workers = 0;
  PS_RETURN_IF_ERROR(node.Start([&](RpcRequest&& req) {
    absl::StatusOr<proto::Decoded> d = proto::Decode(req.message);
    if (d.ok() && d->type() == MsgType::kRegister) {
      if (auto body = d->body<proto::RegisterRequest>(); body.ok()) {
        absl::MutexLock lock(&mu);
        const proto::NodeInfo& n = body->node;
        if (told.insert({n.role, n.endpoint, n.incarnation}).second) {
          (n.role == Role::kServer ? servers : workers) += 1;
        }
      }
    }
    // Every request, a registration or not, gets the same answer.
    node.Reply(req, CoordinatorError(answer));
  }));
  PS_RETURN_IF_ERROR(on_listening(AdvertisedEndpoint(bound, options.advertise_host)));
  const int want_servers = options.num_servers;
  const int want_workers = options.num_workers;
  {
    absl::MutexLock lock(&mu);
    auto all_told = [&] { return servers >= want_servers && workers >= want_workers; };
    if (!mu.AwaitWithTimeout(absl::Condition(&all_told), wait)) {
      spdlog::info("told {} of {} servers and {} of {} workers that the job finished; not "
                   "waiting longer than {} for the others",
                   servers, want_servers, workers, want_workers, absl::FormatDuration(wait));
    } else {
      spdlog::info("told all {} servers and {} workers that the job finished", servers, workers);
    }
  }
  // The last replies leave before the socket closes (linger 0).
  absl::SleepFor(absl::Milliseconds(200));
  node.Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::server
