// Package arena provides off-heap memory for the stepvm virtual machine.
//
// Each flow root owns an [Arena]: a chunked bump allocator with per-size-class
// free lists over memory obtained from the operating system with mmap. The Go
// garbage collector never scans that memory and never sees it allocated, so
// the VM can create and discard step and frame records at a high rate without
// generating GC work.
//
// An arena keeps what must outlive its Arena value (its chunk list, its byte
// counts and its owner's mark) in the header of its first chunk, so that a
// [Ref] can return its memory after the owner is gone: the VM attaches one to
// each flow root's GC cleanup. The first chunk also holds the owner's fixed
// block ([Arena.Fixed]), where the VM keeps a flow's root frame.
//
// [Arena.Reuse] and [Arena.Recycle] are the fast paths of Alloc and Free for
// blocks of up to [SmallSize] bytes, small enough for the compiler to inline
// into the VM's node allocation.
//
// Only pointer-free data may be stored in arena memory. Every block of up to
// 16 KiB and every fixed block lies in one reserved region of address space,
// so a [Link], a 32-bit offset into that region, names it: the VM links its
// step records with Links, and the free lists are linked the same way, so
// that building and unlinking them are plain stores, where storing even a
// pointer to off-heap memory passes through the garbage collector's write
// barrier while a collection is marking. (Chunk headers, written once per
// chunk, still hold pointers into arena memory: those are not Go heap
// pointers, and the collector ignores them.)
//
// An Arena is owned by one goroutine at a time and does no locking. Its chunks
// come from a single process-wide source, which is safe for concurrent use, so
// that an abandoned arena can be returned from any goroutine (see
// [Arena.Abandon]). The source keeps the memory of chunks of up to a slab
// (1 MiB): chunks that arenas give back are pooled and handed out again,
// lowest address first (which keeps the chunks of flows created together
// close in memory), so the mapped total stays flat while arenas come and go,
// and it is bounded by the peak demand. A larger chunk, which has a mapping
// of its own, is unmapped when it comes back.
package arena
