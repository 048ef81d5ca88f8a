package vm

import (
	"unsafe"

	"github.com/stepvm/stepvm/opcodes"
)

// Hooks for foreign-function bindings. Package ffi maps the FTN12 2.7
// binary interface onto the VM with them: they expose what the public API
// leaves out on purpose (instruction operands, memory tied to a frame,
// handle identities) and user code has no use for them. None of them
// allocates on the Go heap.

// NativeWords are two operands a binding stores with a step it adds,
// typically a C function pointer and the data pointer passed to it. They
// are integers because foreign code may store any integer in a pointer, and
// they must not be Go pointers: they live in arena memory.
type NativeWords struct{ A, B uintptr }

// AddNative exists for foreign-function bindings. It is Add, except that
// the new step also carries w, which fn takes back with TakeNativeWords when
// it runs: one trampoline then serves every foreign step, with no closure
// per step. A step with words other than zero gets a wide node whose
// operands carry w, and CopyFrom copies them with the step. A foreign flow
// (WrapForeign) cannot keep words: words other than zero are misuse there.
func AddNative(as AsyncSteps, fn ExecFunc, onError ErrorFunc, w NativeWords) AsyncSteps {
	return as.addExec(fn, onError, uint64(w.A), uint64(w.B))
}

// TakeNativeWords exists for foreign-function bindings. It returns the
// words AddNative stored with the step as, which must be the step whose
// function is running, and clears them, so that they are taken once. It
// returns zero words for any other handle.
func TakeNativeWords(as AsyncSteps) NativeWords {
	n, ok := as.frame()
	if !ok || n.Op != opcodes.OpExec || frameID(n) != as.r.l.inCall {
		return NativeWords{}
	}
	if !n.Wide {
		return NativeWords{}
	}
	o := n.Ops()
	w := NativeWords{A: uintptr(o.A), B: uintptr(o.B)}
	o.A, o.B = 0, 0
	return w
}

// FrameAlloc exists for foreign-function bindings. It is StackRaw for any
// live frame (a running step, one running its error or cancel handler, a
// loop iteration, a started parallel step), which are the places where a
// binding hands a handle to foreign code and must learn when the frame
// ends. It returns nil for a root, a parallel accessor, a handle that is
// no longer valid, and a size StackRaw refuses.
func FrameAlloc(as AsyncSteps, size int, destroy func(unsafe.Pointer)) unsafe.Pointer {
	n, ok := as.frame()
	if !ok || size < 0 || size > maxStackSize {
		return nil
	}
	return as.r.frameAlloc(n, size, destroy)
}

// IsRoot exists for foreign-function bindings: it reports whether as is a
// valid root handle.
func IsRoot(as AsyncSteps) bool {
	return as.r != nil && as.n == nil && as.epoch == as.r.rootEpoch
}

// IsFrame exists for foreign-function bindings: it reports whether as
// refers to a live frame, the handles FrameAlloc accepts.
func IsFrame(as AsyncSteps) bool {
	_, ok := as.frame()
	return ok
}

// RootOf exists for foreign-function bindings: it returns the root of the
// flow a valid handle belongs to, and the zero AsyncSteps otherwise (also
// for a foreign handle: its root is the foreign engine's, and a handle on
// the stand-in would pass for a root of a loop).
func RootOf(as AsyncSteps) AsyncSteps {
	if !as.nativeValid() {
		return AsyncSteps{}
	}
	return AsyncSteps{r: as.r, epoch: as.r.rootEpoch}
}

// RootID exists for foreign-function bindings (FTN12 2.7.2 rootId): it
// returns an identifier of the flow as belongs to, or 0 for an invalid
// handle. A flow is the main thread of a root (a root's own handle names
// it too) or one parallel branch, which FTN12 1.11.4 has sync primitives
// treat as separate owners, as the reference implementation's rootId
// does. Identifiers are distinct for flows alive at the same time. They
// tell successive uses of a pooled root, or of a branch's memory, apart by
// 16 bits of a stamp (the address takes the other 48), so the identifier
// of a flow that has ended may come back after 2^16 uses of its root, or
// a branch's after as many steps of its run. A foreign handle gets 0: its
// stand-in root is the same for every foreign flow.
func RootID(as AsyncSteps) uint64 {
	if !as.nativeValid() {
		return 0
	}
	if as.n != nil {
		if th := handleThread(as.n); th != nil && th.Op != opcodes.OpRoot { // a parallel branch
			// Its base is a live node no other thread shares, and its
			// stamp tells apart the branches that use that memory in
			// turn. Node addresses fit in 48 bits.
			return uint64(uintptr(unsafe.Pointer(th))) ^ uint64(th.Seq)<<48
		}
	}
	// The main thread: the root frame's address is the root's while it
	// lives, and the root's epoch tells its successive uses apart.
	return uint64(uintptr(unsafe.Pointer(as.r.base()))) ^ uint64(as.r.rootEpoch)<<48
}

