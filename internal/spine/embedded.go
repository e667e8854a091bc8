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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	storeDir  string
	onRestart atomic.Pointer[func()]
	stopOnce  sync.Once
	stop      chan struct{}
	stopped   chan struct{}
	restarts  atomic.Int64
	// storeFailing is true while a stream's store refuses writes for want
	// of room, or JetStream could not be started again (see
	// keepStoreWriting).
	storeFailing atomic.Bool
	// down is set while JetStream, stopped for a restart, could not be
	// started again (keepStoreWriting's goroutine only).
	down bool
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
		// A publish is acknowledged only once it is on the disk, not in
		// the OS page cache: what the gateway acknowledged on the strength
		// of that ack (a Stripe event answered 2xx, a queued job, a usage
		// record, a key or connection written) survives a power loss or a
		// kernel crash, where nats-server's default fsyncs the store only
		// every two minutes. Usage events are batched into few messages,
		// so the fsyncs are few for the requests they stand for.
		SyncAlways: true,
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
	if cfg.Logger != nil {
		srv.SetLoggerV2(&serverLogger{log: cfg.Logger}, false, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("spine: embedded server not ready after 10s")
	}
	e := &Embedded{srv: srv, log: log, storeDir: opts.StoreDir, stop: make(chan struct{}), stopped: make(chan struct{})}
	if c := srv.JetStreamConfig(); c != nil {
		e.jsCfg = *c
	}
	if cfg.Cluster == nil {
		go e.keepStoreWriting()
	} else {
		// A member of a cluster is not restarted: nats-server hands a
		// failed stream's leadership to another replica, and shuts
		// JetStream down itself on some errors, which a restart would race.
		close(e.stopped)
	}
	return e, nil
}

// Healing a store that failed a write for want of room.
//
// nats-server keeps the first write error of a stream's file store and from
// then on refuses every write to that stream without an answer, until the
// store is opened again. In one process nothing else would ever open it
// again: a moment of full disk would stop usage recording, and every bucket
// write that failed with it, for the life of the process. So a single
// embedded server watches its streams' health, and when one failed a write
// because the disk was full (ENOSPC, or a quota: nothing else, since a
// restart does not cure an I/O or permission error and would take down the
// streams that still read), it restarts JetStream once the disk has room:
// the streams and buckets are read back from their files (a record cut
// short by the failed write is dropped; it was never acknowledged),
// consumers resume from their stored state, and publishers' retries (usage
// events, under their message ids) are taken; OnStoreRestart's function
// then lets clients subscribe again at once. Attempts back off, so a disk that stays
// nearly full is not hammered.
//
// A job acknowledged while its stream refused writes is held done by its
// consumer, but the work queue could not remove it; read back from its
// files it is in the queue again, below the consumer's acknowledgement
// floor, where nothing delivers or removes it (nats-server clears such
// messages from interest streams only, once, as JetStream starts): it
// would sit there until the queue's age bound. So the work queues are swept
// of the messages their consumers acknowledged, at once after a restart
// and every sweepEvery (a job finished ahead of one queued before it,
// still running, is below the floor once that one is done).
const (
	// storeCheckEvery is how often the streams' health is looked at.
	storeCheckEvery = time.Second
	// firstRestartWait is the wait after a restart before another; each
	// restart doubles it, up to lastRestartWait, and a quarter of an hour
	// without a failure resets it.
	firstRestartWait = time.Second
	lastRestartWait  = time.Minute
	restartCalm      = 15 * time.Minute
	// minFreeToRestart is the room the store's disk must have before a
	// restart is tried (where it can be read; a trial write is made on
	// every system).
	minFreeToRestart = 4 << 20
	// sweepEvery is how often the work queues are swept of acknowledged
	// messages (dropAcknowledged), sweepWait bounds one sweep, and
	// sweepMost the messages it removes.
	sweepEvery = 10 * time.Second
	sweepWait  = 5 * time.Second
	sweepMost  = 256
)

// OnStoreRestart makes fn be called after each restart of JetStream after
// a full disk: clients' subscriptions to JetStream (pull requests,
// watchers) died with it, and a reconnection renews them at once.
func (e *Embedded) OnStoreRestart(fn func()) { e.onRestart.Store(&fn) }

