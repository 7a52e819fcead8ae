// Michael's CAS-based lock-free ordered list (Moazeni 2013, Figs 20-22; M. M.
// Michael, "High performance dynamic lock-free hash tables and list-based
// sets", SPAA 2002) over the node pool of hash_table_views.h, and the PH[n]
// operations of Figure 24 on top of it. ONE source for both implementations:
// hash_table_cpu.cc instantiates it with a std::thread memory policy,
// hash_table.cu with a CUDA device one, so the CPU table is the reference for
// exactly the algorithm the GPU runs. Internal to kernels/hashtable.
//
// A memory policy `Mem` provides (all called by one thread on its own behalf):
//   HashNode* nodes()                        the pool
//   LinkWord load_link(const LinkWord* w)    a strong (non-cached, not
//                                            elidable) load of a link word;
//                                            acquire on the CPU
//   unsigned long long load_payload(const unsigned long long* f)
//                                            a strong load of a node's key or value
//   void store_private(unsigned long long* f, unsigned long long v)
//                                            a store to a node not yet linked
//   void publish_fence()                     orders the stores to a new node
//                                            before the CAS that links it
//   bool cas_link(LinkWord* w, LinkWord expected, LinkWord desired)
//                                            true iff *w was `expected` and is
//                                            now `desired`; release on the CPU
//   std::uint32_t allocate()                 a free node, kNullIndex if none
//   void retire(std::uint32_t index)         hand a node that is no longer
//                                            reachable (or never was) to the
//                                            reclamation of this batch
//
// Invariants the code relies on (docs/hashtable.md argues them):
//   * A node's key and value never change while any thread of the batch may
//     reach it: nodes return to the free pool only between batches.
//   * A node is marked before it is unlinked, a marked link word never
//     changes again, and exactly one CAS unlinks a given node (its caller
//     retires it), so every node is retired at most once per batch.
#pragma once

#include <cstdint>

#include "kernels/hashtable/hash_functions.h"
#include "kernels/hashtable/hash_table.h"
#include "kernels/hashtable/hash_table_views.h"

#if defined(__CUDACC__)
#define GW_HT_LIST_FN __device__ __forceinline__
#else
#define GW_HT_LIST_FN inline
#endif

