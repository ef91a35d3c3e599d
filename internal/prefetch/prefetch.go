// Package prefetch asks the CPU to bring memory into its caches ahead of
// use, without waiting for it.
//
// A Go load that misses the cache holds its place in the CPU's reorder
// window until its line arrives, so touching memory ahead with loads
// overlaps only as much work as that window holds (a few hundred
// instructions); a prefetch instruction retires at once, and the code
// after it runs on while the line comes. It is a hint: it reads nothing
// the program sees and cannot fault, and on a platform without an
// implementation, or built with the purego tag, it does nothing.
package prefetch

import "unsafe"

// Range asks for every cache line of the size bytes at p. Any address is
// safe to prefetch; p should point into memory the caller keeps alive, or
// the request is wasted. Cost: a call and one instruction a 64-byte line;
// any goroutine.
func Range(p unsafe.Pointer, size uintptr) {
	if size != 0 {
		lines(p, size)
	}
}
