// StoreHistory: the HistoryReader proposers get (server/proposer.h), reading
// a Store. Reads only: the coordinator's measure callbacks are the store's
// only writer. Thread-safety: that of Store (safe to share).
#ifndef ANVIL_SERVER_HISTORY_H_
#define ANVIL_SERVER_HISTORY_H_

#include "server/proposer.h"
#include "store/store.h"

namespace anvil {

class StoreHistory : public HistoryReader {
 public:
  explicit StoreHistory(Store& store) : store_(store) {}  // REQUIRES: store outlives this

  absl::StatusOr<std::vector<StoredMeasurement>> SearchHistory(
      const v1::Problem& problem, const std::optional<std::string>& job_id) override {
    return store_.SearchHistory(problem, job_id);
  }
  absl::StatusOr<ExemplarSet> Exemplars(const v1::Problem& problem, const std::string& figure,
                                        int n) override {
    return store_.Exemplars(problem, figure, n);
  }
  absl::StatusOr<v1::Candidate> GetCandidate(const std::string& id) override {
    return store_.GetCandidate(id);
  }
  absl::StatusOr<std::optional<v1::Build>> LatestBuild(const std::string& candidate_id) override {
    return store_.LatestBuild(candidate_id);
  }
  absl::StatusOr<std::vector<v1::Problem>> Problems(const std::string& gpu) override {
    return store_.ListProblems(gpu);
  }

 private:
  Store& store_;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_HISTORY_H_