namespace gw::kernels::hashtable {

// Where Find stopped: `prev` is the link word (a bucket head or a node's next)
// that linked `cur`; `cur` is the first unmarked node with key >= the target
// (kNullIndex at the end of the chain); `next` is cur's link word as read,
// unmarked.
struct ListWindow {
  LinkWord* prev = nullptr;
  std::uint32_t cur = kNullIndex;
  LinkWord next = kEmptyLink;
};

// Michael's Find. Positions `window` and returns true iff window.cur holds
// `key`. Marked nodes met on the way are unlinked (and retired by whoever's
// CAS unlinks them). Restarts from the head whenever *prev changed between
// reading cur and checking it (line A of Figure 21) or an unlink CAS fails.
template <class Mem>
GW_HT_LIST_FN bool list_find(Mem& mem, LinkWord* head, unsigned long long key, ListWindow& window) {
  HashNode* const nodes = mem.nodes();
  for (;;) {  // try_again
    LinkWord* prev = head;
    LinkWord cur_word = mem.load_link(prev);  // a bucket head is never marked
    bool restart = false;
    while (!restart) {
      const std::uint32_t cur = link_index(cur_word);
      if (cur == kNullIndex) {
        window.prev = prev;
        window.cur = kNullIndex;
        window.next = kEmptyLink;
        return false;
      }
      HashNode& node = nodes[cur];
      const LinkWord next = mem.load_link(&node.next);
      const unsigned long long cur_key = mem.load_payload(&node.key);
      if (mem.load_link(prev) != make_link(cur)) {  // line A: the snapshot is stale
        restart = true;
        continue;
      }
      if (!link_marked(next)) {
        if (cur_key >= key) {
          window.prev = prev;
          window.cur = cur;
          window.next = next;
          return cur_key == key;
        }
        prev = &node.next;
        cur_word = next;
      } else {
        // cur is logically deleted: swing prev past it. Only the winner of
        // this CAS retires cur; a loser restarts (prev changed under it).
        const LinkWord successor = make_link(link_index(next));
        if (mem.cas_link(prev, make_link(cur), successor)) {
          mem.retire(cur);
          cur_word = successor;
        } else {
          restart = true;
        }
      }
    }
  }
}

template <class Mem>
GW_HT_LIST_FN HashResult list_search(Mem& mem, LinkWord* head, unsigned long long key) {
  ListWindow window;
  if (!list_find(mem, head, key, window)) return HashResult{0, OpStatus::kNotFound};
  return HashResult{mem.load_payload(&mem.nodes()[window.cur].value), OpStatus::kFound};
}

// Figure 21's Insert with the node allocated lazily: only an insert that
// found its key absent claims a node, and it keeps that node across retries.
// If a retry then finds the key present, the never-linked node is retired.
template <class Mem>
GW_HT_LIST_FN HashResult list_insert(Mem& mem, LinkWord* head, unsigned long long key,
                                     unsigned long long value) {
  HashNode* const nodes = mem.nodes();
  std::uint32_t fresh = kNullIndex;
  ListWindow window;
  for (;;) {
    if (list_find(mem, head, key, window)) {
      const unsigned long long existing = mem.load_payload(&nodes[window.cur].value);
      if (fresh != kNullIndex) mem.retire(fresh);
      return HashResult{existing, OpStatus::kDuplicate};
    }
    if (fresh == kNullIndex) {
      fresh = mem.allocate();
      if (fresh == kNullIndex) return HashResult{0, OpStatus::kPoolExhausted};
      mem.store_private(&nodes[fresh].key, key);
      mem.store_private(&nodes[fresh].value, value);
    }
    mem.store_private(&nodes[fresh].next, make_link(window.cur));
    mem.publish_fence();  // key, value and next must be visible before the node is
    if (mem.cas_link(window.prev, make_link(window.cur), make_link(fresh)))  // line B
      return HashResult{0, OpStatus::kInserted};
  }
}

// Figure 22's Delete: mark cur (line C; the linearization point), then try to
// unlink it (line D); if that fails, a Find unlinks it.
template <class Mem>
GW_HT_LIST_FN HashResult list_delete(Mem& mem, LinkWord* head, unsigned long long key) {
  HashNode* const nodes = mem.nodes();
  ListWindow window;
  for (;;) {
    if (!list_find(mem, head, key, window)) return HashResult{0, OpStatus::kNotFound};
    const LinkWord next = window.next;  // unmarked, as Find read it
    if (!mem.cas_link(&nodes[window.cur].next, next, next | kMarkBit)) continue;  // line C
    const unsigned long long removed = mem.load_payload(&nodes[window.cur].value);
    if (mem.cas_link(window.prev, make_link(window.cur), make_link(link_index(next)))) {  // D
      mem.retire(window.cur);
    } else {
      ListWindow ignored;
      list_find(mem, head, key, ignored);  // unlinks the marked node for us
    }
    return HashResult{removed, OpStatus::kDeleted};
  }
}

// The bucket head of `key`: heads[TA(k) * m + h(k) mod m].
GW_HT_LIST_FN LinkWord* bucket_head(const TableGeometry& geometry, LinkWord* heads,
                                    unsigned long long key) {
  const std::uint32_t table =
      assign_table(static_cast<TableAssignment>(geometry.table_assignment), key, geometry.tables);
  const std::uint32_t bucket =
      assign_bucket(static_cast<HashFunction>(geometry.hash_function), key, geometry.buckets);
  return heads + static_cast<unsigned long long>(table) * geometry.buckets + bucket;
}

// Figure 24: one operation of a batch against PH[n].
template <class Mem>
GW_HT_LIST_FN HashResult apply_op(Mem& mem, const TableGeometry& geometry, LinkWord* heads,
                                  const HashOp& op) {
  LinkWord* const head = bucket_head(geometry, heads, op.key);
  switch (op.kind) {
    case OpKind::kSearch:
      return list_search(mem, head, op.key);
    case OpKind::kInsert:
      return list_insert(mem, head, op.key, op.value);
    case OpKind::kDelete:
      return list_delete(mem, head, op.key);
  }
  return HashResult{0, OpStatus::kInvalidOp};
}

}  // namespace gw::kernels::hashtable
