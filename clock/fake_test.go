package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

func TestFakeTimersFireInOrder(t *testing.T) {
	f := clock.NewFake(time.Time{})
	var got []int
	f.AfterFunc(30*time.Millisecond, func() { got = append(got, 30) })
	f.AfterFunc(10*time.Millisecond, func() { got = append(got, 10) })
	stopped := f.AfterFunc(20*time.Millisecond, func() { got = append(got, 20) })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
	f.Advance(15 * time.Millisecond)
	if len(got) != 1 || got[0] != 10 {
		t.Fatalf("after 15ms fired %v, want [10]", got)
	}
	f.Advance(time.Hour)
	if len(got) != 2 || got[1] != 30 || f.Timers() != 0 {
		t.Fatalf("fired %v, timers %d", got, f.Timers())
	}
	if f.Nanotime() != int64(time.Hour+15*time.Millisecond) {
		t.Fatalf("Nanotime = %d", f.Nanotime())
	}
}

func TestFakeNeverGoesBackwards(t *testing.T) {
	f := clock.NewFake(time.Time{})
	start := f.Now()
	f.Advance(-time.Second)
	f.Set(start.Add(-time.Hour))
	if !f.Now().Equal(start) {
		t.Fatal("the fake clock moved backwards")
	}
}

func TestSleepOnFake(t *testing.T) {
	f := clock.NewFake(time.Time{})
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(context.Background(), f, time.Second) }()
	if err := f.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, f, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context = %v", err)
	}
}

func TestFakeWithTimeout(t *testing.T) {
	f := clock.NewFake(time.Time{})
	ctx, cancel := f.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(f.Now().Add(time.Second)) {
		t.Fatalf("Deadline = %v, %v; want the fake now + 1s", dl, ok)
	}
	f.Advance(999 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("cancelled early")
	}
	f.Advance(time.Millisecond)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", ctx.Err())
	}
	ctx2, cancel2 := f.WithTimeout(context.Background(), time.Second)
	cancel2()
	if !errors.Is(ctx2.Err(), context.Canceled) || f.Timers() != 0 {
		t.Fatalf("cancel: Err = %v, timers %d", ctx2.Err(), f.Timers())
	}
}

func TestRealClock(t *testing.T) {
	c := clock.Or(nil)
	a := c.Nanotime()
	if b := c.Nanotime(); b < a {
		t.Fatal("Nanotime went backwards")
	}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop failed")
	}
	ctx, cancel := c.WithTimeout(context.Background(), time.Hour)
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel had no effect")
	}
}
