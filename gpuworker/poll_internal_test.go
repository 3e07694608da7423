package gpuworker

import (
	"testing"
	"time"
)

// A reply that comes within the poll is taken by polling.
func TestPollReplyTakesAReplyWithinThePoll(t *testing.T) {
	reply := make(chan int, 1)
	go func() {
		time.Sleep(200 * time.Microsecond)
		reply <- 42
	}()
	r, ok := pollReply(reply, time.Hour)
	if !ok || r != 42 {
		t.Fatalf("pollReply = %d, %v; want 42, true", r, ok)
	}
}

// With no reply, polling ends after the poll, not before.
func TestPollReplyEndsAfterThePoll(t *testing.T) {
	reply := make(chan int, 1)
	start := time.Now()
	r, ok := pollReply(reply, time.Millisecond)
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
	if waited := time.Since(start); waited < time.Millisecond {
		t.Fatalf("pollReply gave up after %v, before the poll (1ms) ended", waited)
	}
}
