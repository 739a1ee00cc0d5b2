package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatcherSymlinkSwap checks that a configuration file mounted as
// Kubernetes mounts a ConfigMap (sluice.yaml a link to ..data/sluice.yaml,
// ..data a link to a timestamped directory) is seen to change when the
// kubelet swaps ..data to a new directory: no event names sluice.yaml
// then, only ..data.
func TestWatcherSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, text string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name, "sluice.yaml"), text)
	}
	version("..2026_12_02_10_00_00.1", "a")
	if err := os.Symlink("..2026_12_02_10_00_00.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.Symlink(filepath.Join("..data", "sluice.yaml"), path); err != nil {
		t.Fatal(err)
	}
	w, err := newWatcher([]string{path}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()

	// The kubelet's update: a new directory, a new link beside ..data,
	// renamed over it, the old directory removed.
	version("..2026_12_02_10_05_00.2", "b")
	if err := os.Symlink("..2026_12_02_10_05_00.2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2026_12_02_10_00_00.1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.changes():
	case <-time.After(10 * time.Second):
		t.Fatal("the swap of ..data was not reported as a change of sluice.yaml")
	}
}

// TestWatcherSet checks that files set after a reload are watched, in a
// directory not watched before.
func TestWatcherSet(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a.pem"), filepath.Join(t.TempDir(), "b.pem")
	writeFile(t, a, "a")
	writeFile(t, b, "b")
	w, err := newWatcher([]string{a}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.set([]string{a, b}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, b, "b2")
	select {
	case <-w.changes():
	case <-time.After(10 * time.Second):
		t.Fatal("a write of a file set after the start was not reported")
	}
}
