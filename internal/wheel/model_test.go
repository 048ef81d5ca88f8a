package wheel

import (
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/stepvm/stepvm/internal/fuzzinput"
)

// model is the reference the wheel is checked against: a slice of pending
// timers sorted by (due tick, insertion sequence). It states the package's
// ordering contract directly, with none of the wheel's machinery: a timer's
// due tick is its deadline rounded up to a tick, or the current tick if that
// is later; the current tick moves to the due tick of each timer popped, or
// to now's tick when nothing is due. A timer added by AddAfter waits in
// unsealed, with its delay as deadline, until Seal adds it for real.
type model struct {
	start, tick int64
	cur         int64
	seq         int
	pending     []mtimer
	unsealed    []mtimer
}

type mtimer struct {
	due      int64
	seq      int
	deadline int64
	data     uint64
	h        Timer
}

func newModel(start int64, tick time.Duration) *model {
	return &model{start: start, tick: int64(tick)}
}

func (m *model) ceilTick(t int64) int64 {
	if t <= m.start {
		return 0
	}
	d := t - m.start
	return (d + m.tick - 1) / m.tick
}

func (m *model) timeOf(k int64) int64 { return m.start + k*m.tick }

func (m *model) add(deadline int64, data uint64, h Timer) {
	t := mtimer{due: max(m.ceilTick(deadline), m.cur), seq: m.seq, deadline: deadline, data: data, h: h}
	m.seq++
	i, _ := slices.BinarySearchFunc(m.pending, t, func(a, b mtimer) int {
		if a.due != b.due {
			return cmp(a.due, b.due)
		}
		return a.seq - b.seq
	})
	m.pending = slices.Insert(m.pending, i, t)
}

func cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *model) addAfter(d int64, data uint64, h Timer) {
	m.unsealed = append(m.unsealed, mtimer{deadline: d, data: data, h: h})
}

func (m *model) seal(now int64) {
	for _, u := range m.unsealed {
		m.add(now+u.deadline, u.data, u.h)
	}
	m.unsealed = m.unsealed[:0]
}

func (m *model) stop(h Timer) bool {
	for i, t := range m.pending {
		if t.h == h {
			m.pending = slices.Delete(m.pending, i, i+1)
			return true
		}
	}
	for i, t := range m.unsealed {
		if t.h == h {
			m.unsealed = slices.Delete(m.unsealed, i, i+1)
			return true
		}
	}
	return false
}

// len is the number of timers pending, sealed or not.
func (m *model) len() int { return len(m.pending) + len(m.unsealed) }

func (m *model) pop(now int64) (mtimer, bool) {
	if now < m.start {
		return mtimer{}, false
	}
	t := (now - m.start) / m.tick
	if len(m.pending) > 0 && m.pending[0].due <= t {
		p := m.pending[0]
		m.pending = m.pending[1:]
		m.cur = p.due
		return p, true
	}
	m.cur = max(m.cur, t)
	return mtimer{}, false
}

// randStep returns a log-uniform duration from 1ns to about 5 days, so that
// runs both crawl through single ticks and leap across every level.
func randStep(r *rand.Rand) int64 {
	return int64(math.Exp2(r.Float64() * 48.6))
}

// randDeadline returns a deadline after now, up to 40 days: mostly near, some
// at every level, some exactly on tick boundaries, some exactly now.
func randDeadline(r *rand.Rand, now int64, tick time.Duration) int64 {
	const day = int64(24 * time.Hour)
	var d int64
	switch r.Intn(6) {
	case 0:
		d = r.Int63n(int64(300 * tick))
	case 1:
		d = r.Int63n(int64(10 * time.Second))
	case 2:
		d = r.Int63n(40 * day)
	case 3:
		d = int64(r.Intn(100)) * int64(tick) // on a boundary if now is
	case 4:
		d = randStep(r) % (40 * day)
	default:
		d = 0
	}
	return now + d
}

var configs = []struct {
	name  string
	start int64
	tick  time.Duration
}{
	{"1ms", 0, time.Millisecond},
	{"1ms-offset", -123456789, time.Millisecond},
	{"1us", 1 << 40, time.Microsecond}, // 40 days is many turns of the top level
	{"7ns", 5, 7},
}

