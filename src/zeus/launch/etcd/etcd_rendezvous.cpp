#include "zeus/launch/etcd/etcd_rendezvous.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/launch/etcd/gateway.h"
#include "zeus/launch/etcd/link.h"
#include "zeus/launch/etcd/mirror.h"
#include "zeus/launch/etcd/records.h"
#include "zeus/launch/etcd/round_logic.h"
#include "zeus/launch/ports.h"
#include "zeus/launch/rendezvous_auth.h"
#include "zeus/launch/round_rules.h"

namespace zeus::launch::etcd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Goal = Local::Goal;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A pipe used as a level-triggered flag: readable while set.
class Flag {
 public:
  Flag() {
    int fds[2];
    check_posix(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), "pipe", "etcd rendezvous");
    read_ = UniqueFd(fds[0]);
    write_ = UniqueFd(fds[1]);
  }
  void set() {
    const char c = 'x';
    [[maybe_unused]] const ssize_t n = ::write(write_.get(), &c, 1);
  }
  void clear() {
    char buffer[64];
    while (::read(read_.get(), buffer, sizeof buffer) > 0) {
    }
  }
  int fd() const { return read_.get(); }

 private:
  UniqueFd read_;
  UniqueFd write_;
};

}  // namespace

class EtcdRendezvous::Impl {
 public:
  explicit Impl(EtcdRendezvousOptions o)
      : o_(std::move(o.rendezvous)),
        say_(std::move(o.say)),
        keys_(o_.run_id),
        what_(fmt::format("rendezvous '{}'", o_.run_id)),
        gateway_(GatewayOptions{o_.etcd, request_timeout(o_)}),
        me_id_(random_hex16()),
        ring_(o.node.host, me_id_, o_.token),
        mirror_(gateway_, keys_.prefix, [this] { wake_.set(); }),
        reader_(keys_, o_.token, what_) {
    check_round_sizes(o_);
    me_.id = me_id_;
    me_.node = o.node;
    me_.link_port = ring_.port();
    started_ = Clock::now();
    if (say_) {
      say_(fmt::format("rendezvous '{}' in etcd at {} for {}..{} nodes (this node: {})", o_.run_id,
                       gateway_.endpoints_text(), o_.min_nodes, o_.max_nodes, me_.id));
    }
    warn_if_open();
    agent_ = std::thread([this] { run(); });
  }

  ~Impl() {
    stop_ = true;
    wake_.set();
    agent_.join();
    if (lease_ != 0 && !fatal_) {
      try {
        gateway_.revoke(lease_);  // the record goes now, not read_timeout later
      } catch (const Error& e) {
        logger().warn("{}: could not end this node's lease in etcd: {}", what_, e.what());
      }
    }
  }

  RendezvousRound join() {
    std::unique_lock lock(mu_);
    const auto deadline = Clock::now() + o_.join_timeout;
    me_.goal = Goal::kJoin;
    me_.failure.reset();
    me_.done = false;
    me_.lost.reset();
    joined_.reset();
    refused_.reset();
    notices_.clear();
    notice_flag_.clear();
    wake_.set();
    cv_.wait_until(lock, deadline, [&] { return joined_ || refused_ || fatal_; });
    if (fatal_) {
      throw DistError(*fatal_);
    }
    if (refused_) {
      me_.goal = Goal::kIdle;
      throw DistError(
          fmt::format("{} in etcd at {}: {}", what_, gateway_.endpoints_text(), *refused_));
    }
    if (!joined_) {
      me_.goal = Goal::kIdle;
      if (!gateway_.ever_answered()) {
        throw TimeoutError(fmt::format(
            "{}: etcd did not answer within join_timeout {:.1f} s ({}); start etcd, or fix "
            "--rdzv-endpoint",
            what_, seconds(o_.join_timeout), etcd_error_));
      }
      throw TimeoutError(fmt::format(
          "{} in etcd at {}: {} node(s) joined, at least {} needed, within join_timeout {:.1f} "
          "s; start the other nodes' zeus run with the same --rdzv-endpoint and --rdzv-id, or "
          "lower MIN in --nnodes",
          what_, gateway_.endpoints_text(), waiting_seen_, o_.min_nodes, seconds(o_.join_timeout)));
    }
    return *joined_;
  }

