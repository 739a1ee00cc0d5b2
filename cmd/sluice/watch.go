package main

import (
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watcher reports changes of a set of files: the configuration file and
// the files it names (certificates, keys, CA bundles), which a reload
// reads again. It watches each file's directory, so that editors that
// replace a file (write a new one, rename it over the old) are seen too,
// as is a link in it that comes to lead elsewhere (a Kubernetes ConfigMap
// or Secret volume: the file is a link through ..data, which the kubelet
// renames a new link over at each update, so that no event names the file
// itself). Changes that come in quick succession are reported once.
type watcher struct {
	w   *fsnotify.Watcher
	out chan struct{}
	log *slog.Logger

	mu    sync.Mutex
	files map[string]string // absolute path → where its links lead ("" when it does not exist)
	dirs  map[string]bool   // the directories watched
}

// newWatcher watches paths until close.
func newWatcher(paths []string, log *slog.Logger) (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &watcher{w: fw, out: make(chan struct{}, 1), log: log, dirs: map[string]bool{}}
	if err := w.set(paths); err != nil {
		fw.Close()
		return nil, err
	}
	go w.run()
	return w, nil
}

// changes receives once after files changed.
func (w *watcher) changes() <-chan struct{} { return w.out }

func (w *watcher) close() { w.w.Close() }

// set makes paths the files watched, from now on: a reload calls it with
// the files the configuration it applied names. Directories no file is in
// any more are no longer watched.
func (w *watcher) set(paths []string) error {
	files := map[string]string{}
	dirs := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		files[abs] = resolve(abs)
		dirs[filepath.Dir(abs)] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs error
	for d := range dirs {
		if !w.dirs[d] {
			if err := w.w.Add(d); err != nil && errs == nil {
				errs = err
			}
		}
	}
	for d := range w.dirs {
		if !dirs[d] {
			_ = w.w.Remove(d)
		}
	}
	w.files, w.dirs = files, dirs
	return errs
}

// resolve is where the links of path lead, "" when it does not exist.
func resolve(path string) string {
	p, _ := filepath.EvalSymlinks(path)
	return p
}

func (w *watcher) run() {
	var debounce <-chan time.Time
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if w.changed(ev) {
				debounce = time.After(100 * time.Millisecond)
			}
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.log.Warn("watching the configuration's files", "error", err)
		case <-debounce:
			debounce = nil
			select {
			case w.out <- struct{}{}:
			default:
			}
		}
	}
}

// changed reports whether ev, an event in a watched directory, changed a
// watched file: named it (written, created, renamed over), or changed
// where its links lead.
func (w *watcher) changed(ev fsnotify.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	name := filepath.Clean(ev.Name)
	changed := false
	for abs, target := range w.files {
		if filepath.Dir(abs) != filepath.Dir(name) {
			continue
		}
		now := resolve(abs)
		if (abs == name && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0) || now != target {
			w.files[abs] = now
			changed = true
		}
	}
	return changed
}