// TestDrainMatchesModel adds random deadlines from 0 to 40 days ahead and
// advances the clock by random steps, draining Pop at each step. What comes
// out must be exactly the model's due set in the model's order, never early
// and at most one tick late.
func TestDrainMatchesModel(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewSource(1))
			w := New(c.start, c.tick)
			m := newModel(c.start, c.tick)
			now := c.start
			tick := int64(c.tick)
			var data uint64
			steps := 4000
			if testing.Short() {
				steps = 500
			}
			for step := range steps {
				for range r.Intn(4) {
					d := randDeadline(r, now, c.tick)
					data++
					m.add(d, data, w.Add(d, data))
				}
				if step%500 == 499 {
					now += 41 * 24 * int64(time.Hour) // empty the model now and then
				} else {
					now += randStep(r)
				}
				lastDue := int64(-1)
				for _, p := range drainLikeModel(t, w, m, now) {
					if p.due < lastDue {
						t.Fatalf("step %d: due tick %d after %d", step, p.due, lastDue)
					}
					lastDue = p.due
				}
				for _, p := range m.pending {
					if p.deadline <= now-tick {
						t.Fatalf("step %d: timer due %d still pending at %d", step, p.deadline, now)
					}
				}
				if w.Len() != len(m.pending) {
					t.Fatalf("step %d: Len = %d, model %d", step, w.Len(), len(m.pending))
				}
			}
		})
	}
}

// drainLikeModel pops every timer of w due at now, each of which must be
// the model's next and not due after now, and returns them.
func drainLikeModel(t *testing.T, w *Wheel, m *model, now int64) []mtimer {
	t.Helper()
	var popped []mtimer
	for {
		got, ok := w.Pop(now)
		want, wok := m.pop(now)
		if ok != wok || got != want.data {
			t.Fatalf("Pop(%d) = %d, %v; model %d, %v", now, got, ok, want.data, wok)
		}
		if !ok {
			return popped
		}
		if want.deadline > now {
			t.Fatalf("timer due %d fired early at %d", want.deadline, now)
		}
		popped = append(popped, want)
	}
}

// TestOpsMatchModel interleaves Add (including past deadlines), AddAfter
// and Seal, Stop of live and stale handles, single Pops at times that mostly
// advance and sometimes stand still or go back, and checks every answer,
// Active on every handle ever issued, and NextDeadline, against the model.
func TestOpsMatchModel(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			ops := 60000
			if testing.Short() {
				ops = 5000
			}
			r := rand.New(rand.NewSource(2))
			opsMatchModel(t, c.start, c.tick, ops, r)
		})
	}
}

// FuzzWheel is TestOpsMatchModel with the choices read from the input: its
// first byte picks the configuration, the rest make the first choices of
// 2,000 operations, and a generator seeded from the input makes the others,
// so that every input reaches the upper levels.
//
//	go test -run '^$' -fuzz '^FuzzWheel$' -fuzztime 10m -parallel 1 ./internal/wheel
func FuzzWheel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 0xff, 0x10, 0x80, 0, 0, 0, 0, 0x40, 0x7f, 0x33})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		c := configs[int(in[0])%len(configs)]
		src := fuzzinput.NewSource(in[1:])
		opsMatchModel(t, c.start, c.tick, 2000, rand.New(src))
	})
}

// opsMatchModel runs ops operations on a wheel and the model, with the
// choices drawn from r.
func opsMatchModel(t *testing.T, start int64, tick time.Duration, ops int, r *rand.Rand) {
	w := New(start, tick)
	m := newModel(start, tick)
	now := start
	var handles []Timer
	var data uint64
	for op := range ops {
		switch k := r.Intn(20); {
		case k < 8:
			d := randDeadline(r, now, tick)
			if r.Intn(8) == 0 {
				d = now - r.Int63n(int64(time.Hour)) // already passed
			}
			data++
			var h Timer
			if r.Intn(3) == 0 {
				h = w.AddAfter(d-now, data)
				m.addAfter(d-now, data, h)
			} else {
				h = w.Add(d, data)
				m.add(d, data, h)
			}
			handles = append(handles, h)
		case k == 8:
			w.Seal(now)
			m.seal(now)
		case k < 11 && len(handles) > 0:
			h := handles[r.Intn(len(handles))]
			if got, want := w.Stop(h), m.stop(h); got != want {
				t.Fatalf("op %d: Stop = %v, model %v", op, got, want)
			}
		default:
			switch r.Intn(10) {
			case 0: // stand still
			case 1:
				now -= r.Int63n(int64(10 * tick))
			default:
				now += randStep(r) % int64(time.Hour)
			}
			got, ok := w.Pop(now)
			want, wok := m.pop(now)
			if ok != wok || got != want.data {
				t.Fatalf("op %d now %d: Pop = %d, %v; model %d, %v", op, now, got, ok, want.data, wok)
			}
		}
		if w.Len() != m.len() || w.Unsealed() != (len(m.unsealed) > 0) {
			t.Fatalf("op %d: Len = %d, Unsealed = %v; model %d, %d unsealed", op, w.Len(), w.Unsealed(), m.len(), len(m.unsealed))
		}
		checkNextDeadline(t, w, m)
		if op%97 == 0 {
			checkActive(t, w, m, handles)
		}
	}
	checkActive(t, w, m, handles)
}