// StoreFailing reports whether a stream's store refuses writes for want of
// room and JetStream was not restarted since.
func (e *Embedded) StoreFailing() bool { return e.storeFailing.Load() }

// StoreRestarts counts the restarts of JetStream after a full disk.
func (e *Embedded) StoreRestarts() int64 { return e.restarts.Load() }

// keepStoreWriting restarts JetStream after a stream's store failed a write
// for want of room, once the disk has some (see above).
func (e *Embedded) keepStoreWriting() {
	defer close(e.stopped)
	tick := time.NewTicker(storeCheckEvery)
	defer tick.Stop()
	wait := firstRestartWait
	var failedAt, next, restartedAt, nextSweep time.Time
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		failure, failing := e.fullDiskFailure()
		if e.down {
			failure, failing = "JetStream could not be started again", true
		}
		e.storeFailing.Store(failing)
		if !failing {
			failedAt = time.Time{}
			if !restartedAt.IsZero() && now.Sub(restartedAt) > restartCalm {
				wait = firstRestartWait
			}
			if !now.Before(nextSweep) && e.srv.JetStreamEnabled() {
				if err := e.dropAcknowledged(); err != nil {
					e.log.Warn("work queues not swept of acknowledged messages", "component", "nats", "err", err)
				}
				nextSweep = now.Add(sweepEvery)
			}
			continue
		}
		if failedAt.IsZero() {
			failedAt = now
			e.log.Error("JetStream refuses writes: the disk is full; it is restarted once the disk has room", "component", "nats", "err", failure)
		}
		if now.Before(next) || !e.roomToWrite() {
			continue
		}
		e.log.Warn("restarting JetStream: the disk has room again", "component", "nats", "failing_for", now.Sub(failedAt).Round(time.Millisecond))
		if err := e.restartJetStream(); err != nil {
			e.log.Error("JetStream restart failed", "component", "nats", "err", err)
		} else {
			e.log.Info("JetStream restarted", "component", "nats")
			e.storeFailing.Store(false)
			failedAt = time.Time{}
			nextSweep = time.Time{}
			if fn := e.onRestart.Load(); fn != nil {
				(*fn)()
			}
		}
		restartedAt = time.Now()
		next = restartedAt.Add(wait)
		wait = min(2*wait, lastRestartWait)
	}
}

// fullDiskFailure answers the first stream write error the server reports
// that a full disk caused.
func (e *Embedded) fullDiskFailure() (string, bool) {
	h := e.srv.Healthz(&server.HealthzOptions{Details: true})
	if h == nil {
		return "", false
	}
	for _, he := range h.Errors {
		if he.Type == server.HealthzErrorStream && outOfRoom(he.Error) {
			return he.Error, true
		}
	}
	return "", false
}

// outOfRoom reports an error text saying the disk (or a quota) is full.
func outOfRoom(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "no space left on device") || strings.Contains(msg, "disk quota exceeded")
}

// roomToWrite reports whether the store's disk has room again: enough free
// space where it can be read, and a trial write in the store's directory.
func (e *Embedded) roomToWrite() bool {
	if free, err := freeBytes(e.storeDir); err == nil && free < minFreeToRestart {
		return false
	}
	f, err := os.CreateTemp(e.storeDir, ".room-*")
	if err != nil {
		return false
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 64<<10))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil
}

// restartJetStream stops JetStream and starts it again with the
// configuration it started with. When the start fails, JetStream stays
// down (e.down) and the next call only tries to start it.
func (e *Embedded) restartJetStream() error {
	if !e.down {
		if !e.srv.JetStreamEnabled() {
			return errors.New("JetStream was shut down by the server; not restarting it")
		}
		if err := e.srv.ShutdownJetStream(); err != nil {
			return err
		}
		e.down = true
	}
	cfg := e.jsCfg
	// The server adds its own subdirectory to the one it is given.
	cfg.StoreDir = e.storeDir
	if err := e.srv.EnableJetStream(&cfg); err != nil {
		// A start that failed half way leaves JetStream marked enabled:
		// clear it for the next try.
		if e.srv.JetStreamEnabled() {
			_ = e.srv.ShutdownJetStream()
		}
		return err
	}
	e.down = false
	e.restarts.Add(1)
	return nil
}

