// Package spine is the NATS backbone every role shares: the embedded
// nats-server used by one-process mode and tests, connections to an external
// cluster, and the definitions of the streams and key-value buckets.
package spine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures an in-process nats-server.
type EmbeddedConfig struct {
	// DataDir holds the JetStream file store (under DataDir/nats).
	DataDir string
	// Listen makes the server accept TCP clients on 127.0.0.1 (a random port
	// when Port is 0); without it only in-process connections reach it.
	Listen bool
	Port   int
	// Logger receives the server's warnings and errors.
	Logger *slog.Logger
	// Name is the server's name, unique in a cluster (default
	// "switchboard").
	Name string
	// Cluster, when set, makes the server a member of a NATS cluster (with
	// clustered JetStream); it needs Listen.
	Cluster *ClusterConfig
}

// ClusterConfig places an embedded server in a cluster of nats-servers on
// loopback, as tests and a local multi-node deployment run them.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every member.
	Name string
	// Port is this member's route port on 127.0.0.1.
	Port int
	// Routes are the route URLs (nats://127.0.0.1:<port>) of every member;
	// a member's own is ignored by the server.
	Routes []string
}

// Embedded is a running in-process nats-server with JetStream on.
type Embedded struct {
	srv *server.Server
	log *slog.Logger
	// jsCfg is JetStream's configuration as the server started it (its
	// store bound included), which a restart keeps.
	jsCfg server.JetStreamConfig
	// storeDir is the directory the server was given for its store.
	storeDir string
	// failed is signalled when the server reports a write its store could
	// not make (see serverLogger).
	failed   chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	restarts atomic.Int64
	// storeFailing is true from a failed write until JetStream was
	// restarted.
	storeFailing atomic.Bool
}

