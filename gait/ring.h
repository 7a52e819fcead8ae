// A FIFO with random access whose storage is reused: the stride tracker's
// per-sample queues, which would otherwise allocate and free as samples come
// and go. Grows (doubling) only when pushed past its capacity, so a caller
// that bounds what it keeps never allocates after the first seconds.
#pragma once

#include <cstddef>
#include <vector>

namespace gw::gait {

template <typename T>
class Ring {
 public:
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Element i from the front (0 = oldest).
  T& operator[](std::size_t i) { return data_[(head_ + i) & mask_]; }
  const T& operator[](std::size_t i) const { return data_[(head_ + i) & mask_]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  void push_back(const T& value) {
    if (size_ == data_.size()) grow();
    data_[(head_ + size_) & mask_] = value;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    --size_;
  }
  void pop_back() { --size_; }
  void clear() {
    head_ = 0;
    size_ = 0;
  }

 private:
  void grow() {
    std::vector<T> bigger(data_.empty() ? 64 : 2 * data_.size());
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
    data_.swap(bigger);
    mask_ = data_.size() - 1;
    head_ = 0;
  }

  std::vector<T> data_;
  std::size_t mask_ = 0;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace gw::gait
