package vm

import (
	"sync/atomic"

	"github.com/stepvm/stepvm/opcodes"
)

// Resumer completes a waiting step from any goroutine. It is a small value
// that allocates nothing; the completion travels to the loop through its
// lock-free inbox. Only the first completion of a step is accepted: a
// second one, or one that comes after the step ended (by timeout, cancel or
// a completion through its handle), returns false and changes nothing. A
// completion that races with the step's end may be accepted and then
// dropped by the loop (SuccessOrRelease hears of it).
type Resumer struct {
	l    *Loop
	slot uint32
	gen  uint32
}

// Resumer returns the step's completion token. It does not make the step
// wait: call WaitExternal or SetTimeout as well. Where it may be called is
// as for SetTimeout; misuse returns the zero Resumer, whose calls return
// false.
func (as AsyncSteps) Resumer() Resumer {
	if f := as.foreign(); f != nil {
		f.Misuse("Resumer is not supported on a foreign flow")
		return Resumer{}
	}
	n, ok := as.running("Resumer")
	if !ok {
		return Resumer{}
	}
	r := as.r
	t := &r.l.resumers
	e := r.extOf(n)
	if n.Flags&opcodes.FlagResumer != 0 {
		slot := e.resumer
		return Resumer{r.l, slot, uint32(t.get(slot).state.Load() >> 1)}
	}
	slot, s := t.acquire()
	s.r, s.n, s.seq, s.epoch = r, n, n.Seq, r.runEpoch
	e.resumer = slot
	n.Flags |= opcodes.FlagResumer
	return Resumer{r.l, slot, uint32(s.state.Load() >> 1)}
}

func (rs Resumer) claim() bool {
	if rs.l == nil {
		return false
	}
	g := uint64(rs.gen) << 1
	return rs.l.resumers.get(rs.slot).state.CompareAndSwap(g, g|1)
}

// Success completes the step with up to four values. Any goroutine. With
// more, it fails the step with InternalError instead, as Success through
// the step's handle does, and returns false.
func (rs Resumer) Success(vals ...Value) bool { return rs.SuccessOrRelease(nil, vals...) }

// SuccessOrRelease is Success for values that hold resources (files,
// buffers, C objects) which must not wait for the garbage collector when
// no step gets them. A completion it accepts can still be dropped, when
// the step ends first (a timeout, a cancel) before the loop takes it: the
// loop then calls release on its goroutine, as it would an Immediate
// callback. When SuccessOrRelease returns false, the values are the
// caller's, and release is not called. A nil release is Success.
func (rs Resumer) SuccessOrRelease(release func(), vals ...Value) bool {
	if len(vals) > MaxArgs {
		rs.Error(InternalError, "Resumer.Success with more than 4 values")
		return false
	}
	if !rs.claim() {
		return false
	}
	in := inbound{fn: release, slot: rs.slot, gen: rs.gen}
	in.args.set(vals)
	rs.l.inbox.Push(in)
	rs.l.wake()
	return true
}

// Error fails the step with code and info. Any goroutine.
func (rs Resumer) Error(code, info string) bool {
	if !rs.claim() {
		return false
	}
	if code == "" {
		code = InternalError
	}
	rs.l.inbox.Push(inbound{slot: rs.slot, gen: rs.gen, code: code, info: info})
	rs.l.wake()
	return true
}

// resume delivers a Resumer's completion on the loop.
func (l *Loop) resume(in *inbound) {
	s := l.resumers.get(in.slot)
	r, n := s.r, s.n
	if s.state.Load() != uint64(in.gen)<<1|1 ||
		r == nil || r.runEpoch != s.epoch || n.Seq != s.seq || n.Flags&opcodes.FlagCanceling != 0 {
		if in.fn != nil { // SuccessOrRelease's values, which no step takes
			l.callFunc(in.fn)
		}
		return
	}
	th := threadOf(n)
	if in.code != "" {
		r.st().recordError(in.code, in.info)
		l.raise(r, th, in.code)
		return
	}
	if n.Head != 0 || n.Flags&opcodes.FlagChild != 0 {
		r.st().recordError(InternalError, "Resumer.Success on a step whose sub-steps run")
		l.raise(r, th, InternalError)
		return
	}
	l.complete(r, th, n, &in.args)
}

// resumerTable holds the state of every Resumer handed out. Other
// goroutines only load the block list and CAS a slot's state; everything
// else is the loop's. Blocks never move, so a slot's address is stable.
type resumerTable struct {
	blocks atomic.Pointer[[]*resumerBlock]
	next   uint32
	free   []uint32
}

const resumerBlockSize = 256

type resumerBlock [resumerBlockSize]resumerSlot

type resumerSlot struct {
	state atomic.Uint64 // generation (32 bits)<<1 | claimed
	r     *root
	n     *Node
	seq   uint32
	epoch uint32
}

func (t *resumerTable) get(slot uint32) *resumerSlot {
	return &(*t.blocks.Load())[slot/resumerBlockSize][slot%resumerBlockSize]
}

func (t *resumerTable) acquire() (uint32, *resumerSlot) {
	if k := len(t.free); k > 0 {
		slot := t.free[k-1]
		t.free = t.free[:k-1]
		return slot, t.get(slot)
	}
	if t.next == 0 {
		t.next = 1 // slot 0 means "none"
	}
	slot := t.next
	t.next++
	var blocks []*resumerBlock
	if p := t.blocks.Load(); p != nil {
		blocks = *p
	}
	if int(slot/resumerBlockSize) == len(blocks) {
		grown := append(blocks[:len(blocks):len(blocks)], new(resumerBlock))
		t.blocks.Store(&grown)
	}
	return slot, t.get(slot)
}

// release ends the generation of slot: its Resumers turn stale. The
// generation wraps at 32 bits, as the one a Resumer carries does: past
// 2^32 uses, a slot's Resumers would never match it again.
func (t *resumerTable) release(slot uint32) {
	s := t.get(slot)
	s.r, s.n = nil, nil
	s.state.Store(uint64(uint32(s.state.Load()>>1)+1) << 1)
	t.free = append(t.free, slot)
}