// nativeHooks are the root life-cycle callbacks of SetNativeRootHooks.
var nativeHooks struct {
	released func(root AsyncSteps)
	ended    func(root AsyncSteps, code string)
}

// SetNativeRootHooks exists for foreign-function bindings, which attach
// foreign resources to roots. released runs when a root is released,
// before its state is cleared, with a handle that is still valid. ended
// runs when a run ends of a root that has a native value
// (SetNativeRootValue), once the run is over: code is the error no handler
// settled, or "" if the run succeeded or was canceled. (So a binding can
// tell the runs it started from later ones.) Either may be nil. A hook's
// panic goes to the loop's panic handler (WithPanicHandler), as an
// Immediate's does. It must be called before any loop runs, typically
// from an init function; a second call replaces the hooks.
func SetNativeRootHooks(released func(root AsyncSteps), ended func(root AsyncSteps, code string)) {
	nativeHooks.released, nativeHooks.ended = released, ended
}

// nativeReleased runs the release hook for r; Release calls it first,
// once the run is over. The hook's handle is valid, but r is being
// released: a Release through it must not release r again (it would
// recurse), nor an Execute start a run the pool would then keep.
func (r *root) nativeReleased() {
	if h := nativeHooks.released; h != nil { // the test inlines into every release
		r.runReleased(h)
	}
}

func (r *root) runReleased(h func(AsyncSteps)) {
	if r.teardown&tearHooked != 0 {
		return // the release that a panic out of the panic handler completes (below)
	}
	was := r.teardown
	r.teardown |= tearRelease
	// callNoFrame, written out: this runs on every Release once a binding
	// has set its hooks, and a call and a closure less count there.
	l := r.l
	prev := l.enter(0)
	returned := false
	defer func() {
		l.leave(prev)
		if !returned {
			// The panic handler hears of it while r is still being
			// released: a Release or Execute of r it makes does nothing.
			if p := recover(); p != nil && !isUnwinding(p) {
				l.reportHookPanic(p, func() {
					r.teardown = was | tearHooked
					r.handle().Release()
					r.teardown = was
				})
			}
		}
		r.teardown = was
	}()
	h(r.handle())
	returned = true
}

// nativeEnded runs the end hook for r, whose run has ended with code
// ("" for success or cancellation); report calls it.
//
// Both hooks run as no frame's code (callNoFrame): a run may end, and
// a root be released, inside another flow's step, whose function the
// binding's calls must not be taken for (its misuse would fail that flow).
// A hook's panic goes to the loop's panic handler, as an Immediate's does,
// not out of the Release or the end of the run it interrupted.
func (r *root) nativeEnded(code string) {
	if h := nativeHooks.ended; h != nil && r.state.native != nil {
		epoch := r.rootEpoch
		if p := r.l.callNoFrame(func() { h(r.handle(), code) }); p != nil {
			r.l.reportHookPanic(p, func() {
				// What follows the end of the run, unless the hook
				// released r: the rest of the Release that canceled it,
				// or a spawned root's release.
				if r.rootEpoch == epoch && (r.teardown&tearRelease != 0 || r.spawned) {
					r.teardown &^= tearRelease
					r.handle().Release()
				}
			})
		}
	}
}

// reportHookPanic is reportPanic for p, the panic of a root hook. Unlike an
// Immediate, a hook runs amid the VM's own work on its root (a Release,
// the end of a run), which a panic out of the panic handler would leave
// halfway: a root neither released nor pooled, counted live for good.
// rest, which completes that work, then runs before the panic goes on.
func (l *Loop) reportHookPanic(p any, rest func()) {
	done := false
	defer func() {
		if !done {
			rest()
		}
	}()
	l.reportPanic(p)
	done = true
}

// NativeRootValue exists for foreign-function bindings: it returns the
// value SetNativeRootValue attached to the root of the valid handle as, or
// nil.
func NativeRootValue(as AsyncSteps) any {
	if !as.nativeValid() || as.r.state == nil {
		return nil
	}
	return as.r.state.native
}

// SetNativeRootValue exists for foreign-function bindings, which keep
// state per root: v is attached to the root of the valid handle as and is
// reachable from it alone, so a binding needs no registry that would keep
// a root the program drops alive. v lives as long as the root object: it
// survives Release, as the root's State does, and comes back when the
// loop reuses the root, so a binding clears what v holds in its release
// hook. v may point back at the root. Loop goroutine only.
func SetNativeRootValue(as AsyncSteps, v any) {
	if as.nativeValid() {
		as.r.st().native = v
	}
}

// NativeLoopValue exists for foreign-function bindings: it returns the
// value SetNativeLoopValue attached to l, or nil. Loop goroutine only.
func NativeLoopValue(l *Loop) any { return l.native }

// SetNativeLoopValue exists for foreign-function bindings, which keep state
// per loop: v is attached to l and lives exactly as long as l, so a
// binding needs no registry that would keep the loop alive. v may point
// back at l. Loop goroutine only (or the goroutine that created l, before
// it first runs).
func SetNativeLoopValue(l *Loop, v any) { l.native = v }
