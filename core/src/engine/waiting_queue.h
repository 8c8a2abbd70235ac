// The engine's waiting queue together with the views a scheduler reads of it (internal to the
// core). A waiting request's view does not change while it waits (its tokens, computed prefix
// and held blocks are fixed from enqueue to admission), so the views are made once, at enqueue,
// and kept contiguous beside the queue: a step hands the scheduler a span instead of rebuilding
// one view per waiting request, and costs the same whatever the queue's length. Taking from
// either end is O(1) (a first-come-first-served scheduler admits from the front); from the
// middle it moves the shorter side.
#pragma once
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "inferlab/plugin/scheduler.h"

namespace inferlab::detail {

struct Seq;

class WaitingQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  std::size_t size() const { return items_.size() - head_; }
  Seq* front() const { return items_[head_]; }
  // The views, in queue order (what SchedulerInput::waiting shows).
  std::span<const SeqView> views() const { return std::span<const SeqView>(views_).subspan(head_); }
  // The queued items in order, for walks that are not per step (timeouts, error messages).
  std::span<Seq* const> items() const { return std::span<Seq* const>(items_).subspan(head_); }

  void push_back(Seq* item, const SeqView& view) {
    items_.push_back(item);
    views_.push_back(view);
  }
  void push_front(Seq* item, const SeqView& view) {
    if (head_ == 0) {
      // Room at the front for as many more as the queue holds (amortised O(1) per push).
      const std::size_t room = std::max<std::size_t>(16, size());
      items_.insert(items_.begin(), room, nullptr);
      views_.insert(views_.begin(), room, SeqView{});
      head_ = room;
    }
    --head_;
    items_[head_] = item;
    views_[head_] = view;
  }
  // Removes `item` (which must be queued); false when it is not.
  bool erase(Seq* item) {
    std::size_t i = head_;
    while (i < items_.size() && items_[i] != item) ++i;
    if (i == items_.size()) return false;
    if (i - head_ < items_.size() - i) {  // shift the front part right by one
      for (std::size_t k = i; k > head_; --k) {
        items_[k] = items_[k - 1];
        views_[k] = views_[k - 1];
      }
      ++head_;
    } else {  // shift the back part left by one
      for (std::size_t k = i; k + 1 < items_.size(); ++k) {
        items_[k] = items_[k + 1];
        views_[k] = views_[k + 1];
      }
      items_.pop_back();
      views_.pop_back();
    }
    // Give back the taken front once it outweighs what is queued (amortised O(1) per take).
    if (head_ > 1024 && head_ > size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      views_.erase(views_.begin(), views_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return true;
  }

 private:
  std::vector<Seq*> items_;
  std::vector<SeqView> views_;
  std::size_t head_ = 0;  // items_[head_, size) are queued; [0, head_) is room to push to the front
};

}  // namespace inferlab::detail
