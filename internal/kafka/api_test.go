package kafka

import (
	"testing"
	"time"
)

func TestPollDelay(t *testing.T) {
	ms := time.Millisecond
	for i, want := range []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 200 * ms, 200 * ms} {
		if got := PollDelay(i); got != want {
			t.Errorf("PollDelay(%d) = %s, want %s", i, got, want)
		}
	}
	if got := PollDelay(1 << 20); got != 200*ms {
		t.Errorf("PollDelay of a long wait = %s, want 200ms", got)
	}
}