func checkActive(t *testing.T, w *Wheel, m *model, handles []Timer) {
	t.Helper()
	live := make(map[Timer]bool, m.len())
	for _, p := range slices.Concat(m.pending, m.unsealed) {
		live[p.h] = true
	}
	for _, h := range handles {
		if w.Active(h) != live[h] {
			t.Fatalf("Active(%v) = %v, model %v", h, !live[h], live[h])
		}
	}
}

// checkNextDeadline checks that NextDeadline is never after the start of the
// earliest due tick, which is when Pop first returns that timer; never
// before the current tick; exact on level 0; and never a tick or more after
// the earliest raw deadline.
func checkNextDeadline(t *testing.T, w *Wheel, m *model) {
	t.Helper()
	at, ok := w.NextDeadline()
	if ok != (len(m.pending) > 0) {
		t.Fatalf("NextDeadline ok = %v with %d pending", ok, len(m.pending))
	}
	if !ok {
		return
	}
	first := m.pending[0]
	due := m.timeOf(first.due)
	earliest := first.deadline
	for _, p := range m.pending {
		earliest = min(earliest, p.deadline)
	}
	switch {
	case at > due:
		t.Fatalf("NextDeadline = %d, after due time %d", at, due)
	case at < m.timeOf(m.cur):
		t.Fatalf("NextDeadline = %d, before current tick %d", at, m.timeOf(m.cur))
	case first.due>>8 == m.cur>>8 && at != due:
		t.Fatalf("NextDeadline = %d on level 0, want %d", at, due)
	case at >= max(earliest, m.timeOf(m.cur))+m.tick:
		t.Fatalf("NextDeadline = %d, a tick after earliest deadline %d", at, earliest)
	}
}

// TestNextDeadlineAligned checks the stronger property that holds when every
// deadline is on a tick boundary and not in the past: NextDeadline is never
// after the earliest pending deadline, and driving a manual clock by
// NextDeadline alone fires every timer exactly at its deadline.
func TestNextDeadlineAligned(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const start = 1000
	tick := time.Millisecond
	w := New(start, tick)
	want := make(map[uint64]int64)
	now := int64(start)
	for i := range uint64(3000) {
		d := now + int64(r.Intn(40*24*3600*1000)/(1+r.Intn(1000)))*int64(tick)
		w.Add(d, i)
		want[i] = d
		if r.Intn(3) == 0 {
			// Fire whatever is due at the next deadline.
			now, _ = w.NextDeadline()
			fireDue(t, w, now, want)
		}
	}
	for iters := 0; w.Len() > 0; iters++ {
		if iters > 6*3000 {
			t.Fatal("NextDeadline loop makes no progress")
		}
		at, _ := w.NextDeadline()
		earliest := int64(1<<63 - 1)
		for _, d := range want {
			earliest = min(earliest, d)
		}
		if at > earliest {
			t.Fatalf("NextDeadline = %d after earliest deadline %d", at, earliest)
		}
		now = at
		fireDue(t, w, now, want)
	}
}

// fireDue pops every timer of w due at now, each of which must be due
// exactly then by want, and removes it from want.
func fireDue(t *testing.T, w *Wheel, now int64, want map[uint64]int64) {
	t.Helper()
	for {
		v, ok := w.Pop(now)
		if !ok {
			return
		}
		if want[v] != now {
			t.Fatalf("timer %d due %d fired at %d", v, want[v], now)
		}
		delete(want, v)
	}
}