// dropAcknowledged sweeps the work-queue streams of the messages their
// consumers are done with (see above): each consumer's messages up to its
// acknowledgement floor, at most sweepMost in one sweep (the rest go in the
// next ones). Messages of a work queue belong to one consumer each (their
// filters may not overlap), and those a consumer has not yet acknowledged
// all lie above its floor. Below it lie, besides the acknowledged ones, the
// jobs that used up their deliveries without being ended (a worker that
// died on the last attempt): nothing delivers them again, and they go too.
//
// They are deleted one by one, found by their subject from the stream's
// first message: a purge up to the floor would remove them at once, but
// nats-server then also drops the consumer's redeliveries below its next
// message, and a job its worker asked to have again (a NAK, at once or
// after a delay) would come back only after the consumer's AckWait.
func (e *Embedded) dropAcknowledged() error {
	nc, err := nats.Connect("", nats.InProcessServer(e.srv), nats.Name("switchboard-sweep"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepWait)
	defer cancel()
	left := sweepMost
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		if info.Config.Retention != jetstream.WorkQueuePolicy || info.State.Msgs == 0 || left == 0 {
			continue
		}
		s, err := js.Stream(ctx, info.Config.Name)
		if err != nil {
			return err
		}
		consumers := s.ListConsumers(ctx)
		for ci := range consumers.Info() {
			floor := ci.AckFloor.Stream
			if floor < info.State.FirstSeq || left == 0 {
				continue
			}
			filters := ci.Config.FilterSubjects
			if ci.Config.FilterSubject != "" {
				filters = append(filters, ci.Config.FilterSubject)
			}
			if len(filters) == 0 {
				filters = []string{">"}
			}
			for _, f := range filters {
				n, from, to, err := dropUpTo(ctx, s, f, info.State.FirstSeq, floor, left)
				left -= n
				if n > 0 {
					e.log.Warn("removed messages a consumer was done with but its work queue still held", "component", "nats",
						"stream", info.Config.Name, "consumer", ci.Name, "messages", n, "from", from, "to", to)
				}
				if err != nil {
					return fmt.Errorf("stream %s, consumer %s: %w", info.Config.Name, ci.Name, err)
				}
			}
		}
		if err := consumers.Err(); err != nil {
			return err
		}
	}
	return streams.Err()
}

// dropUpTo deletes the stream's messages on subject from sequence seq up to
// floor, at most most of them, and says how many it deleted, the first and
// the last.
func dropUpTo(ctx context.Context, s jetstream.Stream, subject string, seq, floor uint64, most int) (n int, from, to uint64, err error) {
	for n < most {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, from, to, nil
		}
		if err != nil {
			return n, from, to, err
		}
		if m.Sequence > floor {
			return n, from, to, nil
		}
		if err := s.DeleteMsg(ctx, m.Sequence); err != nil {
			// The queue may have removed it meanwhile: an acknowledgement
			// moves the consumer's floor a moment before its message goes.
			if _, gerr := s.GetMsg(ctx, m.Sequence); !errors.Is(gerr, jetstream.ErrMsgNotFound) {
				return n, from, to, fmt.Errorf("delete message %d: %w", m.Sequence, err)
			}
			seq = m.Sequence + 1
			continue
		}
		if n == 0 {
			from = m.Sequence
		}
		n, to, seq = n+1, m.Sequence, m.Sequence+1
	}
	return n, from, to, nil
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
	e.stopOnce.Do(func() { close(e.stop) })
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

// serverLogger forwards nats-server's log lines to slog.
type serverLogger struct{ log *slog.Logger }

func (l *serverLogger) Noticef(format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "component", "nats")
}

func (l *serverLogger) Warnf(format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...), "component", "nats")
}

func (l *serverLogger) Fatalf(format string, v ...any) {
	l.log.Error(fmt.Sprintf(format, v...), "component", "nats")
}

func (l *serverLogger) Errorf(format string, v ...any) {
	l.log.Error(fmt.Sprintf(format, v...), "component", "nats")
}

func (l *serverLogger) Debugf(format string, v ...any) {}

func (l *serverLogger) Tracef(format string, v ...any) {}
