#include "server/coordinator/rendezvous_store.h"

#include "absl/time/clock.h"

namespace pstrain::server {

void RendezvousStore::Set(const std::string& key, Buffer value) {
  Buffer& slot = values_[key];
  slot = std::move(value);
  if (on_change_) on_change_(key, &slot);  // on disk before anyone reads it
  auto [begin, end] = waiters_.equal_range(key);
  std::vector<GetReply> ready;
  for (auto it = begin; it != end; ++it) ready.push_back(std::move(it->second.reply));
  waiters_.erase(begin, end);
  for (auto& r : ready) r(&slot);
}

void RendezvousStore::Get(const std::string& key, absl::Time deadline, GetReply reply) {
  auto it = values_.find(key);
  if (it != values_.end()) {
    reply(&it->second);
  } else if (deadline <= absl::Now()) {
    reply(nullptr);
  } else {
    waiters_.emplace(key, GetWaiter{deadline, std::move(reply)});
  }
}

void RendezvousStore::EnterBarrier(const std::string& name, const std::string& member,
                                   int participants, absl::Time deadline, BarrierReply reply) {
  Barrier& b = barriers_[name];
  b.participants = participants;
  b.members[member] = {deadline, std::move(reply)};
  if (static_cast<int>(b.members.size()) < participants) return;
  std::map<std::string, std::pair<absl::Time, BarrierReply>> done;
  done.swap(b.members);
  barriers_.erase(name);
  for (auto& [m, entry] : done) entry.second(true);
}

std::vector<std::string> RendezvousStore::BarrierMembers(const std::string& name) const {
  std::vector<std::string> members;
  auto it = barriers_.find(name);
  if (it == barriers_.end()) return members;
  for (const auto& [m, entry] : it->second.members) members.push_back(m);
  return members;
}

void RendezvousStore::Expire(absl::Time now) {
  std::vector<GetReply> expired;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline <= now) {
      expired.push_back(std::move(it->second.reply));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& r : expired) r(nullptr);
  std::vector<BarrierReply> failed;
  for (auto& [name, b] : barriers_) {
    for (auto it = b.members.begin(); it != b.members.end();) {
      if (it->second.first <= now) {
        failed.push_back(std::move(it->second.second));
        it = b.members.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& r : failed) r(false);
}

void RendezvousStore::ShrinkBarriers(int from, int to) {
  std::vector<BarrierReply> ready;
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    Barrier& b = it->second;
    if (b.participants == from) b.participants = to;
    if (b.participants == to && static_cast<int>(b.members.size()) >= to) {
      for (auto& [m, entry] : b.members) ready.push_back(std::move(entry.second));
      it = barriers_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& r : ready) r(true);
}

void RendezvousStore::GrowBarriers(int from, int to) {
  for (auto& [name, b] : barriers_) {
    if (b.participants == from) b.participants = to;
  }
}

void RendezvousStore::AbortBarriers() {
  std::vector<BarrierReply> failed;
  for (auto& [name, b] : barriers_) {
    for (auto& [member, entry] : b.members) failed.push_back(std::move(entry.second));
  }
  barriers_.clear();
  for (auto& r : failed) r(false);
}

}  // namespace pstrain::server
