package rpcauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc/credentials"
)

// TLSConfig names the PEM files of a process's gRPC TLS.
type TLSConfig struct {
	// CertFile and KeyFile are this process's certificate and key: served by
	// its gRPC listener, and presented as client certificate when it dials
	// with TLS (so a certificate used both ways needs both the serverAuth and
	// clientAuth key usages).
	CertFile, KeyFile string
	// ClientCAFile makes the listener require client certificates signed by
	// these CAs.
	ClientCAFile string
	// CAFile makes dialers use TLS and verify servers against these CAs.
	CAFile string
}

// ServerEnabled reports whether the listener serves TLS.
func (c TLSConfig) ServerEnabled() bool { return c.CertFile != "" }

// ClientEnabled reports whether dialers use TLS.
func (c TLSConfig) ClientEnabled() bool { return c.CAFile != "" }

// ListenTLS wraps a listener in TLS with this process's certificate,
// requiring client certificates when ClientCAFile is set. The gRPC server
// keeps plaintext for its in-process listener; only network connections are
// wrapped.
func ListenTLS(ln net.Listener, c TLSConfig) (net.Listener, error) {
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, errors.New("grpc tls: a certificate and a key file are required")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("grpc tls: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if c.ClientCAFile != "" {
		pool, err := loadPool(c.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tls.NewListener(ln, cfg), nil
}

// ClientTLS returns dialers' transport credentials: servers verified against
// CAFile, this process's certificate presented when it has one.
func ClientTLS(c TLSConfig) (credentials.TransportCredentials, error) {
	pool, err := loadPool(c.CAFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if c.CertFile != "" && c.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("grpc tls: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("grpc tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("grpc tls: no PEM certificate in %s", file)
	}
	return pool, nil
}
