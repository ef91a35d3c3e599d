// Package cow provides the persistent copy-on-write structures cowstate is
// built on: Map, a canonical hash trie keyed by a caller-supplied 64-bit
// hash, and Tree, an ordered B+tree with a caller-supplied compare. It knows
// nothing about state, keys or timers.
//
// # Ownership epochs
//
// Structures are grouped under an Owner, which belongs to one writer
// goroutine. Every node records the owner epoch it was created in; nodes
// newer than the newest live capture are written in place, older ones are
// copied once (see Owner for the invariant). So:
//
//   - Owner.Capture (or Map.Snapshot / Tree.Snapshot) freezes every
//     structure of the owner in O(1), whatever their size;
//   - with no live capture, writes run in place at mutable-structure speed;
//   - with captures live, the first write to a node per epoch copies it
//     (and its path), later writes in the same epoch are in place;
//   - a Map copies branches, and leaves of pointer-free entries, into the
//     memory of nodes that only released captures reached, so with
//     captures taken and released at a steady rate its copies allocate
//     next to nothing (see map_reuse.go and map_reuse_branch.go);
//   - writes that change nothing (an equal value, an absent key) copy
//     nothing, so DiffMaps and DiffTrees report only real changes, and they
//     skip every subtree two versions share by pointer: their cost follows
//     the changes, not the size.
//
// Check verifies every structural invariant of a structure. Building with the
// invariants tag (go test -tags invariants ./cow/) runs it after every
// mutation.
//
// # Caveats
//
//   - Single writer: every method of Map, Tree and Owner except
//     Capture.Release and the read methods of snapshots must be called from
//     the owner's writer goroutine. Snapshots may be read by any number of
//     goroutines concurrently with the writer. Like the builtin map, a
//     mutation that overlaps another one on the same owner panics with
//     "cowstate: concurrent writes" (best effort: see Owner).
//   - Snapshot lifetime: reading a snapshot after its capture is released
//     panics ("cow: read of a released snapshot", an error matching
//     ErrReleased, so code that recovers it can tell it from other
//     panics). Views taken under one
//     Capture share it; releasing any of them releases all of them.
//     Release only once every read of the capture has returned: the
//     writer reuses the memory of nodes no live capture reaches, so a read
//     still running when its capture is released may see other entries
//     (and -race reports it).
//   - Aliasing: keys and values are stored by value. If V holds pointers,
//     slices or maps, the structure copies the pointer, not what it points to:
//     never mutate a value after handing it in, and treat values read from a
//     snapshot as read-only. Use persistent values (a Map or Tree snapshot)
//     for nested collections.
//   - Determinism: Map iterates in hash order, which is deterministic for a
//     deterministic hash; keys whose 64-bit hashes collide keep insertion
//     order among themselves.
package cow
