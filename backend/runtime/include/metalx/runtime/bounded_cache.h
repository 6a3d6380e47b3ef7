// A thread-safe least-recently-used cache with a fixed capacity.
//
// Every cache in metalx (pipelines, run-time compiled libraries, kernels) is one of
// these, so none grows without bound as shapes or sources vary, and each can be
// emptied (empty_cache releases them too).
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace metalx::rt {

struct CacheStats {
  size_t size, capacity, hits, misses, evictions;
};

template <class Key, class Value, class Hash = std::hash<Key>>
class BoundedCache {
 public:
  explicit BoundedCache(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // Returns the cached value for `key`, creating it with `make()` on a miss. `make`
  // runs without the lock held, so a slow creation (a compile) does not block
  // lookups of other keys; if two threads race on one key, the first insert wins.
  template <class Make>
  Value getOrCreate(const Key& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = index_.find(key); it != index_.end()) {
        ++hits_;
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
      ++misses_;
    }
    Value made = make();
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) return it->second->second;
    order_.emplace_front(key, made);
    index_[key] = order_.begin();
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    return made;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    order_.clear();
  }

  void setCapacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = capacity ? capacity : 1;
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
  }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {order_.size(), capacity_, hits_, misses_, evictions_};
  }

 private:
  using Entry = std::pair<Key, Value>;
  mutable std::mutex mutex_;
  size_t capacity_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
  size_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace metalx::rt
