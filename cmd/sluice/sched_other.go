//go:build !linux

package main

import "github.com/sluicehq/sluice/config"

// batchScheduling does nothing: SCHED_BATCH is Linux's.
func batchScheduling() (int, error) { return 0, nil }

// spareP changes nothing and returns 0: the event loops are Linux's.
func spareP(*config.Config) int { return 0 }
