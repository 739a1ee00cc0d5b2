package main

import (
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/config"
)

func TestSpareP(t *testing.T) {
	n := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(n) })
	t.Setenv("GOMAXPROCS", "")
	for _, tc := range []struct {
		name, engine, env string
		loops, procs      int
	}{
		{"loop engine", "loop", "", n, n + 1},
		{"goroutine engine", "goroutine", "", 0, n},
		{"GOMAXPROCS set", "loop", "3", 0, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(n)
			t.Setenv("GOMAXPROCS", tc.env)
			cfg := &config.Config{Server: config.Server{Engine: tc.engine}}
			if got := spareP(cfg); got != tc.loops {
				t.Errorf("spareP = %d loops, want %d", got, tc.loops)
			}
			if got := runtime.GOMAXPROCS(0); got != tc.procs {
				t.Errorf("GOMAXPROCS = %d, want %d", got, tc.procs)
			}
		})
	}
}
