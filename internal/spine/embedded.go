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
	if cfg.Logger != nil {
		srv.SetLoggerV2(&serverLogger{log: cfg.Logger}, false, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("spine: embedded server not ready after 10s")
	}
	return &Embedded{srv: srv}, nil
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
