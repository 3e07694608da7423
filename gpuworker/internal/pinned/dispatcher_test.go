package pinned

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// parkMode is a way the pinned goroutine may park, named for subtests; the
// modes of each system are in park_linux_test.go and park_other_test.go.
type parkMode struct {
	name   string
	policy parkPolicy
}

// A scheduled function runs on the pinned thread, after those scheduled
// before it; one scheduled after Stop never runs.
func TestScheduleRunsOnThePinnedThreadInOrder(t *testing.T) {
	for _, mode := range parkModes {
		t.Run(mode.name, func(t *testing.T) {
			d := newDispatcher(0, DefaultSpin, mode.policy)
			type run struct{ i, tid int }
			runs := make(chan run, 4)
			for i := range 3 {
				d.Schedule(func() { runs <- run{i, ThreadID()} })
			}
			for want := range 3 {
				r := <-runs
				if r.i != want || int64(r.tid) != d.tid.Load() {
					t.Fatalf("run %d on thread %d; want run %d on the pinned thread %d", r.i, r.tid, want, d.tid.Load())
				}
			}
			d.Stop()
			d.Schedule(func() { runs <- run{3, ThreadID()} })
			d.Stop() // idempotent; the goroutine has exited
			if len(runs) != 0 {
				t.Fatal("a function scheduled after Stop ran")
			}
		})
	}
}

// Work posted by many goroutines at once, while the pinned goroutine runs,
// spins (a caller marked it hot, or announced work with Expect) or parks,
// is all done: no wake-up is lost, in every park mode, with and without a
// spin. Producers wait for everything posted so far now and then, so the
// goroutine parks between their posts; a wait that outlasts its deadline is
// a lost wake-up.
func TestNoWakeUpIsLost(t *testing.T) {
	for _, mode := range parkModes {
		for _, spin := range []time.Duration{0, DefaultSpin} {
			t.Run(fmt.Sprintf("%s/spin=%v", mode.name, spin), func(t *testing.T) {
				d := newDispatcher(0, spin, mode.policy)
				defer d.Stop()
				inv := &countingInvoker{}
				m := NewMailbox().(*mailbox)
				m.RegisterHandlers(inv, d)
				const producers, posts = 8, 2000
				var posted, ran atomic.Int64
				done := func() int64 { return inv.user.Load() + inv.system.Load() + ran.Load() }
				waitDone := func() error {
					for deadline := time.Now().Add(10 * time.Second); done() < posted.Load(); runtime.Gosched() {
						if time.Now().After(deadline) {
							return fmt.Errorf("lost wake-up: %d of %d done, parked = %d", done(), posted.Load(), d.parked.Load())
						}
					}
					return nil
				}
				errs := make(chan error, producers)
				for p := range producers {
					go func() {
						r := rand.New(rand.NewPCG(uint64(p), 1))
						for i := range posts {
							posted.Add(1)
							switch r.IntN(4) {
							case 0:
								m.PostSystemMessage(i)
							case 1:
								d.Schedule(func() { ran.Add(1) })
							default:
								m.PostUserMessage(i)
							}
							switch r.IntN(100) {
							case 0:
								d.hot.Store(true)
							case 1:
								d.Expect()
							case 2:
								time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
							}
							if r.IntN(10) == 0 {
								if err := waitDone(); err != nil {
									errs <- err
									return
								}
							}
						}
						errs <- nil
					}()
				}
				for range producers {
					if err := <-errs; err != nil {
						t.Fatal(err)
					}
				}
				if err := waitDone(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// countingInvoker counts the messages a mailbox hands it.
type countingInvoker struct{ user, system atomic.Int64 }

func (c *countingInvoker) InvokeSystemMessage(any)  { c.system.Add(1) }
func (c *countingInvoker) InvokeUserMessage(any)    { c.user.Add(1) }
func (c *countingInvoker) EscalateFailure(any, any) {}
