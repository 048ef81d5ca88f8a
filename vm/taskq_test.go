package vm

import (
	"testing"
	"unsafe"
)

// The records a waiting flow is made of keep their sizes: a run-queue
// entry is one cache line, a root fits the 128-byte size class, two cache lines (README,
// Memory).
func TestRecordSizes(t *testing.T) {
	if s := unsafe.Sizeof(task{}); s != 64 {
		t.Errorf("task is %d bytes, want 64", s)
	}
	if s := unsafe.Sizeof(root{}); s > 128 {
		t.Errorf("root is %d bytes, want at most 128", s)
	}
}

// Values queued with a thread reach its next step whether they fit in the
// task (none, one) or spill (more), and a task dropped as stale gives its
// spill entry back and keeps no value alive.
func TestTaskValues(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	sets := [][]Value{nil, {Int(1)}, {Int(1), Str("two")}, {Int(1), Str("two"), Bool(true), Float(4)}}
	for _, vals := range sets {
		var got []Value
		var waiting AsyncSteps
		root := l.NewSteps()
		root.Add(func(as AsyncSteps, _ Args) {
			as.WaitExternal()
			waiting = as
		}).Add(func(_ AsyncSteps, args Args) {
			for i := range args.Len() {
				got = append(got, args.Get(i))
			}
		})
		root.Execute()
		l.RunUntilIdle()
		waiting.Success(vals...) // queued: the loop is not running this flow
		l.RunUntilIdle()
		if len(got) != len(vals) {
			t.Fatalf("%d values sent, %d received: %v", len(vals), len(got), got)
		}
		for i := range vals {
			if got[i] != vals[i] {
				t.Errorf("value %d: got %v, want %v", i, got[i], vals[i])
			}
		}

		// The same again, canceled before the values are delivered.
		root.Add(func(as AsyncSteps, _ Args) {
			as.WaitExternal()
			waiting = as
		}).Add(func(AsyncSteps, Args) { t.Error("a canceled flow ran its next step") })
		root.Execute()
		l.RunUntilIdle()
		waiting.Success(vals...)
		root.Cancel()
		l.RunUntilIdle()
		root.Release()
	}
	if len(l.spill) == 0 || len(l.spillFree) != len(l.spill) {
		t.Fatalf("%d spill entries, %d free: want some, all free", len(l.spill), len(l.spillFree))
	}
	for i := range l.spill {
		if l.spill[i].n != 0 || l.spill[i].v != [MaxArgs]Value{} {
			t.Fatalf("spill entry %d keeps values: %+v", i, l.spill[i])
		}
	}
	for i := range l.runq.buf {
		if e := &l.runq.buf[i]; e.r != nil || e.n != 0 || e.v != (Value{}) {
			t.Fatalf("run queue entry %d keeps a root or values: %+v", i, *e)
		}
	}
}

// The loop's value buffers keep nothing alive once the flows are done:
// not the values a thread took with it when its continuation was queued
// behind another flow, nor those past the count of a later, shorter set.
func TestLoopKeepsNoValues(t *testing.T) {
	l := NewLoop()
	defer l.Close()
	four := []Value{Str("a"), Str("b"), Str("c"), Str("d")}
	for range 2 {
		root := l.NewSteps()
		root.Add(func(as AsyncSteps, _ Args) { as.Success(four...) }).
			Add(func(as AsyncSteps, _ Args) { as.Success(Str("one")) }).
			Add(func(AsyncSteps, Args) {})
		root.Execute()
	}
	l.RunUntilIdle()
	for _, b := range []*argBuf{l.argsCur, l.argsNxt} {
		if b.v != [MaxArgs]Value{} {
			t.Fatalf("a value buffer keeps %v", b.v)
		}
	}
}