  std::optional<RendezvousNotice> wait_notice(milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !notices_.empty() || fatal_; });
    if (!notices_.empty()) {
      RendezvousNotice n = notices_.front();
      notices_.pop_front();
      notice_flag_.clear();
      return n;
    }
    if (fatal_) {
      return RendezvousNotice{RendezvousNotice::Kind::kAbort, *fatal_};
    }
    return std::nullopt;
  }

  void report_failure(const std::string& why) {
    std::lock_guard lock(mu_);
    if (me_.goal == Goal::kRun) {
      me_.failure = why;
      wake_.set();
    }
  }

  void report_done() {
    std::unique_lock lock(mu_);
    if (me_.goal != Goal::kRun) {
      return;
    }
    me_.done = true;
    wake_.set();
    const auto limit = std::max(o_.keep_alive, milliseconds(2'000));
    if (!cv_.wait_for(lock, limit, [&] { return me_.goal == Goal::kDone || fatal_; }) ||
        me_.goal != Goal::kDone) {
      throw DistError(fmt::format(
          "{} in etcd at {}: this node's done was not recorded within "
          "{:.1f} s{}",
          what_, gateway_.endpoints_text(), seconds(limit), fatal_ ? ": " + *fatal_ : ""));
    }
  }

  int fd() const { return notice_flag_.fd(); }

 private:
  // Without a token, whoever can write to etcd's keys can join the run, become its master or end
  // its rounds: said when etcd is reached over the network.
  void warn_if_open() const {
    if (o_.token) {
      return;
    }
    for (const std::string& endpoint : o_.etcd.endpoints) {
      if (!endpoint.starts_with("127.") && !endpoint.starts_with("localhost:") &&
          !endpoint.starts_with("[::1]:")) {
        logger().warn(
            "{} in etcd at {} without a token: anyone who can write to that etcd can join the "
            "run as a node, become its master (the address every worker connects to) and force "
            "every worker to restart. Close it: the same secret on every node in a file of mode "
            "600, --rdzv-conf token_file=PATH (or ZEUS_RDZV_TOKEN_FILE), and etcd's own "
            "authentication",
            what_, gateway_.endpoints_text());
        return;
      }
    }
  }

  static milliseconds request_timeout(const RendezvousOptions& o) {
    // Several tries fit in the silence that ends a node; at least 0.3 s for a loaded etcd.
    return std::clamp(o.keep_alive / 4, milliseconds(300), milliseconds(2'000));
  }

  void run() {
    while (!stop_) {
      try {
        if (lease_ == 0) {
          grant();
        }
        if (!mirror_.pump()) {
          mirror_.resync();
        }
        keep_alive();
        const auto wake_in = step();
        last_error_.clear();
        wait(wake_in);
      } catch (const EtcdUnavailable& e) {
        if (!unreachable(e.what())) {
          return;
        }
        wait(milliseconds(100));
      } catch (const Error& e) {
        fail(fmt::format("{} in etcd at {}: {}", what_, gateway_.endpoints_text(), e.what()));
        return;
      }
    }
  }

  // etcd did not answer: keeps trying while the silence is within the limits; false once it
  // is not (the run ends on this node).
  bool unreachable(const std::string& why) {
    last_error_ = why;
    {
      std::lock_guard lock(mu_);
      etcd_error_ = why;
    }
    const auto now = Clock::now();
    if (!gateway_.ever_answered()) {
      if (now - started_ > o_.join_timeout) {
        fail(fmt::format(
            "{}: etcd did not answer within join_timeout {:.1f} s ({}); start etcd, or fix "
            "--rdzv-endpoint",
            what_, seconds(o_.join_timeout), why));
        return false;
      }
      if (now >= next_note_) {
        logger().warn("{}: still no answer from etcd ({}); waiting up to join_timeout {:.1f} s",
                      what_, why, seconds(o_.join_timeout));
        next_note_ = now + std::chrono::seconds(10);
      }
      return true;
    }
    if (now - gateway_.last_answer() > o_.keep_alive) {
      fail(fmt::format(
          "{}: etcd answered nothing for {:.1f} s, more than read_timeout {:.1f} s: {}; this "
          "node's workers are stopped; start the run again once etcd is back",
          what_, seconds(now - gateway_.last_answer()), seconds(o_.keep_alive), why));
      return false;
    }
    return true;
  }

  void fail(const std::string& why) {
    logger().error("{}", why);
    std::lock_guard lock(mu_);
    fatal_ = why;
    notice_flag_.set();
    cv_.notify_all();
  }

  void grant() {
    const auto ttl = std::chrono::seconds(
        static_cast<int64_t>(std::ceil(std::chrono::duration<double>(o_.keep_alive).count())));
    const Gateway::Lease lease = gateway_.grant(std::max(ttl, std::chrono::seconds(1)));
    lease_ = lease.id;
    next_keep_alive_ = Clock::now() + o_.heartbeat;
    if (lease.ttl > ttl + std::chrono::seconds(1) && !said_ttl_) {
      said_ttl_ = true;
      logger().warn(
          "{}: etcd granted a lease of {} s for read_timeout {:.1f} s (its minimum): a "
          "silent node counts as gone after {} s",
          what_, lease.ttl.count(), seconds(o_.keep_alive), lease.ttl.count());
    }
  }

  void keep_alive() {
    if (Clock::now() < next_keep_alive_) {
      return;
    }
    next_keep_alive_ = Clock::now() + o_.heartbeat;
    if (!gateway_.keep_alive(lease_)) {
      logger().warn(
          "{}: this node's lease in etcd ended (it was silent for read_timeout); "
          "taking a new one",
          what_);
      lease_ = 0;
      grant();
    }
  }

  void wait(milliseconds timeout) {
    std::vector<pollfd> fds{{wake_.fd(), POLLIN, 0}};
    ring_.add_to(fds);
    const auto to_keep_alive = std::chrono::ceil<milliseconds>(next_keep_alive_ - Clock::now());
    timeout = std::clamp(std::min(timeout, to_keep_alive), milliseconds(0), milliseconds(1'000));
    ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    wake_.clear();
    ring_.handle(fds);
    if (ring_.lost()) {
      std::lock_guard lock(mu_);
      if (me_.goal == Goal::kRun && !me_.lost) {
        me_.lost = ring_.lost();
      }
    }
  }

  // Decides and acts until there is nothing to do; when to decide again at the latest.
  milliseconds step() {
    for (int i = 0; i < 64 && !stop_; ++i) {
      Local me;
      {
        std::lock_guard lock(mu_);
        me = me_;
      }
      me.known = known_;
      View view = reader_.view(mirror_, me.id, me.generation, lease_, vouched_);
      learn(view, me);
      const Decision d = decide(o_, view, me, since_grew(view));
      if (d.idle()) {
        return d.wake_in.value_or(milliseconds(1'000));
      }
      if (d.repair) {
        // At most one repair per heartbeat: two nodes that each hold a different state for the
        // newest (one of them about to learn that its lease ended) cannot race each other.
        const auto since = Clock::now() - last_repair_;
        if (since < o_.heartbeat) {
          return std::chrono::ceil<milliseconds>(o_.heartbeat - since);
        }
        last_repair_ = Clock::now();
      }
      act(d, view, me);
    }
    return milliseconds(0);
  }

  // What every view teaches: the newest state of this node's generation, the open round's
  // waiting set.
  void learn(const View& view, Local& me) {
    if (view.state && view.state->generation == me.generation &&
        (!known_ || known_->generation != me.generation || view.state->step > known_->step)) {
      if (known_ && known_->round != view.state->round) {
        vouched_.clear();
      }
      known_ = view.state;
      me.known = known_;
    }
    std::lock_guard lock(mu_);
    waiting_seen_ = waiting_count(view);
  }

  milliseconds since_grew(const View& view) {
    const auto now = Clock::now();
    const int n = waiting_count(view);
    const std::string round =
        view.state ? fmt::format("{}/{}", view.state->generation, view.state->round) : "";
    if (round != grew_round_ || n > grew_count_) {
      grew_round_ = round;
      grew_at_ = now;
    }
    grew_count_ = n;
    return std::chrono::duration_cast<milliseconds>(now - grew_at_);
  }

  void act(const Decision& d, const View& view, const Local& me) {
    if (d.refuse || d.notice || d.joined) {
      deliver(d);
      return;
    }
    if (d.want) {
      put_record(view.state->generation, *d.want, me);
      return;
    }
    if (d.departed && vouch(*d.departed)) {
      return;
    }
    write_state(d, view, me);
  }

  void deliver(const Decision& d) {
    std::unique_lock lock(mu_);
    if (d.refuse) {
      refused_ = d.refuse;
      me_.goal = Goal::kIdle;
    } else if (d.notice) {
      notices_.push_back(*d.notice);
      notice_flag_.set();
      me_.goal = Goal::kIdle;
      ring_.unwatch();
    } else if (d.joined) {
      joined_ = d.joined;
      me_.goal = Goal::kRun;
      me_.round = d.joined->round;
    }
    cv_.notify_all();
    lock.unlock();
    if (d.joined) {
      watch_successor(*d.joined);
    }
  }

  // The ring's successor of this node in its round (Note [etcd liveness ring]).
  void watch_successor(const RendezvousRound& round) {
    if (!known_ || round.nnodes < 2 ||
        known_->members.size() != static_cast<size_t>(round.nnodes)) {
      ring_.unwatch();
      return;
    }
    const Member& next = known_->members[static_cast<size_t>((round.node_rank + 1) % round.nnodes)];
    if (!ring_.watch(next.id, next.host, next.link_port)) {
      std::lock_guard lock(mu_);
      if (me_.goal == Goal::kRun) {
        me_.lost = next.id;
      }
    }
  }

  // A member's record is gone: etcd still keeping its lease means someone else deleted or
  // overwrote it, and the member has not left. True when vouched for.
  bool vouch(const std::string& id) {
    const int64_t lease = reader_.last_lease(id);
    if (lease == 0 || !gateway_.time_to_live(lease)) {
      return false;
    }
    vouched_.insert(id);
    logger().warn(
        "{}: the record of node {} in etcd is gone or unreadable while its lease lives: someone "
        "without the run's token deleted or rewrote it; the node has not left. Turn on etcd's "
        "authentication (--rdzv-conf user/password_file, client certificates) so that only the "
        "run's launchers can write there",
        what_, id);
    return true;
  }

  void put_record(const std::string& generation, int want, const Local& me) {
    const std::string key = keys_.node(generation, me.id);
    NodeRecord record{me.node.host, me.node.nproc, me.link_port, want, lease_, 0};
    const std::string value = encode_node(record, key, o_.token);
    std::vector<Op> ops{{Op::Kind::kPut, key, value, lease_, ""}};
    const std::string old = me.generation.empty() ? "" : keys_.node(me.generation, me.id);
    if (!old.empty() && old != key) {
      ops.push_back({Op::Kind::kDelete, old, "", 0, ""});
    }
    const TxnResult r = gateway_.txn({}, ops, {});
    mirror_.put({key, value, r.revision, r.revision, lease_});
    if (!old.empty() && old != key) {
      mirror_.erase(old, r.revision);
    }
    std::lock_guard lock(mu_);
    me_.generation = generation;
  }

  void write_state(Decision d, const View& view, const Local& me) {
    RunState next = *d.write;
    if (d.pick_port) {
      next.master_port = pick_free_port(me.node.host);
    }
    const std::string state_key = keys_.state();
    const std::string state_value = encode_state(next, state_key, o_.token);
    std::vector<Op> ops{{Op::Kind::kPut, state_key, state_value, 0, ""}};
    std::string record_key;
    std::string record_value;
    if (d.fresh_generation) {
      record_key = keys_.node(next.generation, me.id);
      record_value = encode_node({me.node.host, me.node.nproc, me.link_port, 0, lease_, 0},
                                 record_key, o_.token);
      ops.push_back({Op::Kind::kPut, record_key, record_value, lease_, ""});
    }
    // Failing, the transaction reads every key of the run at its revision: the next decision
    // sees the state another node wrote together with the records it wrote with it.
    const TxnResult r =
        gateway_.txn({{Compare::Target::kMod, state_key, "", view.state_mod_revision}}, ops,
                     {{Op::Kind::kRange, keys_.prefix, "", 0, prefix_end(keys_.prefix)}});
    if (!r.succeeded) {
      for (RangeResult range : r.ranges) {
        range.revision = r.revision;
        mirror_.replace(range);
      }
      return;  // another node changed it first: decide again on what it wrote
    }
    logger().info("{}: {}", what_, d.log);
    mirror_.put({state_key, state_value, r.revision, r.revision, 0});
    known_ = next;
    std::lock_guard lock(mu_);
    if (d.fresh_generation) {
      mirror_.put({record_key, record_value, r.revision, r.revision, lease_});
      me_.generation = next.generation;
    }
    if (d.reports_failure && me_.goal == Goal::kRun) {
      me_.failure.reset();
      me_.goal = Goal::kFailed;
    } else if (d.reports_done && me_.goal == Goal::kRun) {
      me_.done = false;
      me_.goal = Goal::kDone;
      cv_.notify_all();
    }
  }

  RendezvousOptions o_;
  std::function<void(const std::string&)> say_;
  Keys keys_;
  std::string what_;  // "rendezvous 'id'"
  Gateway gateway_;
  std::string me_id_;  // this node's id in the run: random, a new one per launcher
  LinkRing ring_;
  Flag wake_;  // wakes the agent: the watch, the launcher's requests
  Mirror mirror_;
  RecordReader reader_;
  Clock::time_point started_;
  std::atomic<bool> stop_{false};

  // The agent's own.
  int64_t lease_ = 0;
  Clock::time_point next_keep_alive_{};
  Clock::time_point next_note_{};
  bool said_ttl_ = false;
  std::string last_error_;
  std::optional<RunState> known_;
  std::set<std::string> vouched_;
  Clock::time_point last_repair_{};
  std::string grew_round_;
  int grew_count_ = 0;
  Clock::time_point grew_at_{};

  // Shared with the launcher's thread, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  Local me_;
  std::optional<RendezvousRound> joined_;
  std::optional<std::string> refused_;
  std::optional<std::string> fatal_;
  std::deque<RendezvousNotice> notices_;
  Flag notice_flag_;  // readable while a notice (or the fatal error) waits: fd()
  int waiting_seen_ = 0;
  std::string etcd_error_;  // the last time etcd did not answer: why

  std::thread agent_;  // last: it starts once everything above is made
};

EtcdRendezvous::EtcdRendezvous(EtcdRendezvousOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
EtcdRendezvous::~EtcdRendezvous() = default;
RendezvousRound EtcdRendezvous::join() {
  return impl_->join();
}
std::optional<RendezvousNotice> EtcdRendezvous::wait_notice(milliseconds timeout) {
  return impl_->wait_notice(timeout);
}
void EtcdRendezvous::report_failure(const std::string& why) {
  impl_->report_failure(why);
}
void EtcdRendezvous::report_done() {
  impl_->report_done();
}
int EtcdRendezvous::fd() const {
  return impl_->fd();
}

}  // namespace zeus::launch::etcd
