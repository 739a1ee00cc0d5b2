package ratelimit

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/invalid/invalidtest"
)

func TestConstructorsNameEveryBadOption(t *testing.T) {
	bad := Limit{Algorithm: "nope", Period: -1, Burst: -1}
	tests := []struct {
		name  string
		new   func() error
		names []string
	}{
		{"Validate", bad.Validate, []string{`Algorithm "nope"`, "Limit is 0", "Period is -1ns", "Burst is -1"}},
		{"New", func() error {
			_, err := New(Options{Limit: bad})
			return err
		}, []string{`Algorithm "nope"`, "Limit is 0", "Period is -1ns", "Burst is -1"}},
		{"NewShaper", func() error {
			_, err := NewShaper(ShaperOptions{MaxQueue: -1, MaxDelay: -time.Second})
			return err
		}, []string{"MaxQueue -1", "MaxDelay -1s", "Limit is 0", "Period is 0s"}},
		{"NewSharded", func() error {
			_, err := NewSharded(Limit{Algorithm: FixedWindow, Period: time.Second}, ShardedOptions{Shards: -1, MaxBatch: -1})
			return err
		}, []string{"Shards is -1", "MaxBatch is -1", "Limit is 0", "Algorithm fixed_window is a window algorithm"}},
		{"NewLocal", func() error {
			_, err := NewLocal(Limit{Algorithm: SlidingLog, Limit: 1, Period: time.Second, Burst: -1}, LocalOptions{})
			return err
		}, []string{"Burst is -1", "Algorithm sliding_log is a window algorithm"}},
		{"NewLocal horizon", func() error {
			_, err := NewLocal(Limit{Limit: 1, Period: 1 << 62}, LocalOptions{})
			return err
		}, []string{"Period 1281023h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			invalidtest.Check(t, tt.new(), ErrInvalidLimit, tt.names...)
		})
	}
}
