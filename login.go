package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/switchboardhq/switchboard/internal/logincli"
	"github.com/switchboardhq/switchboard/internal/secrets"
	"github.com/switchboardhq/switchboard/node"
)

const loginUsage = `usage: switchboard login <provider> [flags]

Signs in to an OAuth subscription provider (github-copilot, qwen, kimi: a code
to enter at a URL; codex: a browser sign-in with a loopback callback; claude:
a browser sign-in whose code#state is pasted back) through a running
switchboard, and stores the result as a new connection.
`

// login runs `switchboard login <provider>` against a running service.
func login(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, loginUsage)
		fs.PrintDefaults()
	}
	serviceURL := fs.String("url", or(getenv("SWITCHBOARD_URL"), "http://127.0.0.1:8080"), "the running service's HTTP address [$SWITCHBOARD_URL]")
	token := fs.String("admin-token", getenv("SWITCHBOARD_ADMIN_TOKEN"), "admin token (default: the data directory's admin.token) [$SWITCHBOARD_ADMIN_TOKEN]")
	dataDir := fs.String("data-dir", or(getenv("SWITCHBOARD_DATA_DIR"), "./data"), "data directory holding a generated admin token [$SWITCHBOARD_DATA_DIR]")
	name := fs.String("name", "", "name of the new connection (default: the provider id)")
	proxyURL := fs.String("proxy-url", "", "http(s) or socks5 proxy for the sign-in and the connection")
	redirect := fs.String("redirect-uri", "", "loopback redirect of browser sign-ins (default: the provider's)")
	var provider string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		provider, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if provider == "" && fs.NArg() > 0 {
		provider = fs.Arg(0)
	}
	if provider == "" {
		fs.Usage()
		return 2
	}
	if *token == "" {
		b, err := secrets.Load(filepath.Join(*dataDir, node.AdminTokenFile))
		if err != nil {
			fmt.Fprintf(stderr, "switchboard login: SWITCHBOARD_ADMIN_TOKEN is not set and %s has no generated admin token\n", *dataDir)
			return 1
		}
		*token = string(b)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err := logincli.Run(ctx, logincli.Options{
		URL: *serviceURL, AdminToken: *token, Provider: provider,
		Name: *name, ProxyURL: *proxyURL, RedirectURI: *redirect,
		Out: stdout, In: stdin,
	})
	if err != nil {
		fmt.Fprintf(stderr, "switchboard login: %v\n", err)
		return 1
	}
	return 0
}