// StartEmbedded starts a nats-server in this process and waits until it
// accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("spine: embedded server needs a data directory")
	}
	name := cfg.Name
	if name == "" {
		name = "switchboard"
	}
	opts := &server.Options{
		ServerName: name,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.DataDir, "nats"),
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
		DontListen: !cfg.Listen,
		Host:       "127.0.0.1",
		Port:       cfg.Port,
		// The in-process server never needs the HTTP monitor or cluster ports.
		HTTPPort: 0,
	}
	if cfg.Listen && cfg.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	if c := cfg.Cluster; c != nil {
		if !cfg.Listen {
			return nil, errors.New("spine: a clustered embedded server must listen")
		}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: c.Port}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("spine: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("spine: new embedded server: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Embedded{srv: srv, log: log, storeDir: opts.StoreDir, failed: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	// The logger is set even when nothing is logged: it is how a failed
	// write is learnt of.
	srv.SetLoggerV2(&serverLogger{log: log, failed: e.writeFailed}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("spine: embedded server not ready after 10s")
	}
	if c := srv.JetStreamConfig(); c != nil {
		e.jsCfg = *c
	}
	go e.keepStoreWriting()
	return e, nil
}

// Healing a store that failed a write.
//
// nats-server keeps the first write error of a stream's file store (a full
// disk: ENOSPC) and from then on refuses every write to that stream without
// an answer, until the store is opened again; on some errors (a permission
// denied) it shuts JetStream down. In one process nothing else would ever
// open it again: a moment of full disk would stop usage recording, and every
// bucket write that failed with it, for the life of the process. So the
// embedded server restarts JetStream once the disk has room again: the
// streams and buckets are read back from their files (a record cut short
// by the failed write is dropped; it was never acknowledged), consumers
// resume from their stored state, and publishers' retries (usage events,
// under their message ids) are taken. Attempts back off, so a disk that
// stays nearly full is not hammered.
const (
	// storeCheckEvery is how often the state of the store is looked at.
	storeCheckEvery = time.Second
	// firstRestartWait is the wait before the first restart after a
	// failure; each restart that does not hold doubles it, up to
	// lastRestartWait, and a quarter of an hour without a failure resets it.
	firstRestartWait = time.Second
	lastRestartWait  = time.Minute
	restartCalm      = 15 * time.Minute
	// minFreeToRestart is the room the store's disk must have before a
	// restart is tried.
	minFreeToRestart = 4 << 20
)

// writeFailed notes a write the store could not make.
func (e *Embedded) writeFailed() {
	e.storeFailing.Store(true)
	select {
	case e.failed <- struct{}{}:
	default:
	}
}

// StoreFailing reports whether JetStream's store failed a write (or
// JetStream was shut down) and has not been restarted since.
func (e *Embedded) StoreFailing() bool {
	return e.storeFailing.Load() || !e.srv.JetStreamEnabled()
}

// StoreRestarts counts the restarts of JetStream after a failed write.
func (e *Embedded) StoreRestarts() int64 { return e.restarts.Load() }

// keepStoreWriting restarts JetStream after a write its store failed, or
// after the server shut it down, once the disk has room (see above).
func (e *Embedded) keepStoreWriting() {
	defer close(e.stopped)
	tick := time.NewTicker(storeCheckEvery)
	defer tick.Stop()
	wait := firstRestartWait
	var failedAt, restartedAt time.Time
	for {
		select {
		case <-e.stop:
			return
		case <-e.failed:
		case <-tick.C:
		}
		if !e.StoreFailing() {
			continue
		}
		now := time.Now()
		if failedAt.IsZero() {
			failedAt = now
			if now.Sub(restartedAt) > restartCalm {
				wait = firstRestartWait
			}
		}
		if since := min(now.Sub(failedAt), now.Sub(restartedAt)); since < wait {
			continue
		}
		if free, err := freeBytes(e.storeDir); err == nil && free < minFreeToRestart {
			continue
		}
		e.log.Warn("restarting JetStream after a failed write", "component", "nats", "failing_for", now.Sub(failedAt).Round(time.Millisecond))
		if err := e.restartJetStream(); err != nil {
			e.log.Error("JetStream restart failed", "component", "nats", "err", err)
		} else {
			e.log.Info("JetStream restarted", "component", "nats")
			failedAt = time.Time{}
		}
		restartedAt = time.Now()
		wait = min(2*wait, lastRestartWait)
	}
}

// restartJetStream stops JetStream (if the server has not) and starts it
// again with the configuration it started with.
func (e *Embedded) restartJetStream() error {
	e.storeFailing.Store(false)
	if e.srv.JetStreamEnabled() {
		if err := e.srv.ShutdownJetStream(); err != nil {
			e.storeFailing.Store(true)
			return err
		}
	}
	cfg := e.jsCfg
	// The server adds its own subdirectory to the one it is given.
	cfg.StoreDir = e.storeDir
	if err := e.srv.EnableJetStream(&cfg); err != nil {
		e.storeFailing.Store(true)
		return err
	}
	e.restarts.Add(1)
	return nil
}

// Connect opens a client connection to the embedded server without a network
// hop.
func (e *Embedded) Connect(name string, logger *slog.Logger) (*nats.Conn, error) {
	return nats.Connect("", append(connectOptions(name, logger), nats.InProcessServer(e.srv))...)
}

// ClientURL is the TCP URL of the server; empty when it does not listen.
func (e *Embedded) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Shutdown stops the server and waits until it has stopped.
func (e *Embedded) Shutdown() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.stopped
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// ConnectWait bounds how long Connect waits for a first NATS server to
// answer (sooner when the caller's context ends).
const ConnectWait = 2 * time.Minute

// Connect opens a connection to an external NATS server or cluster (a comma
// separated list of URLs; the others are learnt from the cluster). A server
// that is not reachable yet (the cluster starting with the roles) is waited
// for, up to ConnectWait; from then on the connection reconnects, to any
// member, for as long as the process lives.
func Connect(ctx context.Context, url, name string, logger *slog.Logger) (*nats.Conn, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	connected := make(chan struct{}, 1)
	opts := append(connectOptions(name, logger),
		nats.RetryOnFailedConnect(true),
		nats.ConnectHandler(func(*nats.Conn) {
			select {
			case connected <- struct{}{}:
			default:
			}
		}),
	)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		// The URL may carry credentials; the error names none.
		return nil, fmt.Errorf("spine: connect to nats: %w", err)
	}
	if nc.IsConnected() {
		return nc, nil
	}
	logger.Info("waiting for a nats server", "wait", ConnectWait)
	ctx, cancel := context.WithTimeout(ctx, ConnectWait)
	defer cancel()
	select {
	case <-connected:
		return nc, nil
	case <-ctx.Done():
		nc.Close()
		return nil, fmt.Errorf("spine: no nats server answered: %w", ctx.Err())
	}
}

func connectOptions(name string, logger *slog.Logger) []nats.Option {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		// A member that vanished without closing its sockets is noticed
		// within about 15 s, and the connection moves to another.
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			logger.Error("nats async error", "subject", subject, "err", err)
		}),
	}
}

// serverLogger forwards nats-server's log lines to slog, and calls failed
// on a line saying the store failed a write: the server reports that in
// its log only.
type serverLogger struct {
	log    *slog.Logger
	failed func()
}

// writeFailureLines are what nats-server logs when a store failed a write
// ("Critical write error", "critical write error") or JetStream is shut
// down for one ("disabling JetStream", "will be DISABLED").
var writeFailureLines = []string{"critical write error", "disabling jetstream", "will be disabled"}

func (l *serverLogger) notice(line string) {
	low := strings.ToLower(line)
	for _, s := range writeFailureLines {
		if strings.Contains(low, s) {
			l.failed()
			return
		}
	}
}

func (l *serverLogger) Noticef(format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "component", "nats")
}

func (l *serverLogger) Warnf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	l.notice(line)
	l.log.Warn(line, "component", "nats")
}

func (l *serverLogger) Fatalf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	l.notice(line)
	l.log.Error(line, "component", "nats")
}

func (l *serverLogger) Errorf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	l.notice(line)
	l.log.Error(line, "component", "nats")
}

func (l *serverLogger) Debugf(format string, v ...any) {}

func (l *serverLogger) Tracef(format string, v ...any) {}
