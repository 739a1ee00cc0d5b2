package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/telemetry"
)

// serve runs the gateway until SIGTERM or SIGINT, reloading on SIGHUP, on a
// change of the file or of a file it names (see watcher) and on POST
// /reload. The file is --config FILE or the
// one argument, sluice.yaml by default. Unless --batch-scheduling=false,
// the process's threads run under SCHED_BATCH (see batchScheduling).
func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sluice serve [--watch=false] [--batch-scheduling=false] [--config] FILE")
		fs.PrintDefaults()
	}
	path := fs.String("config", "sluice.yaml", "configuration file (or give it as the argument)")
	watch := fs.Bool("watch", true, "reload when the configuration file or a file it names (certificates, keys, CA bundles) changes")
	batch := fs.Bool("batch-scheduling", true, "run the gateway's threads under Linux's SCHED_BATCH scheduling policy rather than the normal one (see README, Deploying)")
	// Flags may come before or after the file.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config" {
			files = append([]string{*path}, files...)
		}
	})
	if len(files) > 1 {
		fmt.Fprintf(stderr, "sluice serve: one configuration file, as --config FILE or as the argument; got %q\n", files)
		fs.Usage()
		return 2
	}
	if len(files) == 1 {
		*path = files[0]
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log := gateway.NewLogger(cfg.Log, stderr)
	if *batch {
		if _, err := batchScheduling(); err != nil {
			log.Warn("threads not moved to SCHED_BATCH run under the normal scheduling policy", "error", err)
		}
	}
	loops := spareP(cfg)
	if err := runGateway(context.Background(), *path, cfg, *watch, loops, log, nil); err != nil {
		log.Error("gateway stopped", "error", err)
		return 1
	}
	return 0
}

// runGateway serves cfg until ctx ends or a termination signal arrives, then
// shuts down gracefully; loops is gateway.Options.Loops. ready, if not nil,
// receives the gateway's and the admin API's addresses once both listen.
func runGateway(ctx context.Context, path string, cfg *config.Config, watch bool, loops int, log *slog.Logger, ready func(gw, admin net.Addr, g *gateway.Gateway)) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := telemetry.New(reg)
	if err != nil {
		return err
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: log, Metrics: metrics, Loops: loops})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	var tlsLn net.Listener
	if cfg.TLS != nil {
		if tlsLn, err = net.Listen("tcp", cfg.TLS.Listen); err != nil {
			ln.Close()
			return fmt.Errorf("tls listening: %w", err)
		}
	}
	var files *watcher // the configuration's files, when watched
	reload := func() error {
		next, err := config.Load(path)
		if err != nil {
			g.Refuse(err)
			return err
		}
		// Apply builds next fully before it swaps it in, so a file that
		// validates but cannot be built is refused as well.
		if next.Listen != cfg.Listen || next.Admin != cfg.Admin || next.Server.Engine != cfg.Server.Engine ||
			tlsListen(next) != tlsListen(cfg) || next.Server.HTTP2 != cfg.Server.HTTP2 {
			log.Warn("listen, admin, tls.listen, server.engine and server.http2 changes take effect only after a restart")
		}
		if err := g.Apply(next); err != nil {
			return err
		}
		if files != nil {
			if err := files.set(append([]string{path}, next.Files()...)); err != nil {
				log.Warn("not watching every file of the configuration", "error", err)
			}
		}
		return nil
	}
	var adminSrv *http.Server
	var adminAddr net.Addr
	if cfg.Admin.Listen != "off" {
		aln, err := net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			ln.Close()
			if tlsLn != nil {
				tlsLn.Close()
			}
			return fmt.Errorf("admin listening: %w", err)
		}
		adminAddr = aln.Addr()
		adminSrv = serveAdmin(aln, g.AdminHandler(gateway.AdminOptions{Token: cfg.Admin.Token, Gatherer: reg, Reload: reload}), cfg.Server)
	}
	// Signals and file changes are watched before the gateway says it
	// serves, so that a SIGHUP or an edit right after that is not lost.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var changes <-chan struct{}
	if watch {
		w, err := newWatcher(append([]string{path}, cfg.Files()...), log)
		if err != nil {
			log.Warn("not watching the configuration's files", "error", err)
		} else {
			defer w.close()
			files, changes = w, w.changes()
		}
	}
	served, servers := make(chan error, 2), 1
	go func() { served <- g.Serve(ln) }()
	tlsAddr := "off"
	if tlsLn != nil {
		tlsAddr, servers = tlsLn.Addr().String(), 2
		go func() { served <- g.ServeTLS(tlsLn) }()
	}
	admin := cfg.Admin.Listen // "off"
	if adminAddr != nil {
		admin = adminAddr.String() // the bound address, when the port was 0
	}
	log.Info("sluice serving", "listen", ln.Addr().String(), "tls", tlsAddr, "admin", admin, "routes", len(cfg.Routes),
		"websocket_over_http2", gateway.WebSocketOverHTTP2())
	if ready != nil {
		ready(ln.Addr(), adminAddr, g)
	}
	for {
		select {
		case err := <-served:
			return err
		case <-changes:
			_ = reload()
			continue
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				_ = reload()
				continue
			}
			log.Info("shutting down", "signal", sig.String())
		case <-ctx.Done():
			log.Info("shutting down")
		}
		break
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.D())
	defer cancel()
	err = g.Shutdown(sctx)
	if adminSrv != nil {
		_ = adminSrv.Shutdown(sctx)
	}
	for range servers {
		if serr := <-served; serr != nil && !errors.Is(serr, net.ErrClosed) {
			return serr
		}
	}
	return err
}

// tlsListen is the TLS listener's address in cfg, "" without one.
func tlsListen(cfg *config.Config) string {
	if cfg.TLS == nil {
		return ""
	}
	return cfg.TLS.Listen
}
