package vm

import (
	"unsafe"

	"github.com/stepvm/stepvm/opcodes"
)

// The end of a run: the run epoch moves on (every step handle and queued
// task of the run turns stale), the root's memory is reset, and the Future
// and the foreign binding's hook hear how it ended.

// finish ends the run of r: with args on success, with code on error, or
// canceled. The root stays usable (State, Add, Execute) until Release.
func (l *Loop) finish(r *root, args *argBuf, code string, canceled bool) {
	if l.cur == rootID(r) {
		l.cont = contNone
	}
	l.endEpoch(r)
	if r.spawned { // the release cancels a run the end hook restarts
		if r.reports(code) {
			epoch := r.rootEpoch
			l.report(r, args, code, canceled)
			if r.rootEpoch != epoch { // the end hook released r: once is enough
				return
			}
		}
		r.handle().Release()
		return
	}
	// report comes after the reset (its end hook may execute r again);
	// on the common path, nothing report needs is kept across the reset.
	if r.reports(code) {
		r.resetRun()
		l.report(r, args, code, canceled)
		return
	}
	r.resetRun()
}

// endEpoch ends the run of r: its step handles and queued tasks turn
// stale, and it no longer counts as running.
func (l *Loop) endEpoch(r *root) {
	r.status = rootReady // until resetRun: the root frame is still started
	r.runEpoch++
	l.running--
	r.a.SetMarkAgain(markLive) // a root's arena has its first chunk from newRoot on
}

// endRun is freeNode(n), then finish(r, nil, "", false), for a flow whose
// last step n has just completed, with root frame b, at depth 0: in the
// dispatch's fast path (runThread), or in complete's, in r's turn or in
// none (l.cur is r or 0, so that clearing cont, which finish does for
// l.cur only, stops no other thread). It takes the common case in line: a
// run that has no slot in use but n's and nothing to report. Its steps
// mirror freeNode's, finish's and resetRun's for that case: n's slot goes
// with the truncation of the tables, and resetRun has no queue to free and
// a ready root to make idle.
func (l *Loop) endRun(r *root, b, n *Node) {
	// Every slot but n's is free. (The shift count is masked to spare the
	// compiler's code for counts past 63: n.Fn is a low slot here.)
	if n.Err != 0 || r.state != nil || r.slotCount() > lowSlots || r.used != 1<<((n.Fn-1)&63) {
		r.freeNode(n)
		l.finish(r, nil, "", false)
		return
	}
	r.setSlot(n.Fn, nil)
	r.used = 0
	if m := r.more; m != nil {
		r.emptySlots(m)
	}
	n.Seq = 0
	if n.Wide {
		r.a.Recycle(unsafe.Pointer(n), opcodes.WideSize)
	} else {
		r.a.Recycle(unsafe.Pointer(n), opcodes.NodeSize)
	}
	l.cont = contNone
	l.endEpoch(r)
	b.Seq = 0
	allocsOf(b).Reset()
	r.status = rootIdle
	if !r.a.Settled() {
		r.a.Reset()
	}
	if r.spawned {
		r.handle().Release() // which finds the run reset
	}
}

// reports tells whether a run that ends with code (or "") has a Future to
// resolve, or a foreign binding's hook to tell.
func (r *root) reports(code string) bool {
	return r.state != nil && (r.state.future != nil || r.state.native != nil) || code != ""
}

// report is finish's rarer part, kept out of its frame: it resolves the
// run's Future, if Promise made one, and tells the foreign binding's hook
// how the run ended.
func (l *Loop) report(r *root, args *argBuf, code string, canceled bool) {
	if st := r.state; st != nil && st.future != nil {
		f := st.future
		st.future = nil
		l.futures.take(st.futureNum)
		switch {
		case canceled:
			f.resolve(Args{}, ErrCanceled)
		case code != "":
			f.resolve(Args{}, &Error{Code: code, Info: r.st().errorInfo})
		default:
			f.resolve(args.args(), nil)
		}
	}
	if r.state != nil {
		if canceled {
			code = ""
		}
		r.nativeEnded(code)
	}
}
